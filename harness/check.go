package harness

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
)

// Check modes, as recorded in CheckResult.Mode.
const (
	ModeBitwise  = "bitwise"
	ModeULP      = "ulp"
	ModeAllclose = "allclose"
	// ModeEmpty is the comparison of an empty output (a dim of size 0, e.g. an empty batch):
	// dtype and shape are compared exactly and there is no element to compare, so neither a
	// tolerance nor the magnitude guard applies. It is a real check, not a pass on nothing:
	// an engine that returns [3] for torch's [0] or [3,0] for [0,3] fails the shape rule.
	ModeEmpty = "empty"
)

// CheckResult is the outcome of comparing one output with its expected value. Every float
// field is finite (overflowing differences are clamped to the largest float64) so that the
// result always encodes as JSON.
type CheckResult struct {
	Pass   bool   `json:"pass"`
	Reason string `json:"reason,omitempty"`
	Mode   string `json:"mode"`
	// Elements is the number of elements compared.
	Elements int `json:"elements"`
	// Mismatches counts every element that does not match, NonFinite those among them whose
	// NaN/Inf position or Inf sign differs (never absorbed by the budget).
	Mismatches int `json:"mismatches"`
	NonFinite  int `json:"nonfinite_mismatches"`
	// MaxAbs, MaxRel and MaxULP are taken over elements where both sides are finite; MaxRel
	// skips elements whose expected value is 0.
	MaxAbs float64 `json:"max_abs"`
	MaxRel float64 `json:"max_rel"`
	MaxULP uint64  `json:"max_ulp"`
	// Worst is the flat index of the first NaN/Inf mismatch, else of the element closest to
	// (or furthest beyond) its allowed error; -1 when nothing was compared.
	Worst     int    `json:"worst"`
	WorstGot  string `json:"worst_got,omitempty"`
	WorstWant string `json:"worst_want,omitempty"`
	// RefRMS is the RMS of the finite expected values (float outputs), what the magnitude
	// guard compares ATol with.
	RefRMS    float64   `json:"ref_rms"`
	Tolerance Tolerance `json:"tolerance"`
	// BoundRMS is the RMS of the per-element error bound of CheckBound (0 for Check), what
	// the magnitude guard compares with RefRMS besides ATol.
	BoundRMS float64 `json:"bound_rms,omitempty"`
}

// Check compares got with want under tol. Rules, in the order their failures are reported:
//   - dtype and shape must be equal and both tensors well formed; for an empty output (a dim
//     of size 0) that is the whole check (ModeEmpty) and passes without the magnitude guard;
//   - Bitwise: every element's bit pattern must be equal (Budget is ignored);
//   - otherwise NaN positions must match exactly and Inf positions and signs must match,
//     whatever the budget;
//   - an output whose elements all have one value fails when the reference has two or more
//     values, whatever the tolerance (so a constant output never passes a random-input test);
//   - magnitude guard (float outputs, unless disabled with NoGuard): the check fails as
//     meaningless when ATol > Guard*RefRMS or, outside ULP mode, RTol >= 1;
//   - finite elements match when |got-want| <= ATol + RTol*|want| (ULP mode: within MaxULP
//     steps or within ATol); more than Budget mismatches fail.
func Check(got, want *tensor.Tensor, tol Tolerance) CheckResult {
	return CheckBound(got, want, tol, nil)
}

