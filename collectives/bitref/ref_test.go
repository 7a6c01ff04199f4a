package bitref

import (
	"math"
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

func f32(v float32) uint64 { return uint64(math.Float32bits(v)) }

// Hand-worked cases of the contract, each one the reference must get and a plausible
// implementation gets wrong.
func TestHandWorked(t *testing.T) {
	negZero := math.Copysign(0, -1)
	bf := func(v float64) uint64 { return numerics.Encode(numerics.BF16, v) }
	cases := []struct {
		name string
		mode Mode
		dt   numerics.DType
		red  Red
		in   []uint64
		want uint64
	}{
		// Order: 1 + 2^-24 + 2^-24 is 1 in f32 left to right, 1 + 2^-23 exactly.
		{"det order", Deterministic, numerics.F32, Sum, []uint64{f32(1), f32(0x1p-24), f32(0x1p-24)}, f32(1)},
		{"det order reversed", Deterministic, numerics.F32, Sum, []uint64{f32(0x1p-24), f32(0x1p-24), f32(1)}, f32(1 + 0x1p-23)},
		{"exact", Exact, numerics.F32, Sum, []uint64{f32(1), f32(0x1p-24), f32(0x1p-24)}, f32(1 + 0x1p-23)},
		// Double rounding: 1 + 2^-24 + 2^-80 is above the midpoint; via f64 it is the midpoint, then 1.
		{"exact no double rounding", Exact, numerics.F32, Sum, []uint64{f32(1), f32(0x1p-24), f32(0x1p-80)}, f32(1 + 0x1p-23)},
		// bf16 accumulates in f32: 1 + 2^-9 + 2^-9 = 1 + 2^-8 in f32, which rounds to 1 + 2^-7 in bf16 (tie to even);
		// in bf16 at every add it would stay 1.
		{"bf16 in f32", Deterministic, numerics.BF16, Sum, []uint64{bf(1), bf(0x1p-9), bf(0x1p-9)}, bf(1)},
		{"bf16 in f32 tie", Deterministic, numerics.BF16, Sum, []uint64{bf(1), bf(0x1p-8), bf(0x1p-9), bf(0x1p-9)}, bf(1 + 0x1p-7)},
		{"max zeros", Deterministic, numerics.F32, Max, []uint64{f32(float32(negZero)), f32(0)}, f32(0)},
		{"min zeros", Deterministic, numerics.F32, Min, []uint64{f32(0), f32(float32(negZero))}, f32(float32(negZero))},
		{"max NaN payload", Deterministic, numerics.F32, Max, []uint64{f32(1), 0xffc01234}, numerics.Encode(numerics.F32, math.NaN())},
		{"sum NaN payload", Deterministic, numerics.F32, Sum, []uint64{0x7fc00001, f32(1)}, numerics.Encode(numerics.F32, math.NaN())},
		{"inf minus inf", Exact, numerics.F16, Sum, []uint64{0x7c00, 0xfc00}, numerics.Encode(numerics.F16, math.NaN())},
		{"exact cancel +0", Exact, numerics.F32, Sum, []uint64{f32(3), f32(-3)}, f32(0)},
		{"exact all -0", Exact, numerics.F32, Sum, []uint64{f32(float32(negZero)), f32(float32(negZero))}, f32(float32(negZero))},
		{"exact subnormal", Exact, numerics.F32, Sum, []uint64{f32(0x1.8p-126), f32(-0x1p-126)}, f32(0x1p-127)},
		{"f16 overflow", Deterministic, numerics.F16, Sum, []uint64{0x7bff, 0x7bff}, 0x7c00},
		{"int8 wraps", Deterministic, numerics.I8, Sum, []uint64{100, 100}, uint64(uint8(200))},
		{"int avg truncates", Deterministic, numerics.I32, Avg, []uint64{uint64(uint32(0xffffffff)), uint64(uint32(0xfffffffe))}, uint64(uint32(0xffffffff))},
		{"exact avg", Exact, numerics.F32, Avg, []uint64{f32(1), f32(2)}, f32(1.5)},
		// Overflow in the narrow formats: e4m3 has no infinity and saturates to 448, e5m2
		// saturates to 57344 (satfinite, like every engine cast), bf16 goes to +Inf through the
		// f32 accumulator.
		{"e4m3 saturates", Deterministic, numerics.F8E4M3, Sum, []uint64{0x7e, 0x7e}, 0x7e},
		{"exact e4m3 saturates", Exact, numerics.F8E4M3, Sum, []uint64{0x7e, 0x7e}, 0x7e},
		{"e5m2 saturates", Deterministic, numerics.F8E5M2, Sum, []uint64{0x7b, 0x7b}, 0x7b},
		{"bf16 overflow", Deterministic, numerics.BF16, Sum, []uint64{0x7f7f, 0x7f7f}, 0x7f80},
		{"e4m3 NaN", Exact, numerics.F8E4M3, Max, []uint64{0x7e, 0xff}, 0x7f},
	}
	for _, c := range cases {
		if got := Element(c.mode, c.dt, c.red, c.in); got != c.want {
			t.Errorf("%s: %s %s %s of %#x = %#x, want %#x", c.name, c.mode, c.dt, c.red, c.in, got, c.want)
		}
	}
}

// TestFormats checks each grid against numerics' decoder: the smallest subnormal is 2^uMin and
// the largest finite value has p significant bits.
func TestFormats(t *testing.T) {
	for dt, f := range formats {
		if v := numerics.Decode(dt, 1); v != math.Ldexp(1, f.uMin) {
			t.Errorf("%s: smallest subnormal %g, want 2^%d", dt, v, f.uMin)
		}
		m := numerics.MaxFinite(dt)
		_, e := math.Frexp(m)
		if k := m / math.Ldexp(1, e-f.p); k != math.Trunc(k) || k < math.Ldexp(1, f.p-1) {
			t.Errorf("%s: max %g does not have %d significant bits", dt, m, f.p)
		}
	}
}

// TestExactAgainstRationals: on random f32 triples, the exact sum rounded by roundTo equals
// float32 of the float64 sum whenever float64 holds that sum exactly (checked with big.Rat
// style reasoning: the triple spans fewer than 53 bits).
func TestExactSmallSpan(t *testing.T) {
	s := uint64(1)
	for range 20000 {
		var in []uint64
		var sum float64
		for range 3 {
			s = s*6364136223846793005 + 1442695040888963407
			v := float32(math.Ldexp(float64(1+int(s>>40)%(1<<23))/(1<<23), int(s>>20)%20-10))
			if s&1 != 0 {
				v = -v
			}
			in = append(in, f32(v))
			sum += float64(v)
		}
		if got, want := Element(Exact, numerics.F32, Sum, in), f32(float32(sum)); got != want {
			t.Fatalf("%#x: %#x, want %#x", in, got, want)
		}
	}
}
