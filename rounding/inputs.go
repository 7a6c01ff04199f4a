package rounding

import (
	"math"

	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

// Inputs returns the values that make a conversion of src values to dst go wrong, each
// exactly representable in src (f64 or f32): for a float dst, every (or, for f32, a spread of)
// pair of adjacent dst values with their exact midpoint (a tie) and the src values just either
// side of it, both signs; the overflow boundary (max, the tie above it, its neighbours, twice
// max, src's max, ±Inf); the bottom (half the smallest subnormal, which ties to 0, and its
// neighbours; src's smallest subnormal; ±0); NaNs. For an int or bool dst, the range ends and
// their neighbours, halves, fractions of either sign, NaN and ±Inf.
func Inputs(src, dst numerics.DType) []float64 {
	narrow := func(x float64) float64 { return x }
	next := func(x, toward float64) float64 { return math.Nextafter(x, toward) }
	if src == numerics.F32 {
		narrow = func(x float64) float64 { return float64(float32(x)) }
		next = func(x, toward float64) float64 { return float64(math.Nextafter32(float32(x), float32(toward))) }
	}
	var out []float64
	add := func(vs ...float64) {
		for _, v := range vs {
			// Only values src holds exactly (the f32 view of an f64 tie is a different input).
			if narrow(v) == v || v != v {
				out = append(out, v, -v)
			}
		}
	}
	around := func(v float64) { add(v, next(v, math.Inf(-1)), next(v, math.Inf(1))) }
	add(0, math.Inf(1), math.NaN(), math.Float64frombits(0x7FF0000000000001), math.Float64frombits(0xFFF8000000000123))
	if src == numerics.F64 {
		add(math.SmallestNonzeroFloat64, math.MaxFloat64)
	} else {
		add(math.SmallestNonzeroFloat32, math.MaxFloat32)
	}
	if f, ok := FormatOf(dst); ok {
		top := f.maxBits()
		step := uint64(1)
		if top > 1<<16 {
			step = top>>15 | 1 // f32: a spread of about 32K pairs across every binade
		}
		for p := uint64(0); p < top; p += step {
			lo, hi := f.Decode(p), f.Decode(p+1)
			around(lo)
			around(lo + (hi-lo)/2)
		}
		max := f.MaxFinite()
		_, e := math.Frexp(max)
		ulp := math.Ldexp(1, e-1-int(f.Man))
		around(max)
		around(max + ulp/2)
		around(max + ulp)
		around(2 * max)
		minSub := f.Decode(1)
		around(minSub / 2)
		around(minSub / 4)
		around(3 * minSub / 2)
		return out
	}
	for _, v := range []float64{127, 128, 255, 256, math.MaxInt32, math.MaxInt32 + 1, 1 << 40, 0.5, 1, 1.5, 2.5} {
		around(v)
		around(v + 0.5)
		around(-v - 1)
	}
	add(0.3, 0.7, 1e-300)
	return out
}

// IntInputs are integers of dtype src for an int -> int cast: the range of src's ends, the
// target's range ends and their neighbours, zero, ±1.
func IntInputs(src numerics.DType) []int64 {
	lo, hi := int64(math.MinInt8), int64(math.MaxInt8)
	if src == numerics.I32 {
		lo, hi = math.MinInt32, math.MaxInt32
	}
	var out []int64
	for _, v := range []int64{0, 1, -1, 2, 126, 127, 128, 129, 200, 255, 256, 257, -127, -128, -129, -200, -256, -257,
		1 << 20, -(1 << 20), 1<<31 - 1, -(1 << 31), 0x12345678, -0x12345678, 0x7F80, 0x80} {
		if v >= lo && v <= hi {
			out = append(out, v)
		}
	}
	return out
}
