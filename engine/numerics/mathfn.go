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
