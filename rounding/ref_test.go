package rounding

import (
	"math"
	"testing"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/backend"
	_ "github.com/tessera-qa/tessera-qa/engine/backend/cpu"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

// The independent encoder on the cases docs/numerics.md spells out.
func TestEncoderOnDocumentedCases(t *testing.T) {
	for _, c := range []struct {
		d    numerics.DType
		x    float64
		want uint64
	}{
		{numerics.F16, 65519.99, 0x7BFF}, {numerics.F16, 65520, 0x7C00}, {numerics.F16, math.Inf(-1), 0xFC00},
		{numerics.F16, 1 + math.Ldexp(1, -11), 0x3C00}, {numerics.F16, 1 + 3*math.Ldexp(1, -11), 0x3C02},
		{numerics.F16, math.Ldexp(1, -25), 0}, {numerics.F16, -math.Ldexp(1, -25), 0x8000}, {numerics.F16, 3 * math.Ldexp(1, -26), 1},
		{numerics.F16, math.Ldexp(3, -25), 2}, {numerics.F16, math.NaN(), 0x7E00}, {numerics.F16, math.Copysign(0, -1), 0x8000},
		{numerics.BF16, 1 + math.Ldexp(1, -8) + math.Ldexp(1, -40), 0x3F81}, {numerics.BF16, 1 + math.Ldexp(1, -8), 0x3F80},
		{numerics.BF16, -math.NaN(), 0x7FC0},
		{numerics.F8E4M3, 448, 0x7E}, {numerics.F8E4M3, 464, 0x7E}, {numerics.F8E4M3, 1e6, 0x7E}, {numerics.F8E4M3, math.Inf(-1), 0xFE},
		{numerics.F8E4M3, math.NaN(), 0x7F}, {numerics.F8E4M3, math.Ldexp(1, -10), 0}, {numerics.F8E4M3, math.Ldexp(3, -11), 1},
		{numerics.F8E5M2, math.Inf(1), 0x7B}, {numerics.F8E5M2, 61440, 0x7B}, {numerics.F8E5M2, 57344, 0x7B}, {numerics.F8E5M2, math.NaN(), 0x7E},
		{numerics.F32, 1 + math.Ldexp(1, -24), 0x3F800000}, {numerics.F32, 1 + 3*math.Ldexp(1, -24), 0x3F800002},
		{numerics.F32, math.Ldexp(1, -150), 0}, {numerics.F32, math.Ldexp(3, -151), 1}, {numerics.F32, 1e39, 0x7F800000},
		{numerics.I8, 300, 127}, {numerics.I8, math.Inf(-1), 0x80}, {numerics.I8, math.NaN(), 0}, {numerics.I8, -0.9, 0}, {numerics.I8, -128.9, 0x80},
		{numerics.I32, 2147483647.5, 0x7FFFFFFF}, {numerics.I32, -3.7, 0xFFFFFFFD},
		{numerics.Bool, math.NaN(), 1}, {numerics.Bool, math.Copysign(0, -1), 0},
	} {
		if got := EncodeDType(c.d, c.x); got != c.want {
			t.Errorf("Encode(%s, %v) = %#x, want %#x", c.d, c.x, got, c.want)
		}
	}
}

// Every finite pattern decodes from its fields and encodes back to itself; the values grow
// with the pattern (so adjacent patterns are adjacent values and midpoints are ties).
func TestEncoderRoundTripsEveryPattern(t *testing.T) {
	for _, f := range []Format{F16, BF16, E4M3, E5M2} {
		prev := -1.0
		for p := uint64(0); p <= f.maxBits(); p++ {
			v := f.Decode(p)
			if got := f.Encode(v); got != p {
				t.Fatalf("%s: %#x decodes to %v, which encodes to %#x", f.Name, p, v, got)
			}
			if v <= prev {
				t.Fatalf("%s: %#x = %v is not above the previous pattern's %v", f.Name, p, v, prev)
			}
			prev = v
		}
		if f.IEEE && !math.IsInf(f.Decode(f.maxBits()+1), 1) {
			t.Errorf("%s: the pattern above max is not Inf", f.Name)
		}
	}
	if E4M3.MaxFinite() != 448 || E5M2.MaxFinite() != 57344 || F16.MaxFinite() != 65504 {
		t.Errorf("max finite: e4m3 %v e5m2 %v f16 %v", E4M3.MaxFinite(), E5M2.MaxFinite(), F16.MaxFinite())
	}
}

// Inputs hold ties of both parities in every format, values src holds exactly, and NaN.
func TestInputsHoldTiesAndSpecials(t *testing.T) {
	for _, src := range []numerics.DType{numerics.F64, numerics.F32} {
		for _, d := range Narrow {
			f, _ := FormatOf(d)
			evenUp, evenDown, nan := 0, 0, 0
			for _, x := range Inputs(src, d) {
				if x != x {
					nan++
					continue
				}
				p := f.Encode(x)
				lo, hi := f.Decode(p&^1), f.Decode(p&^1+1)
				if !math.IsInf(hi, 0) && x == lo+(hi-lo)/2 {
					evenDown++
				}
				if p&1 == 0 && p > 1 && x == f.Decode(p-1)+(f.Decode(p)-f.Decode(p-1))/2 {
					evenUp++
				}
			}
			if evenUp == 0 || evenDown == 0 || nan == 0 {
				t.Errorf("%s->%s: %d ties rounding up, %d down, %d NaN", src, d, evenUp, evenDown, nan)
			}
		}
	}
}

// The whole suite on the CPU backend, and how long it takes (suites/rounding runs it).
func TestEveryRouteOnTheCPU(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	start := time.Now()
	cs, err := AllCases()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d cases built in %v", len(cs), time.Since(start))
	cpu, err := backend.Get("cpu")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cs {
		got, err := c.Run(cpu)
		if err != nil {
			t.Errorf("%s: %v", c.Name, err)
			continue
		}
		if err := c.Compare(got); err != nil {
			t.Error(err)
		}
	}
	t.Logf("%d cases in %v", len(cs), time.Since(start))
}

// PyTorch (and ml_dtypes where installed) agrees with the independent encoder on f32 sources
// (skipped without torch).
func TestTorchAgreesWithTheEncoder(t *testing.T) {
	if why := TorchAvailable(); why != "" {
		t.Skip(why)
	}
	compared, err := CrossCheckTorch()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("compared: %v", compared)
	if len(compared) < 2 {
		t.Errorf("only %v compared: torch converts f32 to f16 and bf16 everywhere", compared)
	}
}
