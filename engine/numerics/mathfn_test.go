package numerics

import (
	"math"
	"math/big"
	"testing"
)

// Subnormal logs must match log(m) + e*ln(2) computed to 100 bits, within 1 ulp; normal
// inputs must give math.Log's bits unchanged.
func TestLogOfSubnormals(t *testing.T) {
	ln2, _ := new(big.Float).SetPrec(100).SetString("0.69314718055994530941723212145817656807550013436")
	for _, x := range []float64{5e-324, 1e-320, 1e-310, math.Nextafter(0x1p-1022, 0)} {
		frac, exp := math.Frexp(x)
		// log(frac) is normal-range and exact enough from math.Log; the big sum avoids a
		// second rounding of exp*ln2.
		want, _ := new(big.Float).SetPrec(100).Add(new(big.Float).SetFloat64(math.Log(frac)),
			new(big.Float).Mul(ln2, new(big.Float).SetInt64(int64(exp)))).Float64()
		if got := Log(x); math.Abs(got-want) > math.Abs(want)*0x1p-52 {
			t.Errorf("Log(%g) = %.17g, want %.17g", x, got, want)
		}
	}
	if got := Log(5e-324); math.Abs(got+744.4400719213812) > 1e-12 {
		t.Errorf("Log(5e-324) = %.17g, want -744.44007192138...", got)
	}
	for _, x := range []float64{0x1p-1022, 1e-300, 0.5, 1, 2, 1e300, 0, -1, math.Inf(1), math.NaN()} {
		if a, b := Log(x), math.Log(x); math.Float64bits(a) != math.Float64bits(b) && !(math.IsNaN(a) && math.IsNaN(b)) {
			t.Errorf("Log(%g) = %v, math.Log gives %v", x, a, b)
		}
	}
}
