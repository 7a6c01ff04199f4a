package numerics_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

var modes = []numerics.Rounding{numerics.RoundNearestEven, numerics.RoundTowardZero}

func TestEncodeRoundTripEveryPattern(t *testing.T) {
	for _, s := range smallSpecs {
		maxBits := numerics.Encode(s.d, s.maxVal)
		for _, r := range modes {
			for b := uint64(0); b < uint64(s.count()); b++ {
				v := refDecode(s, b)
				want := b
				switch {
				case math.IsNaN(v):
					want = s.nan
				case math.IsInf(v, 0) && s.satfinite():
					want = maxBits | b&(1<<(s.e+s.m)) // e5m2 ±Inf saturates to ±57344
				}
				if got := numerics.EncodeMode(s.d, v, r); got != want {
					t.Fatalf("EncodeMode(%s, %v (from %#x), %s) = %#x, want %#x", s.d, v, b, r, got, want)
				}
			}
		}
	}
}

// TestMidpointsEveryPair rounds the exact midpoint of every pair of adjacent representable
// values, and points just either side of it.
func TestMidpointsEveryPair(t *testing.T) {
	for _, s := range smallSpecs {
		pats := sortedFinite(s)
		for i := 1; i < len(pats); i++ {
			lo, hi := pats[i-1], pats[i]
			vlo, vhi := refDecode(s, lo), refDecode(s, hi)
			if vlo == vhi {
				continue // -0, +0
			}
			mid := (vlo + vhi) / 2
			even, toZero := lo, lo
			if hi&1 == 0 {
				even = hi
			}
			if vlo < 0 {
				toZero = hi
			}
			check := func(x float64, r numerics.Rounding, want uint64) {
				t.Helper()
				if got := numerics.EncodeMode(s.d, x, r); got != want {
					t.Fatalf("%s %s: x=%v between %#x (%v) and %#x (%v): got %#x, want %#x",
						s.d, r, x, lo, vlo, hi, vhi, got, want)
				}
			}
			step := (vhi - vlo) / 1024
			check(mid, numerics.RoundNearestEven, even)
			check(math.Nextafter(mid, vhi), numerics.RoundNearestEven, hi)
			check(math.Nextafter(mid, vlo), numerics.RoundNearestEven, lo)
			check(mid+step, numerics.RoundNearestEven, hi)
			check(mid-step, numerics.RoundNearestEven, lo)
			for _, x := range []float64{mid, math.Nextafter(vhi, vlo), math.Nextafter(vlo, vhi), mid + step, mid - step} {
				check(x, numerics.RoundTowardZero, toZero)
			}
		}
	}
}

func TestOverflow(t *testing.T) {
	for _, s := range smallSpecs {
		sign := uint64(1) << (s.e + s.m)
		maxBits := uint64(0)
		for b := uint64(0); b < sign; b++ {
			if refDecode(s, b) == s.maxVal {
				maxBits = b
			}
		}
		infBits := maxBits + 1 // IEEE formats only
		prev := refDecode(s, maxBits-1)
		ulp := s.maxVal - prev
		cases := []struct {
			x        float64
			rne, rtz uint64 // expected magnitudes for an IEEE format
		}{
			{s.maxVal + ulp/4, maxBits, maxBits},
			{math.Nextafter(s.maxVal+ulp/2, 0), maxBits, maxBits},
			{s.maxVal + ulp/2, infBits, maxBits},
			{s.maxVal + ulp, infBits, maxBits},
			{1e300, infBits, maxBits},
			{math.MaxFloat64, infBits, maxBits},
			{math.Inf(1), infBits, infBits},
		}
		for _, c := range cases {
			for _, neg := range []bool{false, true} {
				x, sb := c.x, uint64(0)
				if neg {
					x, sb = -x, sign
				}
				wantRNE, wantRTZ := c.rne|sb, c.rtz|sb
				if s.satfinite() {
					wantRNE, wantRTZ = maxBits|sb, maxBits|sb
				}
				if got := numerics.Encode(s.d, x); got != wantRNE {
					t.Errorf("Encode(%s, %v) = %#x, want %#x", s.d, x, got, wantRNE)
				}
				if got := numerics.EncodeMode(s.d, x, numerics.RoundTowardZero); got != wantRTZ {
					t.Errorf("EncodeMode(%s, %v, rtz) = %#x, want %#x", s.d, x, got, wantRTZ)
				}
			}
		}
	}
	if got := numerics.Encode(numerics.F32, 1e39); got != 0x7F800000 {
		t.Errorf("Encode(f32, 1e39) = %#x, want +Inf", got)
	}
	if got := numerics.EncodeMode(numerics.F32, -1e39, numerics.RoundTowardZero); got != 0xFF7FFFFF {
		t.Errorf("EncodeMode(f32, -1e39, rtz) = %#x, want -max", got)
	}
}

