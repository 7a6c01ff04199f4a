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

// bigExp is e^x to 120 bits: x = n ln2 + r, e^r by its Taylor series, times 2^n.
func bigExp(x float64) *big.Float {
	const prec = 120
	ln2, _ := new(big.Float).SetPrec(prec).SetString("0.693147180559945309417232121458176568075500134360255254120680009493393621969694715605863326996418687542")
	bx := new(big.Float).SetPrec(prec).SetFloat64(x)
	n := math.Round(x / math.Ln2)
	r := new(big.Float).SetPrec(prec).Sub(bx, new(big.Float).SetPrec(prec).Mul(ln2, big.NewFloat(n)))
	sum, term := new(big.Float).SetPrec(prec).SetInt64(1), new(big.Float).SetPrec(prec).SetInt64(1)
	for k := 1; k < 40; k++ {
		term.Mul(term, r)
		term.Quo(term, new(big.Float).SetInt64(int64(k)))
		sum.Add(sum, term)
	}
	return sum.SetMantExp(sum, int(n))
}

// Near the overflow threshold Exp must be finite where e^x is (within 2 ulp of a 120-bit
// reference) and +Inf past it; elsewhere it must give math.Exp's bits unchanged.
func TestExpNearOverflow(t *testing.T) {
	maxLn := 709.782712893384 // the float64 nearest ln(MaxFloat64)
	for x := 709.0; x < maxLn-1e-12; x += 0.0137 {
		want, _ := bigExp(x).Float64()
		got := Exp(x)
		if math.IsInf(got, 0) || math.Abs(got-want) > 2*math.Abs(want)*0x1p-52 {
			t.Errorf("Exp(%.17g) = %v, want %v", x, got, want)
		}
	}
	if got := Exp(709.5); math.IsInf(got, 0) {
		t.Errorf("Exp(709.5) = %v: e^709.5 = 1.35e308 is finite", got)
	}
	for _, x := range []float64{709.79, 709.9, 710, 800, math.Inf(1)} {
		if got := Exp(x); !math.IsInf(got, 1) {
			t.Errorf("Exp(%v) = %v, want +Inf", x, got)
		}
	}
	for _, x := range []float64{-746, -1, 0, 1, 100, 708.9, 710.5, math.Inf(-1), math.NaN()} {
		if a, b := Exp(x), math.Exp(x); math.Float64bits(a) != math.Float64bits(b) && !(math.IsNaN(a) && math.IsNaN(b)) {
			t.Errorf("Exp(%g) = %v, math.Exp gives %v", x, a, b)
		}
	}
}
