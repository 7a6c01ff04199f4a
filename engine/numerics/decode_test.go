package numerics_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

func TestDecodeEveryPattern(t *testing.T) {
	for _, s := range smallSpecs {
		for b := 0; b < s.count(); b++ {
			want := refDecode(s, uint64(b))
			if got := numerics.Decode(s.d, uint64(b)); !sameFloat(got, want) {
				t.Fatalf("Decode(%s, %#x) = %v, want %v", s.d, b, got, want)
			}
			// High bits beyond the dtype's width are ignored.
			if got := numerics.Decode(s.d, uint64(b)|0xABCD<<32); !sameFloat(got, want) {
				t.Fatalf("Decode(%s, %#x with high garbage) = %v, want %v", s.d, b, got, want)
			}
			if numerics.IsNaNBits(s.d, uint64(b)) != math.IsNaN(want) {
				t.Fatalf("IsNaNBits(%s, %#x) = %v, value %v", s.d, b, !math.IsNaN(want), want)
			}
		}
	}
}

func TestDecodeF32Fields(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	edges := []uint64{0, 0x80000000, 1, 0x80000001, 0x007FFFFF, 0x00800000, 0x7F7FFFFF, 0x7F800000,
		0xFF800000, 0x7FC00000, 0x7F800001, 0x3F800000}
	for i := 0; i < 200000; i++ {
		b := uint64(rng.Uint32())
		if i < len(edges) {
			b = edges[i]
		}
		want := refDecode(f32Spec, b)
		if got := numerics.Decode(numerics.F32, b); !sameFloat(got, want) {
			t.Fatalf("Decode(f32, %#x) = %v, want %v", b, got, want)
		}
	}
}

func TestDecodeKnownValues(t *testing.T) {
	cases := []struct {
		d    numerics.DType
		bits uint64
		want float64
	}{
		{numerics.F8E4M3, 0x7E, 448},
		{numerics.F8E4M3, 0xFE, -448},
		{numerics.F8E4M3, 0x01, math.Ldexp(1, -9)},
		{numerics.F8E4M3, 0x08, math.Ldexp(1, -6)},
		{numerics.F8E4M3, 0x78, 256},
		{numerics.F8E5M2, 0x7B, 57344},
		{numerics.F8E5M2, 0x7C, math.Inf(1)},
		{numerics.F8E5M2, 0xFC, math.Inf(-1)},
		{numerics.F8E5M2, 0x01, math.Ldexp(1, -16)},
		{numerics.F16, 0x7BFF, 65504},
		{numerics.F16, 0x0001, math.Ldexp(1, -24)},
		{numerics.F16, 0x03FF, math.Ldexp(1023, -24)},
		{numerics.F16, 0x0400, math.Ldexp(1, -14)},
		{numerics.F16, 0x8000, math.Copysign(0, -1)},
		{numerics.F16, 0x3C00, 1},
		{numerics.F16, 0xFC00, math.Inf(-1)},
		{numerics.BF16, 0x3F80, 1},
		{numerics.BF16, 0x7F7F, 3.3895313892515355e38},
		{numerics.BF16, 0x0001, math.Ldexp(1, -133)},
		{numerics.F32, 0x00000001, math.Ldexp(1, -149)},
		{numerics.F64, 0x3FF0000000000000, 1},
		{numerics.I8, 0xFF, -1},
		{numerics.I8, 0x80, -128},
		{numerics.I8, 0x7F, 127},
		{numerics.I32, 0xFFFFFFFF, -1},
		{numerics.I32, 0x80000000, math.MinInt32},
		{numerics.I32, 0xFFFFFFFF00000005, 5},
		{numerics.Bool, 0, 0},
		{numerics.Bool, 1, 1},
		{numerics.Bool, 0x80, 1},
		{numerics.Bool, 0x100, 0},
	}
	for _, c := range cases {
		if got := numerics.Decode(c.d, c.bits); !sameFloat(got, c.want) {
			t.Errorf("Decode(%s, %#x) = %v, want %v", c.d, c.bits, got, c.want)
		}
	}
	for _, b := range []uint64{0x7F, 0xFF} {
		if !math.IsNaN(numerics.Decode(numerics.F8E4M3, b)) {
			t.Errorf("e4m3 %#x must be NaN", b)
		}
	}
	if !math.IsNaN(numerics.Decode(numerics.Invalid, 0)) || numerics.Encode(numerics.Invalid, 3) != 0 {
		t.Errorf("invalid dtype must decode to NaN and encode to 0")
	}
}

func TestMaxFinite(t *testing.T) {
	want := map[numerics.DType]float64{
		numerics.F64: math.MaxFloat64, numerics.F32: math.MaxFloat32, numerics.F16: 65504,
		numerics.BF16: 3.3895313892515355e38, numerics.F8E4M3: 448, numerics.F8E5M2: 57344,
		numerics.I8: 127, numerics.I32: 2147483647, numerics.Bool: 1, numerics.Invalid: 0,
	}
	for d, w := range want {
		if got := numerics.MaxFinite(d); got != w {
			t.Errorf("MaxFinite(%s) = %v, want %v", d, got, w)
		}
		if d.Valid() && numerics.Round(d, w) != w {
			t.Errorf("Round(%s, MaxFinite) = %v, want it unchanged", d, numerics.Round(d, w))
		}
	}
}
