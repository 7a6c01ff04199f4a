package ptx

import (
	"math"
	"math/big"
	"sync"
)

// The constants of the math routines are derived here from first principles at high precision
// (series in math/big), so no magic number needs trusting: ln 2 from atanh(1/3), pi from
// Machin's formula, erf from its all-positive series, and polynomial coefficients from their
// closed forms (1/k!, 2/(2k+1), Hermite polynomials).

const bigPrec = 320

func bf(x float64) *big.Float { return new(big.Float).SetPrec(bigPrec).SetFloat64(x) }

func bint(n int64) *big.Float { return new(big.Float).SetPrec(bigPrec).SetInt64(n) }

func bquo(a, b *big.Float) *big.Float { return new(big.Float).SetPrec(bigPrec).Quo(a, b) }

func bmul(a, b *big.Float) *big.Float { return new(big.Float).SetPrec(bigPrec).Mul(a, b) }

func badd(a, b *big.Float) *big.Float { return new(big.Float).SetPrec(bigPrec).Add(a, b) }

func bsub(a, b *big.Float) *big.Float { return new(big.Float).SetPrec(bigPrec).Sub(a, b) }

// tiny is where a series stops: terms below it cannot move a float64.
var tiny = new(big.Float).SetMantExp(bint(1), -bigPrec+8)

func negligible(term, sum *big.Float) bool {
	t := new(big.Float).Abs(term)
	s := new(big.Float).Abs(sum)
	return t.Cmp(bmul(s, tiny)) < 0 || term.Sign() == 0
}

// atanInv is atan(1/k) = sum (-1)^n / ((2n+1) k^(2n+1)).
func atanInv(k int64) *big.Float {
	kk := bint(k * k)
	pow := bquo(bint(1), bint(k))
	sum := bf(0)
	for n := int64(0); ; n++ {
		term := bquo(pow, bint(2*n+1))
		if n%2 == 1 {
			term.Neg(term)
		}
		sum = badd(sum, term)
		if negligible(term, sum) {
			return sum
		}
		pow = bquo(pow, kk)
	}
}

// bigExp is e^x by its Taylor series; x is taken positive and the result inverted, so no
// terms cancel.
func bigExp(x *big.Float) *big.Float {
	ax := new(big.Float).Abs(x)
	sum, term := bf(1), bf(1)
	for n := int64(1); ; n++ {
		term = bquo(bmul(term, ax), bint(n))
		sum = badd(sum, term)
		if negligible(term, sum) {
			break
		}
	}
	if x.Sign() < 0 {
		return bquo(bint(1), sum)
	}
	return sum
}

// bigConsts holds the high-precision values the routines' constants come from.
type bigConsts struct {
	ln2, pi, twoOverSqrtPi *big.Float
}

var bigC = sync.OnceValue(func() bigConsts {
	var c bigConsts
	// ln 2 = 2 atanh(1/3) = 2 sum (1/3)^(2n+1) / (2n+1)
	sum, pow := bf(0), bquo(bint(1), bint(3))
	for n := int64(0); ; n++ {
		term := bquo(pow, bint(2*n+1))
		sum = badd(sum, term)
		if negligible(term, sum) {
			break
		}
		pow = bquo(pow, bint(9))
	}
	c.ln2 = bmul(sum, bint(2))
	c.pi = bsub(bmul(bint(16), atanInv(5)), bmul(bint(4), atanInv(239)))
	c.twoOverSqrtPi = bquo(bint(2), new(big.Float).SetPrec(bigPrec).Sqrt(c.pi))
	return c
})

func f64(x *big.Float) float64 { v, _ := x.Float64(); return v }

// split returns hi = x rounded to float64 and lo = (x - hi) rounded, so hi+lo carries about
// 106 bits of x.
func split(x *big.Float) (hi, lo float64) {
	hi = f64(x)
	return hi, f64(bsub(x, bf(hi)))
}

// mathConsts are the float64 constants the routines use.
type mathConsts struct {
	invLn2, ln2Hi, ln2Lo float64
	expPoly              []float64 // 1/k! for k = 13 down to 2 (Horner order)
	logPoly              []float64 // 2/(2k+1) for k = 11 down to 1
	erfSmall             []float64 // Taylor coefficients of erf(x)/x in x^2, n = 12 down to 1
	erfA0Hi, erfA0Lo     float64   // 2/sqrt(pi) as hi + lo
	erfMid               *table
	tanhPoly             []float64 // Taylor coefficients of (tanh(x)-x)/x^3 in x^2, highest first
	sqrt2, sqrt2OverPi   float64
}

// ln2HiBits is how many leading bits ln2Hi keeps, so that n*ln2Hi is exact for |n| < 2^11.
const ln2HiBits = 42

