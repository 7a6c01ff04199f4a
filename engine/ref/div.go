package ref

import (
	"math"

	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
)

// div is true division, or torch.div's rounding modes, in the precision torch computes them
// (not in f64, since a rounding mode turns the last bit of a quotient into a whole unit):
//   - trunc: trunc of the quotient rounded to the dtype (through the f32 quotient for f16 and
//     bf16; fp8 truncates the f32 quotient); measured against torch 1.13, 0 of 2*10^6 random
//     pairs differ.
//   - floor: torch's fmod algorithm (floorDivF64 / floorDivF32) in f64 for f64, in f32 for
//     every narrower float, rounded once to the dtype. That is the exact floor of a/b while
//     |a/b| < 2^24 (f32) or 2^53 (f64); torch 1.13's own bf16 kernel rounds its intermediate
//     a - fmod(a, b) to bf16 and is off by one in about 0.5% of random pairs (docs).
func div(n *graph.Node, in []*tensor.Tensor, out *tensor.Tensor) error {
	a, b := in[0], in[1]
	mode := graph.DivRounding(n)
	if a.DType.IsInt() {
		f := truncDivInt
		if mode == "floor" {
			f = floorDivInt
		}
		putInts(out, broadcastApply(intsOf(a), a.Shape, intsOf(b), b.Shape, out.Shape, f))
		return nil
	}
	f := func(x, y float64) float64 { return x / y }
	switch {
	case mode == "trunc" && a.DType == numerics.F64:
		f = func(x, y float64) float64 { return math.Trunc(x / y) }
	case mode == "trunc" && (a.DType == numerics.F16 || a.DType == numerics.BF16): // as torch's kernels
		dt := a.DType
		f = func(x, y float64) float64 { return math.Trunc(numerics.Round(dt, float64(float32(x)/float32(y)))) }
	case mode == "trunc": // f32 and fp8 (which has no torch arithmetic): the f32 quotient
		f = func(x, y float64) float64 { return math.Trunc(float64(float32(x) / float32(y))) }
	case mode == "floor" && a.DType == numerics.F64:
		f = floorDivF64
	case mode == "floor":
		f = func(x, y float64) float64 { return float64(floorDivF32(float32(x), float32(y))) }
	}
	putFloats(out, broadcastApply(floatsOf(a), a.Shape, floatsOf(b), b.Shape, out.Shape, f))
	return nil
}

// Integer division by zero is 0 here (torch raises ZeroDivisionError; an engine kernel has no
// way to raise per element). The quotient is exact in int64 and wrapped to the dtype, so
// int8 -128 / -1 is -128 (torch's own CPU kernel dies of SIGFPE on int32 INT_MIN / -1).
func truncDivInt(x, y int64) int64 {
	if y == 0 {
		return 0
	}
	return x / y
}

func floorDivInt(x, y int64) int64 {
	if y == 0 {
		return 0
	}
	q := x / y
	if r := x % y; r != 0 && (r < 0) != (y < 0) {
		q--
	}
	return q
}

// floorDivF64 and floorDivF32 are the algorithm of torch's div_floor_floating (and CPython's
// float floor division) written out in each precision: the remainder is fmod's (exact), the
// quotient of a - mod is nudged to the floor, and a zero result takes the sign of a/b.
// A zero divisor gives a/b (±Inf or NaN), as torch does.
func floorDivF64(a, b float64) float64 {
	if b == 0 {
		return a / b
	}
	mod := math.Mod(a, b)
	d := (a - mod) / b
	if mod != 0 && (b < 0) != (mod < 0) {
		d--
	}
	if d == 0 {
		return math.Copysign(0, a/b)
	}
	f := math.Floor(d)
	if d-f > 0.5 {
		f++
	}
	return f
}

func floorDivF32(a, b float32) float32 {
	if b == 0 {
		return a / b
	}
	mod := float32(math.Mod(float64(a), float64(b))) // exact: fmod of two f32 is an f32
	d := (a - mod) / b
	if mod != 0 && (b < 0) != (mod < 0) {
		d--
	}
	if d == 0 {
		return float32(math.Copysign(0, float64(a/b)))
	}
	f := float32(math.Floor(float64(d)))
	if d-f > 0.5 {
		f++
	}
	return f
}