// CheckBound is Check with a per-element absolute error bound added to what tol allows:
// element i matches when |got-want| <= ATol + RTol*|want| + bound[i] (ULP mode: within MaxULP
// steps or within ATol + bound[i]). It is for results whose legitimate error depends on the
// inputs of each element, not on its value: a K-reduction on an accumulator narrower than
// f32, whose error scales with sum_k |a_ik*b_kj| (harness/accum). The magnitude guard also
// applies to the bound: when RMS(bound) > Guard*RefRMS the check fails as meaningless. A
// bound cannot widen a bitwise check, and it must have one finite value >= 0 per element; a nil
// bound is Check.
func CheckBound(got, want *tensor.Tensor, tol Tolerance, bound []float64) CheckResult {
	r := CheckResult{Mode: modeOf(tol), Worst: -1, Tolerance: tol}
	if err := tol.Validate(); err != nil {
		r.Tolerance = Tolerance{}
		return r.fail(err.Error())
	}
	if msg := structural(got, want); msg != "" {
		return r.fail(msg)
	}
	if want.Len() == 0 && len(bound) == 0 {
		// The magnitude guard would call this meaningless (the RMS of nothing is 0), but the
		// shape was the whole answer and it matched exactly.
		r.Mode, r.Pass = ModeEmpty, true
		return r
	}
	switch {
	case bound == nil:
	case tol.Bitwise:
		return r.fail("a per-element error bound cannot widen a bitwise check")
	case len(bound) != want.Len():
		return r.fail(fmt.Sprintf("error bound has %d elements, want %s has %d", len(bound), want.TypeString(), want.Len()))
	}
	for i, b := range bound {
		if !(b >= 0) || math.IsInf(b, 0) {
			return r.fail(fmt.Sprintf("error bound at %s is %g, want a finite number >= 0", index(i, want.Shape), b))
		}
	}
	c := checker{dt: want.DType, tol: tol, got: got, want: want, r: &r, bound: bound}
	c.run()
	return c.verdict()
}

func modeOf(t Tolerance) string {
	switch {
	case t.Bitwise:
		return ModeBitwise
	case t.MaxULP > 0:
		return ModeULP
	}
	return ModeAllclose
}

func (r CheckResult) fail(reason string) CheckResult {
	r.Pass = false
	r.Reason = reason
	return r
}

// structural returns why got and want cannot be compared element by element, or "".
func structural(got, want *tensor.Tensor) string {
	switch {
	case got == nil && want == nil:
		return "no tensors to compare (got and want are nil)"
	case got == nil:
		return "no output (got is nil), want " + want.TypeString()
	case want == nil:
		return "no expected value (want is nil), got " + got.TypeString()
	case !want.DType.Valid():
		return fmt.Sprintf("expected value has invalid dtype %s", want.DType)
	case got.DType != want.DType:
		return fmt.Sprintf("dtype: got %s, want %s", got.TypeString(), want.TypeString())
	case !slices.Equal(got.Shape, want.Shape):
		return fmt.Sprintf("shape: got %s, want %s", got.TypeString(), want.TypeString())
	}
	for _, s := range []struct {
		name string
		t    *tensor.Tensor
	}{{"got", got}, {"want", want}} {
		if need := s.t.Len() * s.t.DType.Size(); len(s.t.Data) != need {
			return fmt.Sprintf("malformed %s: %s holds %d bytes, needs %d", s.name, s.t.TypeString(), len(s.t.Data), need)
		}
	}
	return ""
}

// checker holds the running state of one comparison.
type checker struct {
	dt        numerics.DType
	tol       Tolerance
	got, want *tensor.Tensor
	r         *CheckResult
	// bound is CheckBound's per-element allowance, nil for Check.
	bound []float64

	worstScore float64
	worstHard  bool
	firstHard  int
	firstSoft  int
	softDetail string
}

func (c *checker) run() {
	n := c.want.Len()
	c.r.Elements = n
	c.worstScore = -1
	c.firstHard, c.firstSoft = -1, -1
	for i := range n {
		c.element(i)
	}
	if c.dt.IsFloat() {
		c.r.RefRMS = finiteRMS(c.want)
	}
	if c.bound != nil {
		c.r.BoundRMS = rms(c.bound)
	}
	if c.r.Worst >= 0 {
		c.r.WorstGot = c.show(c.got, c.r.Worst)
		c.r.WorstWant = c.show(c.want, c.r.Worst)
	}
	c.r.MaxAbs, c.r.MaxRel = clampFinite(c.r.MaxAbs), clampFinite(c.r.MaxRel)
}

