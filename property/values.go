package property

import (
	"math"
	"math/rand/v2"

	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
	"github.com/tessera-qa/tessera-qa/harness"
)

// Class is how the values of one fresh input tensor are drawn. The tensor itself is a pure
// function of (dtype, shape, class, seed): rapid draws the class and the seed, not the
// elements, so a failing case shrinks in structure (ops, dims, classes) while the element
// values stay reproducible from the seed recorded in the replay manifest.
type Class uint8

// Classes, simplest first: a shrinking class draw moves towards ClassNormal.
const (
	ClassNormal   Class = iota // N(0,1) (ints: small values in [-8, 8]; bool: both values)
	ClassUniform               // uniform in [-3, 3) (ints: the whole range, so sums wrap)
	ClassPositive              // uniform in [0.5, 2): the domain of log, sqrt and rsqrt
	ClassSpecial               // N(0,1) with ±0, subnormals, min normal, ±max, ±Inf and NaN sprinkled in (ints: min, max, 0, ±1)
	ClassHuge                  // N(0,1) scaled up to the largest magnitude whose sums still fit the accumulator
	ClassTiny                  // N(0,1) scaled down, well above the subnormals
	ClassLogits                // extreme softmax logits: wide rows, one-hot rows, -Inf (masked) entries
	numClasses
)

var classNames = [...]string{"normal", "uniform", "positive", "special", "huge", "tiny", "logits"}

// GoString makes rapid's log of a drawn class read "tiny" rather than 0x5.
func (c Class) GoString() string { return c.String() }

func (c Class) String() string {
	if int(c) < len(classNames) {
		return classNames[c]
	}
	return "class?"
}

// scaleExp is the binary exponent ClassHuge multiplies by (ClassTiny divides by): large enough
// to matter, small enough that a sum of 64K products of such values does not overflow the
// accumulator (f32 for 16-bit and f32 storage, f64 for f64), which would be a legitimate
// difference between the engine's f32 sum and the golden model's f64 one.
func scaleExp(dt numerics.DType) int {
	switch dt {
	case numerics.F64:
		return 400
	case numerics.F32, numerics.BF16:
		return 40
	case numerics.F16, numerics.F8E5M2:
		return 8
	case numerics.F8E4M3:
		return 4
	}
	return 0
}

// Fill draws a tensor of class c. Every class is defined for every dtype; classes that make no
// sense for ints or bool fall back to their int meaning (see the constants).
func Fill(dt numerics.DType, shape []int, c Class, seed uint64) *tensor.Tensor {
	if !dt.IsFloat() {
		return fillInt(dt, shape, c, seed)
	}
	var t *tensor.Tensor
	switch c {
	case ClassUniform:
		t = harness.RandomTensor(dt, shape, seed, harness.Dist{Kind: harness.DistUniform, Lo: -3, Hi: 3})
	case ClassPositive:
		t = harness.RandomTensor(dt, shape, seed, harness.Dist{Kind: harness.DistPositive, Lo: 0.5, Hi: 2})
	case ClassLogits:
		t = logits(dt, shape, seed)
	default:
		t = harness.RandomTensor(dt, shape, seed, harness.Dist{Kind: harness.DistNormal})
	}
	switch c {
	case ClassSpecial:
		sprinkle(t, seed)
	case ClassHuge, ClassTiny:
		e := scaleExp(dt)
		if c == ClassTiny {
			e = -e
		}
		for i := range t.Len() {
			t.SetFloat64(i, math.Ldexp(t.Float64(i), e))
		}
	}
	return t
}

// specials are the values ClassSpecial mixes in, as functions of the dtype.
var specials = []func(dt numerics.DType) float64{
	func(numerics.DType) float64 { return 0 },
	func(numerics.DType) float64 { return math.Copysign(0, -1) },
	func(dt numerics.DType) float64 { return numerics.Decode(dt, 1) },                 // smallest subnormal
	func(dt numerics.DType) float64 { return -numerics.Decode(dt, 3) },                // a negative subnormal
	func(dt numerics.DType) float64 { return minNormal(dt) - numerics.Decode(dt, 1) }, // largest subnormal
	minNormal,
	func(numerics.DType) float64 { return math.Inf(1) },
	func(numerics.DType) float64 { return math.Inf(-1) },
	func(numerics.DType) float64 { return math.NaN() },
	// The last four are the largest magnitudes (see sprinkle).
	numerics.MaxFinite,
	func(dt numerics.DType) float64 { return -numerics.MaxFinite(dt) },
	func(dt numerics.DType) float64 { return numerics.MaxFinite(dt) / 2 },
	func(dt numerics.DType) float64 { return -numerics.MaxFinite(dt) / 2 },
}

// minNormal is the smallest positive normal value of a float dtype.
func minNormal(dt numerics.DType) float64 {
	// The smallest normal is 2^(p-1) steps above zero: the subnormal pattern count.
	return numerics.Decode(dt, 1<<mantissaBits(dt))
}

