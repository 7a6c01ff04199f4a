package cpu

import (
	"math"

	"github.com/tessera-qa/tessera-qa/engine/failpoint"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

// quotient is a/b rounded to the precision the rounding divisions compute in: f64, or f32 for
// f32 and narrower floats (torch upcasts f16/bf16 to f32). For f32 operands the f64 quotient
// rounded to f32 is the correctly rounded f32 quotient (f64 has more than 2*24+2 bits).
func quotient(a, b float64, wide bool) float64 {
	if wide {
		return a / b
	}
	return float64(float32(a / b))
}

// truncRoundsQuotient reports whether trunc division rounds its f32 quotient to dt first:
// f16 and bf16, as torch's kernels do. fp8 has no torch arithmetic; it computes in f32 here,
// like every other fp8 op, and the oracle's f32 composite agrees.
func truncRoundsQuotient(dt numerics.DType) bool { return dt == numerics.F16 || dt == numerics.BF16 }

// truncDiv truncates the quotient rounded to dt (the f32 quotient rounded again for f16 and
// bf16): torch's trunc division of bf16 1 by 0.1 (0.10009765625) is 10, since
// 9.990... rounds to 10 in bf16 first (measured: 0 of 2*10^6 random pairs differ in f64, f32,
// f16 and bf16 from this definition).
func truncDiv(a, b float64, dt numerics.DType) float64 {
	q := quotient(a, b, dt == numerics.F64)
	if truncRoundsQuotient(dt) {
		q = numerics.Round(dt, q)
	}
	return math.Trunc(q)
}

// floorDiv is the exact floor of a/b, which is what torch's fmod-based algorithm gives, reached
// without fmod (the GPU has none): floor of the rounded quotient is the floor or one above it
// (rounding is monotonic and integers are representable), and the sign of the residual
// a - f*b, exact through an FMA (also for f32 values: their product is exact in f64), says
// which. f == 0 gives the residual a itself, so an infinite b keeps torch's answers
// (-3 floor-div Inf is -1, 3 floor-div Inf is +0). A zero result keeps the quotient's sign.
func floorDiv(a, b float64, wide bool) float64 {
	q := quotient(a, b, wide)
	if b == 0 || math.IsNaN(q) {
		return q
	}
	if math.IsInf(a, 0) {
		return a - a // torch: fmod(±Inf, b) is NaN; Inf-Inf is the hardware NaN, as on the GPU
	}
	f := math.Floor(q)
	if failpoint.Enabled(failpoint.CPUDivFloorTruncates) {
		f = math.Trunc(q) // the planted fault: rounds negative quotients toward zero
	}
	r := a
	if f != 0 {
		r = math.FMA(-f, b, a)
	}
	if r != 0 && (r < 0) != (b < 0) {
		f = quotient(f-1, 1, wide)
	}
	return f
}