// randomAround draws float64s spread over every binade of s, a few beyond each end, plus
// some arbitrary bit patterns.
func randomAround(rng *rand.Rand, s spec) float64 {
	if rng.IntN(8) == 0 {
		return math.Float64frombits(rng.Uint64())
	}
	lowExp := 1 - s.bias - s.m - 4
	highExp := int(math.Log2(s.maxVal)) + 3
	e := lowExp + rng.IntN(highExp-lowExp+1)
	x := math.Ldexp(1+float64(rng.Uint64()>>11)/(1<<53), e)
	if rng.IntN(2) == 0 {
		x = -x
	}
	return x
}

func TestEncodeMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, s := range append(append([]spec{}, smallSpecs...), f32Spec) {
		for i := 0; i < 300000; i++ {
			x := randomAround(rng, s)
			for _, r := range modes {
				got := numerics.EncodeMode(s.d, x, r)
				want := refRound(s, x, r == numerics.RoundTowardZero)
				if math.IsNaN(x) && got != s.nan || !sameFloat(refDecode(s, got), want) {
					t.Fatalf("EncodeMode(%s, %v (%#x), %s) = %#x (%v), want %v",
						s.d, x, math.Float64bits(x), r, got, refDecode(s, got), want)
				}
				if got>>s.bitsTotal() != 0 {
					t.Fatalf("EncodeMode(%s, %v) = %#x sets bits above the dtype width", s.d, x, got)
				}
			}
			if got, want := numerics.Round(s.d, x), refRound(s, x, false); !sameFloat(got, want) {
				t.Fatalf("Round(%s, %v) = %v, want %v", s.d, x, got, want)
			}
		}
	}
}

func TestNaNSignedZeroAndTiny(t *testing.T) {
	nans := []float64{math.NaN(), math.Copysign(math.NaN(), -1), math.Float64frombits(0x7FF0000000000001),
		math.Float64frombits(0xFFF8DEADBEEF0000)}
	negZero := math.Copysign(0, -1)
	for _, s := range append(append([]spec{}, smallSpecs...), f32Spec) {
		sign := uint64(1) << (s.e + s.m)
		for _, r := range modes {
			for _, n := range nans {
				if got := numerics.EncodeMode(s.d, n, r); got != s.nan {
					t.Errorf("EncodeMode(%s, NaN %#x, %s) = %#x, want %#x", s.d, math.Float64bits(n), r, got, s.nan)
				}
			}
			for _, c := range []struct {
				x    float64
				want uint64
			}{{0, 0}, {negZero, sign}, {1e-300, 0}, {-1e-300, sign}, {5e-324, 0}, {-5e-324, sign}} {
				if got := numerics.EncodeMode(s.d, c.x, r); got != c.want {
					t.Errorf("EncodeMode(%s, %v, %s) = %#x, want %#x", s.d, c.x, r, got, c.want)
				}
			}
		}
		if !math.Signbit(numerics.Round(s.d, negZero)) {
			t.Errorf("Round(%s, -0) lost the sign", s.d)
		}
	}
	odd := math.Float64frombits(0x7FF0000000000123)
	if got := numerics.Encode(numerics.F64, odd); got != 0x7FF0000000000123 {
		t.Errorf("Encode(f64, NaN) must keep the bits, got %#x", got)
	}
	if got := numerics.EncodeMode(numerics.F64, 0.1, numerics.RoundTowardZero); got != math.Float64bits(0.1) {
		t.Errorf("EncodeMode(f64, 0.1, rtz) = %#x", got)
	}
}

// A float64 just above an f32 midpoint must not be rounded to the midpoint first: that
// double rounding is what the direct path avoids.
func TestNoDoubleRounding(t *testing.T) {
	x := 1 + math.Ldexp(1, -11) + math.Ldexp(1, -30) // f16: just above the tie between 1 and 1+2^-10
	if got := numerics.Encode(numerics.F16, x); got != 0x3C01 {
		t.Errorf("Encode(f16, 1+2^-11+2^-30) = %#x, want 0x3C01", got)
	}
	y := 1 + math.Ldexp(1, -8) + math.Ldexp(1, -40) // bf16: via f32 this would be a tie to 1
	if got := numerics.Encode(numerics.BF16, y); got != 0x3F81 {
		t.Errorf("Encode(bf16, 1+2^-8+2^-40) = %#x, want 0x3F81", got)
	}
}