var mc = sync.OnceValue(func() *mathConsts {
	b := bigC()
	m := &mathConsts{}
	m.invLn2 = f64(bquo(bint(1), b.ln2))
	hi := new(big.Float).SetPrec(ln2HiBits).SetMode(big.ToNearestEven).Set(b.ln2)
	m.ln2Hi = f64(hi)
	m.ln2Lo = f64(bsub(b.ln2, bf(m.ln2Hi)))
	fact := bint(1)
	var ep []float64
	for k := int64(1); k <= 13; k++ {
		fact = bmul(fact, bint(k))
		if k >= 2 {
			ep = append([]float64{f64(bquo(bint(1), fact))}, ep...)
		}
	}
	m.expPoly = ep
	for k := int64(11); k >= 1; k-- {
		m.logPoly = append(m.logPoly, f64(bquo(bint(2), bint(2*k+1))))
	}
	// erf(x) = 2/sqrt(pi) * sum (-1)^n x^(2n+1) / (n! (2n+1))
	m.erfA0Hi, m.erfA0Lo = split(b.twoOverSqrtPi)
	fact = bint(1)
	var es []float64
	for n := int64(1); n <= erfSmallTerms; n++ {
		fact = bmul(fact, bint(n))
		a := bquo(b.twoOverSqrtPi, bmul(fact, bint(2*n+1)))
		if n%2 == 1 {
			a.Neg(a)
		}
		es = append([]float64{f64(a)}, es...)
	}
	m.erfSmall = es
	m.erfMid = erfMidTable(b)
	m.tanhPoly = tanhTaylor(tanhTerms)
	m.sqrt2 = math.Sqrt2
	m.sqrt2OverPi = math.Sqrt(2 / math.Pi) // the CPU backend's constant, bit for bit
	return m
})

// erf between erfSmallMax and erfBigMin is a Taylor polynomial around the centre of each of
// erfIntervals intervals of width 1/erfPerUnit.
const (
	erfSmallTerms = 12
	erfSmallMax   = 0.5
	erfBigMin     = 6.0
	erfPerUnit    = 8
	erfIntervals  = int((erfBigMin - erfSmallMax) * erfPerUnit)
	erfDegree     = 16
)

// erfMidTable holds, per interval j with centre c, [erf(c) hi, erf(c) lo, a1 .. aDegree] where
// erf(c+h) = erf(c) + sum a_k h^k and a_k = 2/sqrt(pi) (-1)^(k-1) H_(k-1)(c) e^(-c^2) / k!
// (H the physicists' Hermite polynomials, since d^n/dx^n e^(-x^2) = (-1)^n H_n e^(-x^2)).
func erfMidTable(b bigConsts) *table {
	t := &table{name: "tq_erf_mid", stride: erfDegree + 1}
	for j := range erfIntervals {
		c := bf(erfSmallMax + (float64(j)+0.5)/erfPerUnit)
		c2 := bmul(c, c)
		g := bmul(b.twoOverSqrtPi, bigExp(new(big.Float).Neg(c2)))
		// erf(c) = 2/sqrt(pi) e^(-c^2) sum 2^n c^(2n+1) / (1*3*...*(2n+1)): all terms positive.
		sum, term := c, c
		for n := int64(1); ; n++ {
			term = bquo(bmul(term, bmul(bint(2), c2)), bint(2*n+1))
			sum = badd(sum, term)
			if negligible(term, sum) {
				break
			}
		}
		hi, lo := split(bmul(g, sum))
		row := []float64{hi, lo}
		hPrev, hCur := bint(1), bmul(bint(2), c) // H_0, H_1
		fact := bint(1)
		for k := int64(1); k < int64(erfDegree); k++ {
			fact = bmul(fact, bint(k))
			a := bquo(bmul(g, hPrev), fact) // uses H_(k-1)
			if k%2 == 0 {
				a.Neg(a)
			}
			row = append(row, f64(a))
			// H_(k+1) = 2c H_k - 2k H_(k-1)
			hNext := bsub(bmul(bmul(bint(2), c), hCur), bmul(bint(2*k), hPrev))
			hPrev, hCur = hCur, hNext
		}
		t.vals = append(t.vals, row...)
	}
	return t
}

// tanhTerms Taylor terms of tanh reach 2^-60 relative below tanhSmallMax: the series
// converges like (2x/pi)^(2n).
const (
	tanhTerms    = 19
	tanhSmallMax = 0.55
)

// tanhTaylor returns the coefficients of x^3, x^5, ... of tanh x = sum 2^(2n) (2^(2n)-1)
// B_(2n) x^(2n-1) / (2n)!, highest power first, from Bernoulli numbers computed exactly.
func tanhTaylor(terms int) []float64 {
	bern := bernoulli(2 * terms)
	var out []float64
	fact := big.NewRat(1, 1)
	for n := 1; n <= terms; n++ {
		fact.Mul(fact, big.NewRat(int64((2*n-1)*(2*n)), 1))
		p := new(big.Int).Lsh(big.NewInt(1), uint(2*n))
		q := new(big.Int).Sub(p, big.NewInt(1))
		c := new(big.Rat).SetInt(new(big.Int).Mul(p, q))
		c.Mul(c, bern[2*n])
		c.Quo(c, fact)
		if n >= 2 {
			v, _ := c.Float64()
			out = append([]float64{v}, out...)
		}
	}
	return out
}

// bernoulli returns B_0..B_n exactly (Akiyama-Tanigawa), with B_1 = +1/2, unused here.
func bernoulli(n int) []*big.Rat {
	out := make([]*big.Rat, n+1)
	a := make([]*big.Rat, n+1)
	for m := 0; m <= n; m++ {
		a[m] = big.NewRat(1, int64(m+1))
		for j := m; j >= 1; j-- {
			d := new(big.Rat).Sub(a[j-1], a[j])
			a[j-1] = d.Mul(d, big.NewRat(int64(j), 1))
		}
		out[m] = new(big.Rat).Set(a[0])
	}
	return out
}
