package numerics_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

func TestOrderedIsMonotone(t *testing.T) {
	for _, s := range smallSpecs {
		// Every non-NaN pattern, Inf included, sorted by the reference value.
		pats := sortedFinite(s)
		if !s.fn {
			neg, pos := uint64(1)<<(s.e+s.m)|uint64(1<<s.e-1)<<s.m, uint64(1<<s.e-1)<<s.m
			pats = append(append([]uint64{neg}, pats...), pos)
		}
		for i := 1; i < len(pats); i++ {
			a, b := pats[i-1], pats[i]
			oa, ob := numerics.Ordered(s.d, a), numerics.Ordered(s.d, b)
			va, vb := refDecode(s, a), refDecode(s, b)
			zeros := va == 0 && vb == 0
			if zeros && oa != ob || !zeros && ob != oa+1 {
				t.Fatalf("%s: Ordered(%#x)=%d, Ordered(%#x)=%d for values %v < %v: want consecutive (equal for ±0)",
					s.d, a, oa, b, ob, va, vb)
			}
			if d := numerics.ULPDistance(s.d, b, a); !zeros && d != 1 || zeros && d != 0 {
				t.Fatalf("%s: ULPDistance(%#x, %#x) = %d", s.d, b, a, d)
			}
		}
		minSub, negMinSub := uint64(1), uint64(1)<<(s.e+s.m)|1
		if d := numerics.ULPDistance(s.d, negMinSub, minSub); d != 2 {
			t.Errorf("%s: ULP distance across zero = %d, want 2", s.d, d)
		}
		if d := numerics.ULPDistance(s.d, s.nan, minSub); d != math.MaxUint64 {
			t.Errorf("%s: ULP distance NaN to number = %d, want MaxUint64", s.d, d)
		}
		if d := numerics.ULPDistance(s.d, s.nan, s.nan|1<<(s.e+s.m)); d != 0 {
			t.Errorf("%s: ULP distance NaN to NaN = %d, want 0", s.d, d)
		}
	}
}

func TestOrderedWideFloats(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for i := 0; i < 100000; i++ {
		x, y := math.Float64frombits(rng.Uint64()), math.Float64frombits(rng.Uint64())
		if math.IsNaN(x) || math.IsNaN(y) {
			continue
		}
		ox, oy := numerics.Ordered(numerics.F64, math.Float64bits(x)), numerics.Ordered(numerics.F64, math.Float64bits(y))
		if (x < y) != (ox < oy) {
			t.Fatalf("f64 Ordered disagrees with < for %v, %v", x, y)
		}
		fx, fy := float32(x), float32(y)
		bx, by := uint64(math.Float32bits(fx)), uint64(math.Float32bits(fy))
		if (fx < fy) != (numerics.Ordered(numerics.F32, bx) < numerics.Ordered(numerics.F32, by)) {
			t.Fatalf("f32 Ordered disagrees with < for %v, %v", fx, fy)
		}
	}
	maxBits := math.Float64bits(math.MaxFloat64)
	if d := numerics.ULPDistance(numerics.F64, maxBits, maxBits|1<<63); d != 2*maxBits {
		t.Errorf("f64 ULP distance -max..max = %d, want %d", d, 2*maxBits)
	}
	if d := numerics.ULPDistance(numerics.F32, 0x3F800000, 0x3F800003); d != 3 {
		t.Errorf("f32 ULP distance = %d, want 3", d)
	}
}

func TestOrderedInts(t *testing.T) {
	if got := numerics.Ordered(numerics.I8, 0xFF); got != -1 {
		t.Errorf("Ordered(int8, 0xFF) = %d", got)
	}
	if got := numerics.ULPDistance(numerics.I8, 0x80, 0x7F); got != 255 {
		t.Errorf("ULPDistance(int8, -128, 127) = %d", got)
	}
	if got := numerics.ULPDistance(numerics.I32, 0x80000000, 0x7FFFFFFF); got != 1<<32-1 {
		t.Errorf("ULPDistance(int32, min, max) = %d", got)
	}
	if numerics.IsNaNBits(numerics.I32, 0xFFFFFFFF) || numerics.IsNaNBits(numerics.Bool, 1) {
		t.Errorf("ints and bool have no NaN")
	}
}
