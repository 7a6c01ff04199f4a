package collectives

import (
	"math"

	"github.com/tessera-qa/tessera-qa/collectives/bitref"
	"github.com/tessera-qa/tessera-qa/engine/dist"
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/failpoint"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

// The reference: every rank rebuilds the global answer from every rank's inputs (gen) in
// float64 and compares its own output with it element by element, counting nccl-tests'
// #wrong. What "equal" means:
//
//   - data movement (all_gather, broadcast, all_to_all), max, min and every int reduction:
//     bit for bit. Ints sum in int64 and wrap to the dtype; int avg truncates toward zero.
//   - float sum and avg in deterministic and fast mode: |got - want| <= atol + rtol·|want| +
//     (n-1)·u·S, where (rtol, atol) are the dtype's defaults (design.md §7, docs/tolerances.md),
//     S is the sum of the contributions' magnitudes (divided by n for avg) and u the unit
//     roundoff of the accumulation (2^-53 for f64, 2^-24 for every narrower float, which
//     dist accumulates in f32). The last term is the classic bound of n-1 rounded additions,
//     so the budget grows with the world size and with cancellation, never with luck.
//   - float sum in exact mode: the correctly rounded (nearest even) value of the exact sum,
//     bit for bit. Exact-mode avg rounds twice by design (engine/dist/exact.Avg), so it gets
//     the tolerance above.
//
// Inputs are never NaN, never ±0 and never overflow a sum, so NaN and signed-zero rules do not
// enter; an output NaN is always wrong.

type tol struct{ rtol, atol float64 }

// tolerances are design.md §7's defaults per output dtype.
var tolerances = map[numerics.DType]tol{
	numerics.F64: {1e-12, 1e-12}, numerics.F32: {1.3e-6, 1e-5}, numerics.F16: {1e-3, 1e-5},
	numerics.BF16: {1.6e-2, 1e-5}, numerics.F8E4M3: {1.25e-1, 1e-2}, numerics.F8E5M2: {2.5e-1, 1e-2},
}

// verifier checks one rank's output of one case.
type verifier struct {
	c    Case
	n    int
	mode dist.Mode
	g    gen
	vals []float64 // scratch: one element's contributions
	// magnitude guard (design.md §7): the mean |want| of the float reductions checked.
	absSum  float64
	checked int
}

func newVerifier(c Case, n int, mode dist.Mode, g gen) *verifier {
	return &verifier{c: c, n: n, mode: mode, g: g}
}

// wrong counts the elements of rank r's output out (the op's receive buffer) that differ
// from the global answer.
func (v *verifier) wrong(r int, out []byte) int64 {
	c, n, sz := v.c, v.n, v.c.DType.Size()
	_, recvN, _ := c.Buffers(n)
	if len(out) != recvN*sz {
		return int64(recvN)
	}
	var bad int64
	switch c.Op {
	case AllReduce:
		for i := 0; i < recvN; i++ {
			if !v.reduced(v.ranks(i), bitref.Bits(out, i, sz)) {
				bad++
			}
		}
	case ReduceScatter:
		for i := 0; i < recvN; i++ {
			if !v.reduced(v.ranks(r*recvN+i), bitref.Bits(out, i, sz)) {
				bad++
			}
		}
	case AllGather:
		per := recvN / max(n, 1)
		for i := 0; i < recvN; i++ {
			if bitref.Bits(out, i, sz) != v.g.bits(uint64(i/per), i%per) {
				bad++
			}
		}
	case Broadcast:
		for i := 0; i < recvN; i++ {
			if bitref.Bits(out, i, sz) != v.g.bits(uint64(c.Root), i) {
				bad++
			}
		}
	case AllToAll:
		per := recvN / max(n, 1)
		for i := 0; i < recvN; i++ {
			if bitref.Bits(out, i, sz) != v.g.bits(uint64(i/per), r*per+i%per) {
				bad++
			}
		}
	}
	return bad
}

// wrongSplit counts the wrong elements among [lo, hi) of an exact-mode all_reduce over k
// split contributions. Each rank checks its own share; that every rank holds the same bits is
// checked on the digests (buildRow), so together every element of every rank is judged once.
func (v *verifier) wrongSplit(k int, out []byte, lo, hi int) int64 {
	sz := v.c.DType.Size()
	var bad int64
	for i := lo; i < hi && i < len(out)/sz; i++ {
		v.vals = v.vals[:0]
		for j := range k {
			v.vals = append(v.vals, v.g.value(splitStream(j), i))
		}
		if !v.reduced(v.vals, bitref.Bits(out, i, sz)) {
			bad++
		}
	}
	return bad
}

// ranks returns every rank's contribution to element i.
func (v *verifier) ranks(i int) []float64 {
	v.vals = v.vals[:0]
	for q := range v.n {
		v.vals = append(v.vals, v.g.value(uint64(q), i))
	}
	return v.vals
}

// guardMin is the number of answers the magnitude guard needs: below it one cancelling sum
// would decide.
const guardMin = 64

// meaningless reports a float reduction check whose tolerance is not small against the
// answers it judged (design.md §7's magnitude guard): it could pass an all-zero output.
func (v *verifier) meaningless() error {
	if v.checked < guardMin {
		return nil
	}
	t := tolerances[v.c.DType]
	if mean := v.absSum / float64(v.checked); mean < 10*t.atol {
		return errs.New(errs.Internal, "collectives %s: mean |answer| %g is not large against atol %g: the check would be meaningless (an input generator bug)",
			v.c.Name(), mean, t.atol)
	}
	return nil
}

// reduced reports whether got is the reduction of vals.
func (v *verifier) reduced(vals []float64, got uint64) bool {
	dt, red := v.c.DType, v.c.Red
	g := numerics.Decode(dt, got)
	if red == dist.Max || red == dist.Min {
		want := vals[0]
		for _, x := range vals[1:] {
			if (red == dist.Max && x > want) || (red == dist.Min && x < want) {
				want = x
			}
		}
		return g == want
	}
	if dt.IsInt() {
		var s int64
		for _, x := range vals {
			s += int64(x)
		}
		if red == dist.Avg {
			s /= int64(len(vals))
		}
		return int64(g) == numerics.WrapInt(dt, s)
	}
	if v.mode == dist.Exact && red == dist.Sum {
		want := RoundSum(dt, vals)
		v.absSum += math.Abs(numerics.Decode(dt, want))
		v.checked++
		return got == want
	}
	var want, mag float64
	for _, x := range vals {
		want += x
		mag += math.Abs(x)
	}
	if red == dist.Avg {
		want /= float64(len(vals))
		mag /= float64(len(vals))
	}
	v.absSum += math.Abs(want)
	v.checked++
	if g != g {
		return false
	}
	t := tolerances[dt]
	u := math.Ldexp(1, -24)
	if dt == numerics.F64 {
		u = math.Ldexp(1, -53)
	}
	return math.Abs(g-want) <= t.atol+t.rtol*failpoint.Pick(failpoint.JudgeCollectivesRtolOfMagnitudes, math.Abs(want), mag)+float64(len(vals)-1)*u*mag
}

// RoundSum is the correctly rounded (to nearest, ties to even) sum of vals in dtype dt, as a
// bit pattern: the value exact mode must return. vals are finite values of dt whose sum is in
// dt's range. A zero sum is +0 (the inputs here are never zero).
//
// Method: Shewchuk's non-overlapping partials hold the exact sum; Python's fsum rounding
// turns them into the correctly rounded float64 r. For a narrower dt, rounding r again is
// wrong only when r falls exactly on a midpoint between two dt values (every such midpoint is
// a float64, so no other double rounding can happen); then the sign of the exact residual
// (sum - r) decides. The tests check it against math/big.
func RoundSum(dt numerics.DType, vals []float64) uint64 {
	var buf [16]float64
	partials := msum(buf[:0], vals)
	if len(partials) <= 1 {
		var s float64
		if len(partials) == 1 {
			s = partials[0]
		}
		// The sum is a float64 exactly: one rounding to dt is the correct one.
		return numerics.Encode(dt, s+0) // +0 turns -0 into +0
	}
	r := fsumRound(partials)
	if dt == numerics.F64 {
		return numerics.Encode(dt, r+0)
	}
	tz := numerics.EncodeMode(dt, r, numerics.RoundTowardZero)
	lo := numerics.Decode(dt, tz)
	if lo == r {
		return tz
	}
	away := tz + 1 // sign-magnitude: the next magnitude, away from zero
	if mid := (lo + numerics.Decode(dt, away)) / 2; r != mid {
		return numerics.Encode(dt, r)
	}
	var buf2 [17]float64
	res := msum(buf2[:0], append(partials, -r))
	// The largest non-zero partial of a non-overlapping expansion carries its sign (msum may
	// leave a zero on top).
	top := 0.0
	for k := len(res) - 1; k >= 0 && top == 0; k-- {
		top = res[k]
	}
	switch {
	case top == 0:
		return numerics.Encode(dt, r) // an exact tie: nearest even
	case (top > 0) == (r > 0):
		return away
	}
	return tz
}

// msum appends to dst Shewchuk's partials of vals: non-overlapping float64s, increasing in
// magnitude, whose exact sum is the exact sum of vals (the first half of Python's fsum).
func msum(dst, vals []float64) []float64 {
	for _, x := range vals {
		j := 0
		for _, y := range dst {
			if math.Abs(x) < math.Abs(y) {
				x, y = y, x
			}
			hi := x + y
			lo := y - (hi - x)
			if lo != 0 {
				dst[j] = lo
				j++
			}
			x = hi
		}
		dst = append(dst[:j], x)
	}
	return dst
}

// fsumRound is the float64 nearest to the exact sum of partials (ties to even): fsum's
// second half, summing from the top and correcting a half-way case with the next partial.
func fsumRound(p []float64) float64 {
	n := len(p)
	hi, lo := p[n-1], 0.0
	i := n - 1
	for i > 0 {
		x := hi
		i--
		y := p[i]
		hi = x + y
		yr := hi - x
		lo = y - yr
		if lo != 0 {
			break
		}
	}
	if i > 0 && ((lo < 0 && p[i-1] < 0) || (lo > 0 && p[i-1] > 0)) {
		y := lo * 2
		x := hi + y
		if yr := x - hi; y == yr {
			hi = x
		}
	}
	return hi
}