func (c *checker) element(i int) {
	ba, be := c.got.Bits(i), c.want.Bits(i)
	a, e := numerics.Decode(c.dt, ba), numerics.Decode(c.dt, be)
	var ok, hard bool
	var score float64
	switch {
	case math.IsNaN(a) || math.IsNaN(e):
		ok = math.IsNaN(a) && math.IsNaN(e)
		hard = !ok
	case math.IsInf(a, 0) || math.IsInf(e, 0):
		ok = a == e
		hard = !ok
	default:
		d := math.Abs(a - e)
		c.r.MaxAbs = math.Max(c.r.MaxAbs, d)
		if e != 0 {
			c.r.MaxRel = math.Max(c.r.MaxRel, d/math.Abs(e))
		}
		u := numerics.ULPDistance(c.dt, ba, be)
		c.r.MaxULP = max(c.r.MaxULP, u)
		var extra float64
		if c.bound != nil {
			extra = c.bound[i]
		}
		if c.tol.MaxULP > 0 {
			ok = u <= c.tol.MaxULP || d <= c.tol.ATol+extra
			score = float64(u) / float64(c.tol.MaxULP)
		} else {
			allowed := c.tol.ATol + c.tol.RTol*math.Abs(e) + extra
			ok = d <= allowed
			score = ratio(d, allowed)
		}
		if !ok && c.firstSoft < 0 {
			c.firstSoft = i
			c.softDetail = c.excess(d, e, u, extra)
		}
	}
	if c.tol.Bitwise {
		ok = ba == be
		hard = false
		if !ok {
			score = math.Inf(1)
		}
	}
	switch {
	case hard:
		c.r.Mismatches++
		c.r.NonFinite++
		if c.firstHard < 0 {
			c.firstHard = i
		}
		if !c.worstHard {
			c.worstHard = true
			c.r.Worst = i
		}
	case !ok:
		c.r.Mismatches++
		if c.tol.Bitwise && c.firstSoft < 0 {
			c.firstSoft = i
		}
	}
	if !c.worstHard && score > c.worstScore {
		c.worstScore = score
		c.r.Worst = i
	}
}

// ratio is d/allowed with 0/0 = 0 and d/0 = +Inf.
func ratio(d, allowed float64) float64 {
	if allowed == 0 {
		if d == 0 {
			return 0
		}
		return math.Inf(1)
	}
	return d / allowed
}

func (c *checker) excess(d, e float64, u uint64, extra float64) string {
	var s string
	if c.tol.MaxULP > 0 {
		s = fmt.Sprintf("%d ulp > %d and |diff| %g > atol %g", u, c.tol.MaxULP, d, c.tol.ATol+extra)
	} else {
		s = fmt.Sprintf("|diff| %g > %g", d, c.tol.ATol+c.tol.RTol*math.Abs(e)+extra)
	}
	if c.bound != nil {
		s += fmt.Sprintf(" (error bound %g of it)", extra)
	}
	return s
}

