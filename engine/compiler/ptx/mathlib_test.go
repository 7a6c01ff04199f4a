package ptx

import (
	"math"
	"math/big"
	"math/rand/v2"
	"testing"
)

// ulps is the distance between two float64s in representable steps (0 for equal values and
// for two NaNs, huge for a NaN against a number).
func ulps(a, b float64) uint64 {
	if a != a || b != b {
		if a != a && b != b {
			return 0
		}
		return math.MaxUint64
	}
	key := func(x float64) int64 {
		u := math.Float64bits(x)
		if u>>63 != 0 {
			return -int64(u &^ (1 << 63))
		}
		return int64(u)
	}
	d := key(a) - key(b)
	if d < 0 {
		d = -d
	}
	return uint64(d)
}

// sweep returns a dense grid over [lo, hi], random points in it, and the edge values.
func sweep(lo, hi float64, n int, rng *rand.Rand) []float64 {
	xs := []float64{0, math.Copysign(0, -1), math.Inf(1), math.Inf(-1), math.NaN(), 5e-324, -5e-324,
		0x1p-1022, 1e-300, 1e-20, 1e-9, 1, -1, 0.5, -0.5}
	for i := range n {
		xs = append(xs, lo+(hi-lo)*float64(i)/float64(n-1))
		xs = append(xs, lo+(hi-lo)*rng.Float64())
	}
	return xs
}

// checkTwin compares the twin with Go's function over xs (both are within about one ulp of the
// truth, so they may sit on opposite sides of it: 2 ulp apart) and with the correctly rounded
// value from math/big on every 300th point (at most 1 ulp).
func checkTwin(t *testing.T, name string, twin, gofn, truth func(float64) float64, xs []float64) {
	t.Helper()
	checkAgainst(t, name+" vs Go", twin, gofn, xs, 2)
	var sample []float64
	for i := 0; i < len(xs); i += 300 {
		sample = append(sample, xs[i])
	}
	checkAgainst(t, name+" vs math/big", twin, truth, sample, 1)
}

func checkAgainst(t *testing.T, name string, twin, want func(float64) float64, xs []float64, maxULP uint64) {
	t.Helper()
	worst, at := uint64(0), 0.0
	for _, x := range xs {
		if d := ulps(twin(x), want(x)); d > worst {
			worst, at = d, x
		}
	}
	t.Logf("%s: worst %d ulp at %v (twin %v, Go %v) over %d points", name, worst, at, twin(at), want(at), len(xs))
	if worst > maxULP {
		t.Errorf("%s differs from Go's by %d ulp at x=%v: twin %v, want %v", name, worst, at, twin(at), want(at))
	}
}

var g goArith

func TestExpTwin(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	xs := sweep(-746, 710, 60000, rng)
	xs = append(xs, sweep(709, 709.8, 200, rng)...)
	xs = append(xs, sweep(-1, 1, 30000, rng)...)
	checkTwin(t, "exp", func(x float64) float64 { return expF(g, x) }, goExp, truthExp, xs)
}

// goExp is math.Exp except above 709.43, where Go's amd64 assembly overflows to +Inf early
// (exp(709.5) = 1.35e308 is finite); there the correctly rounded value from math/big stands in.
func goExp(x float64) float64 {
	if x > 709.4 && x < 709.79 {
		return f64(bigExp(bf(x)))
	}
	return math.Exp(x)
}

// goLog is math.Log except for subnormal inputs, which Go's amd64 assembly gets wrong
// (math.Log(5e-324) = -709.09, not -744.44); there ln(x 2^54) - 54 ln2 in math/big stands in.
func goLog(x float64) float64 {
	if x > 0 && x < 0x1p-1022 {
		l := bf(math.Log(x * 0x1p54))
		return f64(bsub(l, bmul(bint(54), bigC().ln2)))
	}
	return math.Log(x)
}

func TestLogTwin(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	xs := sweep(0, 4, 60000, rng)
	xs = append(xs, sweep(-1, 1e6, 20000, rng)...)
	for range 2000 {
		xs = append(xs, math.Float64frombits(rng.Uint64()>>12)) // subnormals
	}
	for range 30000 {
		xs = append(xs, math.Float64frombits(rng.Uint64()>>1)) // every positive magnitude
	}
	checkTwin(t, "log", func(x float64) float64 { return logF(g, x) }, goLog, truthLog, xs)
}

func TestTanhTwin(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	xs := sweep(-25, 25, 60000, rng)
	xs = append(xs, sweep(-1, 1, 60000, rng)...)
	checkTwin(t, "tanh", func(x float64) float64 { return tanhF(g, x) }, math.Tanh, truthTanh, xs)
}

func TestErfTwin(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	xs := sweep(-7, 7, 60000, rng)
	xs = append(xs, sweep(-0.6, 0.6, 30000, rng)...)
	checkTwin(t, "erf", func(x float64) float64 { return erfF(g, x) }, math.Erf, truthErf, xs)
}

// The truth functions round a math/big evaluation once; special values go through Go.

func truthExp(x float64) float64 {
	if x != x || math.IsInf(x, 0) || x > 710 || x < -746 {
		return math.Exp(x)
	}
	return f64(bigExp(bf(x)))
}

// truthLog refines Go's estimate y by two Newton steps y += x e^-y - 1 in math/big.
func truthLog(x float64) float64 {
	if !(x > 0) || math.IsInf(x, 0) {
		return math.Log(x)
	}
	y := bf(goLog(x))
	for range 2 {
		y = badd(y, bsub(bmul(bf(x), bigExp(new(big.Float).Neg(y))), bint(1)))
	}
	return f64(y)
}

func truthTanh(x float64) float64 {
	if x != x || math.Abs(x) < 1e-30 || math.Abs(x) > 30 {
		return math.Tanh(x)
	}
	e := bigExp(bf(2 * x))
	return f64(bquo(bsub(e, bint(1)), badd(e, bint(1))))
}

func truthErf(x float64) float64 {
	if x != x || math.Abs(x) < 1e-30 || math.Abs(x) > 6 {
		return math.Erf(x)
	}
	c := bf(x)
	c2 := bmul(c, c)
	sum, term := c, c
	for n := int64(1); ; n++ {
		term = bquo(bmul(term, bmul(bint(2), c2)), bint(2*n+1))
		sum = badd(sum, term)
		if negligible(term, sum) {
			break
		}
	}
	return f64(bmul(bmul(bigC().twoOverSqrtPi, bigExp(new(big.Float).Neg(c2))), sum))
}

func TestMaxMinTwin(t *testing.T) {
	vals := []float64{0, math.Copysign(0, -1), 1, -1, 2.5, math.Inf(1), math.Inf(-1), math.NaN(), 5e-324}
	for _, a := range vals {
		for _, b := range vals {
			for _, isMax := range []bool{true, false} {
				got := fmaxmin(g, a, b, isMax)
				want := min(a, b)
				if isMax {
					want = max(a, b)
				}
				if math.Float64bits(got) != math.Float64bits(want) && !(got != got && want != want) {
					t.Errorf("max=%t (%v, %v): got %v want %v", isMax, a, b, got, want)
				}
			}
		}
	}
}