// mantissaBits is the number of stored mantissa bits of a float dtype (f32: 23).
func mantissaBits(dt numerics.DType) int {
	one := numerics.Encode(dt, 1)
	step := numerics.Decode(dt, one+1) - 1 // one ulp at 1.0 = 2^-m
	return -math.Ilogb(step)
}

// sprinkle replaces about a quarter of t's elements by special values, always at least one.
func sprinkle(t *tensor.Tensor, seed uint64) {
	r := rand.New(rand.NewPCG(seed, 0x5bec1a1))
	// ±max only in one tensor of four: next to it, a sum of squares overflows an f32
	// accumulator, and the noise model rules such cases out (mayOverflow).
	pool := specials[:len(specials)-4]
	if r.IntN(4) == 0 {
		pool = specials
	}
	set := func(i int) {
		v := pool[r.IntN(len(pool))](t.DType)
		if b, ok := infBits(t.DType, v); ok {
			t.SetBits(i, b)
			return
		}
		t.SetFloat64(i, v)
	}
	n := t.Len()
	for i := range n {
		if r.IntN(4) == 0 {
			set(i)
		}
	}
	if n > 0 {
		set(r.IntN(n))
	}
}

// infBits returns the pattern of the infinity v in dt when dt has one. Encoding saturates
// e5m2 (numerics.md), which nonetheless holds ±Inf: inputs may carry it.
func infBits(dt numerics.DType, v float64) (uint64, bool) {
	if !math.IsInf(v, 0) || dt.Size() != 1 {
		return 0, false
	}
	for b := range uint64(256) {
		if numerics.Decode(dt, b) == v {
			return b, true
		}
	}
	return 0, false
}

// logits fills rows (along the last axis) of extreme softmax inputs: each row is one of a wide
// uniform spread, a one-hot row (one large value, the rest very negative), a constant row, or
// a wide row with some -Inf (masked) entries. The spread is capped well below the dtype's
// maximum so that the logits themselves stay finite.
func logits(dt numerics.DType, shape []int, seed uint64) *tensor.Tensor {
	t := tensor.New(dt, shape)
	r := rand.New(rand.NewPCG(seed, 0x10917))
	row := 1
	if len(shape) > 0 {
		row = shape[len(shape)-1]
	}
	spreads := []float64{20, 100, 1000, 30000}
	limit := numerics.MaxFinite(dt) / 4
	for start := 0; start < t.Len(); start += row {
		l := math.Min(spreads[r.IntN(len(spreads))], limit)
		kind := r.IntN(4)
		hot := r.IntN(row)
		for j := range row {
			v := l * (2*r.Float64() - 1)
			switch {
			case kind == 1 && j == hot:
				v = l
			case kind == 1:
				v = -l
			case kind == 2:
				v = l / 2
			case kind == 3 && r.IntN(3) == 0:
				v = math.Inf(-1)
			}
			t.SetFloat64(start+j, v)
		}
	}
	return t
}

func fillInt(dt numerics.DType, shape []int, c Class, seed uint64) *tensor.Tensor {
	lo, hi := -8.0, 8.0
	switch {
	case dt == numerics.Bool:
		lo, hi = 0, 1
	case c == ClassUniform || c == ClassHuge:
		lo, hi = -numerics.MaxFinite(dt)-1, numerics.MaxFinite(dt)
	case c == ClassPositive:
		lo = 1
	}
	t := harness.RandomTensor(dt, shape, seed, harness.Dist{Kind: harness.DistInt, Lo: lo, Hi: hi})
	if c == ClassSpecial && dt != numerics.Bool {
		r := rand.New(rand.NewPCG(seed, 0x1e7))
		edge := []float64{-numerics.MaxFinite(dt) - 1, numerics.MaxFinite(dt), 0, 1, -1}
		for i := range t.Len() {
			if r.IntN(3) == 0 {
				t.SetFloat64(i, edge[r.IntN(len(edge))])
			}
		}
	}
	return t
}

// NearCopy returns a tensor of x's dtype and shape whose finite non-zero elements are x's
// moved by 1 to 4 ulps (negated when negate is set), so that x - y (or x + y) cancels to a few
// ulps of x: the near-cancellation case. The subtraction itself is exact (Sterbenz), so the
// engine and the golden model agree on it bit for bit; what follows sees tiny values.
func NearCopy(x *tensor.Tensor, negate bool, seed uint64) *tensor.Tensor {
	y := x.Clone()
	if !x.DType.IsFloat() {
		return y
	}
	r := rand.New(rand.NewPCG(seed, 0xca9ce1))
	sign := uint64(1) << (8*x.DType.Size() - 1)
	for i := range y.Len() {
		b := y.Bits(i)
		v := numerics.Decode(y.DType, b)
		if v != 0 && !math.IsInf(v, 0) && !math.IsNaN(v) {
			step := uint64(1 + r.IntN(4))
			mag := b &^ sign
			if r.IntN(2) == 0 && mag > step {
				mag -= step
			} else if w := numerics.Decode(y.DType, mag+step); !math.IsInf(w, 0) && !math.IsNaN(w) {
				mag += step
			}
			b = b&sign | mag
		}
		if negate {
			b ^= sign
		}
		y.SetBits(i, b)
	}
	return y
}