// verdict applies the whole-tensor rules and composes the reason from every rule that failed.
func (c *checker) verdict() CheckResult {
	r := c.r
	var reasons []string
	if c.tol.Bitwise {
		if r.Mismatches > 0 {
			i := c.firstSoft
			reasons = append(reasons, fmt.Sprintf("%d of %d elements differ bitwise; first at %s: got %s, want %s",
				r.Mismatches, r.Elements, index(i, c.want.Shape), c.showBits(c.got, i), c.showBits(c.want, i)))
		}
	} else if r.NonFinite > 0 {
		i := c.firstHard
		reasons = append(reasons, fmt.Sprintf("NaN/Inf positions differ at %d of %d elements; first at %s: got %s, want %s",
			r.NonFinite, r.Elements, index(i, c.want.Shape), c.show(c.got, i), c.show(c.want, i)))
	}
	if r.Elements >= 2 && oneValue(c.got) && !oneValue(c.want) {
		reasons = append(reasons, fmt.Sprintf("constant output: every element is %s but the reference varies", c.show(c.got, 0)))
	}
	if g := c.tol.guard(); g > 0 && c.dt.IsFloat() && !c.tol.Bitwise {
		if c.tol.ATol > g*r.RefRMS {
			reasons = append(reasons, fmt.Sprintf("meaningless: atol %g exceeds %g x the reference RMS %g, so a zero output would pass; tighten atol (or use NoGuard for a legitimately tiny reference)",
				c.tol.ATol, g, r.RefRMS))
		} else if r.BoundRMS > g*r.RefRMS {
			reasons = append(reasons, fmt.Sprintf("meaningless: the error bound's RMS %g exceeds %g x the reference RMS %g, so a zero output would pass",
				r.BoundRMS, g, r.RefRMS))
		} else if c.tol.MaxULP == 0 && c.tol.RTol >= 1 {
			reasons = append(reasons, fmt.Sprintf("meaningless: rtol %g >= 1 lets a zero output pass every element", c.tol.RTol))
		}
	}
	if soft := r.Mismatches - r.NonFinite; !c.tol.Bitwise && soft > c.tol.Budget {
		i := c.firstSoft
		reasons = append(reasons, fmt.Sprintf("%d of %d elements out of tolerance (%s); first at %s: got %s, want %s (%s)",
			soft, r.Elements, c.tol, index(i, c.want.Shape), c.show(c.got, i), c.show(c.want, i), c.softDetail))
	}
	r.Pass = len(reasons) == 0
	r.Reason = strings.Join(reasons, "; ")
	return *r
}

// oneValue reports whether every element of t has the same value (-0 == +0, NaN == NaN).
func oneValue(t *tensor.Tensor) bool {
	if t.Len() == 0 {
		return true
	}
	first := t.Float64(0)
	for i := 1; i < t.Len(); i++ {
		v := t.Float64(i)
		if v != first && !(math.IsNaN(v) && math.IsNaN(first)) {
			return false
		}
	}
	return true
}

// rms is the root mean square of v (finite values >= 0, as CheckBound requires).
func rms(v []float64) float64 {
	var peak float64
	for _, x := range v {
		peak = math.Max(peak, x)
	}
	if peak == 0 {
		return 0
	}
	var sum float64
	for _, x := range v {
		sum += (x / peak) * (x / peak)
	}
	return peak * math.Sqrt(sum/float64(len(v)))
}

// finiteRMS is the root mean square of t's finite values, scaled by the largest magnitude so
// that squaring cannot overflow (f64 values near 1e300).
func finiteRMS(t *tensor.Tensor) float64 {
	var peak float64
	var count int
	for i := range t.Len() {
		v := t.Float64(i)
		if !math.IsNaN(v) && !math.IsInf(v, 0) {
			peak = math.Max(peak, math.Abs(v))
			count++
		}
	}
	if peak == 0 {
		return 0
	}
	var sum float64
	for i := range t.Len() {
		v := t.Float64(i)
		if !math.IsNaN(v) && !math.IsInf(v, 0) {
			s := v / peak
			sum += s * s
		}
	}
	return peak * math.Sqrt(sum/float64(count))
}

func clampFinite(v float64) float64 {
	switch {
	case math.IsNaN(v):
		return 0
	case math.IsInf(v, 1):
		return math.MaxFloat64
	case math.IsInf(v, -1):
		return -math.MaxFloat64
	}
	return v
}

func (c *checker) show(t *tensor.Tensor, i int) string {
	return strconv.FormatFloat(t.Float64(i), 'g', -1, 64)
}

func (c *checker) showBits(t *tensor.Tensor, i int) string {
	return fmt.Sprintf("%s (0x%0*x)", c.show(t, i), 2*t.DType.Size(), t.Bits(i))
}

// index renders flat index i of shape as "[2,0,5]".
func index(i int, shape []int) string {
	if i < 0 {
		return "[?]"
	}
	parts := make([]string, len(shape))
	strides := tensor.Strides(shape)
	for k := range shape {
		parts[k] = strconv.Itoa(i / strides[k])
		i %= strides[k]
	}
	return "[" + strings.Join(parts, ",") + "]"
}