func TestIntAndBoolEncode(t *testing.T) {
	cases := []struct {
		d    numerics.DType
		x    float64
		want uint64
	}{
		{numerics.I8, 3.9, 3}, {numerics.I8, -3.9, 0xFD}, {numerics.I8, 127.99, 0x7F},
		{numerics.I8, 128, 0x7F}, {numerics.I8, 1e10, 0x7F}, {numerics.I8, -128.9, 0x80},
		{numerics.I8, -1e300, 0x80}, {numerics.I8, math.Inf(1), 0x7F}, {numerics.I8, math.Inf(-1), 0x80},
		{numerics.I8, math.NaN(), 0}, {numerics.I8, -0.5, 0},
		{numerics.I32, 2147483647.5, 0x7FFFFFFF}, {numerics.I32, 3e9, 0x7FFFFFFF},
		{numerics.I32, -2147483648.9, 0x80000000}, {numerics.I32, -1, 0xFFFFFFFF},
		{numerics.I32, -7.99, 0xFFFFFFF9}, {numerics.I32, math.NaN(), 0}, {numerics.I32, 1e-300, 0},
		{numerics.Bool, 0, 0}, {numerics.Bool, math.Copysign(0, -1), 0}, {numerics.Bool, 1e-300, 1},
		{numerics.Bool, -2, 1}, {numerics.Bool, math.NaN(), 1}, {numerics.Bool, math.Inf(-1), 1},
	}
	for _, c := range cases {
		for _, r := range modes {
			if got := numerics.EncodeMode(c.d, c.x, r); got != c.want {
				t.Errorf("EncodeMode(%s, %v, %s) = %#x, want %#x", c.d, c.x, r, got, c.want)
			}
		}
		if got, want := numerics.Round(c.d, c.x), numerics.Decode(c.d, c.want); got != want {
			t.Errorf("Round(%s, %v) = %v, want %v", c.d, c.x, got, want)
		}
	}
}

func TestWrapInt(t *testing.T) {
	cases := []struct {
		d       numerics.DType
		v, want int64
	}{
		{numerics.I8, 127, 127}, {numerics.I8, 128, -128}, {numerics.I8, 255, -1}, {numerics.I8, 256, 0},
		{numerics.I8, -129, 127}, {numerics.I32, 1 << 31, math.MinInt32}, {numerics.I32, 1<<32 + 5, 5},
		{numerics.I32, -1, -1}, {numerics.Bool, 2, 1}, {numerics.Bool, 0, 0}, {numerics.F32, 1 << 40, 1 << 40},
	}
	for _, c := range cases {
		if got := numerics.WrapInt(c.d, c.v); got != c.want {
			t.Errorf("WrapInt(%s, %d) = %d, want %d", c.d, c.v, got, c.want)
		}
	}
}

// Rounding is monotone and idempotent for every dtype and mode.
func TestRoundingMonotoneIdempotent(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, d := range numerics.All {
		s := spec{bias: 15, m: 10, maxVal: 1e6}
		for _, sp := range append(append([]spec{}, smallSpecs...), f32Spec) {
			if sp.d == d {
				s = sp
			}
		}
		for _, r := range modes {
			round := func(x float64) float64 { return numerics.Decode(d, numerics.EncodeMode(d, x, r)) }
			for i := 0; i < 20000; i++ {
				x, y := randomAround(rng, s), randomAround(rng, s)
				if math.IsNaN(x) || math.IsNaN(y) {
					continue
				}
				if x > y {
					x, y = y, x
				}
				rx, ry := round(x), round(y)
				if rx > ry {
					t.Fatalf("%s %s not monotone: %v -> %v but %v -> %v", d, r, x, rx, y, ry)
				}
				if again := round(rx); !sameFloat(again, rx) {
					t.Fatalf("%s %s not idempotent: %v -> %v -> %v", d, r, x, rx, again)
				}
			}
		}
	}
}

func TestEncodeDecodeDoNotAllocate(t *testing.T) {
	for _, d := range numerics.All {
		n := testing.AllocsPerRun(100, func() {
			_ = numerics.Decode(d, numerics.EncodeMode(d, 1.2345, numerics.RoundTowardZero))
			_ = numerics.Round(d, -3.7)
		})
		if n != 0 {
			t.Errorf("%s: %v allocations per Encode/Decode/Round", d, n)
		}
	}
}
