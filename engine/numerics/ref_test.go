package numerics_test

// Reference formulas written from the format definitions alone. They never call the code
// under test, so that a shared mistake cannot make a test pass.

import (
	"math"
	"sort"

	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

// spec is a float layout as the standards describe it.
type spec struct {
	d          numerics.DType
	e, m, bias int
	fn         bool    // OCP "FN": no Inf, only S.1111.111 is NaN
	maxVal     float64 // largest finite value, from the standards' tables
	nan        uint64  // canonical NaN we expect Encode to produce
}

var smallSpecs = []spec{
	{numerics.F16, 5, 10, 15, false, 65504, 0x7E00},
	{numerics.BF16, 8, 7, 127, false, 3.3895313892515355e38, 0x7FC0},
	{numerics.F8E4M3, 4, 3, 7, true, 448, 0x7F},
	{numerics.F8E5M2, 5, 2, 15, false, 57344, 0x7E},
}

var f32Spec = spec{numerics.F32, 8, 23, 127, false, math.MaxFloat32, 0x7FC00000}

func (s spec) bitsTotal() int { return 1 + s.e + s.m }
func (s spec) count() int     { return 1 << s.bitsTotal() }
func (s spec) satfinite() bool {
	return s.d == numerics.F8E4M3 || s.d == numerics.F8E5M2
}
func (s spec) minNormalExp() int { return 1 - s.bias }

// refDecode computes a pattern's value from its sign, exponent and mantissa fields.
func refDecode(s spec, bits uint64) float64 {
	sign := bits >> (s.e + s.m) & 1
	exp := int(bits>>s.m) & (1<<s.e - 1)
	man := int(bits) & (1<<s.m - 1)
	allOnes := 1<<s.e - 1
	var v float64
	switch {
	case s.fn && exp == allOnes && man == 1<<s.m-1:
		return math.NaN()
	case !s.fn && exp == allOnes && man != 0:
		return math.NaN()
	case !s.fn && exp == allOnes:
		v = math.Inf(1)
	case exp == 0:
		v = math.Ldexp(float64(man), 1-s.bias-s.m)
	default:
		v = math.Ldexp(float64(man+1<<s.m), exp-s.bias-s.m)
	}
	if sign == 1 {
		v = math.Copysign(v, -1)
	}
	return v
}

// refRound rounds x to the format with the quantum of its binade: RoundToEven (or Trunc) of
// |x|/quantum, then applies the overflow rules of the package contract.
func refRound(s spec, x float64, rtz bool) float64 {
	if math.IsNaN(x) {
		return x
	}
	a := math.Abs(x)
	var r float64
	if math.IsInf(a, 0) {
		r = a
	} else {
		_, exp := math.Frexp(a)
		e := exp - 1
		if e < s.minNormalExp() {
			e = s.minNormalExp()
		}
		q := math.Ldexp(1, e-s.m)
		if rtz {
			r = math.Trunc(a/q) * q
		} else {
			r = math.RoundToEven(a/q) * q
		}
	}
	if r > s.maxVal {
		if s.satfinite() || (rtz && !math.IsInf(a, 0)) {
			r = s.maxVal
		} else {
			r = math.Inf(1)
		}
	}
	return math.Copysign(r, x)
}

// sortedFinite returns the finite patterns ordered by value, -0 just before +0.
func sortedFinite(s spec) []uint64 {
	var out []uint64
	for b := 0; b < s.count(); b++ {
		v := refDecode(s, uint64(b))
		if !math.IsNaN(v) && !math.IsInf(v, 0) {
			out = append(out, uint64(b))
		}
	}
	sort.Slice(out, func(i, j int) bool {
		vi, vj := refDecode(s, out[i]), refDecode(s, out[j])
		if vi != vj {
			return vi < vj
		}
		return math.Signbit(vi) && !math.Signbit(vj)
	})
	return out
}

// sameFloat is bitwise equality of float64s, with every NaN equal to every NaN.
func sameFloat(a, b float64) bool {
	if math.IsNaN(a) || math.IsNaN(b) {
		return math.IsNaN(a) && math.IsNaN(b)
	}
	return math.Float64bits(a) == math.Float64bits(b)
}
