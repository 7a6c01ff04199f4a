package numerics

import "math"

// Log is the natural logarithm, right for subnormal inputs too. Go's math.Log on amd64 is an
// assembly routine that does not normalize subnormals (log(5e-324) gives -709.09 instead of
// -744.44; golang/go#56600); the golden model and the CPU backend both call this instead.
func Log(x float64) float64 {
	if x > 0 && x < 0x1p-1022 {
		frac, exp := math.Frexp(x) // x = frac * 2^exp, frac in [0.5, 1): normal
		return math.Log(frac) + float64(exp)*math.Ln2
	}
	return math.Log(x)
}

// Exp is e^x, finite up to the true overflow threshold ln(MaxFloat64) = 709.7827... Go's
// math.Exp on amd64 (assembly) returns +Inf from about x = 709.44 on, where e^x is still
// finite (found by the property suite: the GPU's exp was right and the golden model wrong).
// There Exp computes e^(x-1) * e instead: x-1 is exact for x in (709, 710) and e^(x-1) is far
// from the early overflow, so the result is within 2 ulp and overflows only past the
// threshold. The golden model and the CPU backend both call this instead of math.Exp.
func Exp(x float64) float64 {
	if x > 709 && x < 710 {
		return math.Exp(x-1) * math.E
	}
	return math.Exp(x)
}
