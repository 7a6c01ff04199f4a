package numerics_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/x448/float16"

	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

// x448/float16 converts float32 -> f16 with round-to-nearest-even; it is a second,
// independently written implementation to agree with on float32-representable inputs.

func TestF16AgreesWithX448EveryPattern(t *testing.T) {
	for b := 0; b < 1<<16; b++ {
		h := float16.Frombits(uint16(b))
		f := h.Float32()
		if got := numerics.Decode(numerics.F16, uint64(b)); !sameFloat(got, float64(f)) {
			t.Fatalf("Decode(f16, %#x) = %v, x448 says %v", b, got, f)
		}
		if h.IsNaN() {
			continue
		}
		if got := numerics.Encode(numerics.F16, float64(f)); got != uint64(b) {
			t.Fatalf("Encode(f16, %v) = %#x, want %#x", f, got, b)
		}
		// Neighbours of each value, and the midpoints to the next pattern up, in float32.
		for _, x := range []float32{math.Nextafter32(f, float32(math.Inf(1))), math.Nextafter32(f, float32(math.Inf(-1)))} {
			agreeX448(t, x)
		}
		if b&0x7FFF < 0x7C00 {
			next := float16.Frombits(uint16(b + 1)).Float32()
			if !math.IsInf(float64(next), 0) && !math.IsNaN(float64(next)) {
				agreeX448(t, f/2+next/2)
			}
		}
	}
}

func TestF16AgreesWithX448Random(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	for i := 0; i < 1000000; i++ {
		var x float32
		if i%2 == 0 {
			x = math.Float32frombits(rng.Uint32())
		} else {
			// Concentrate on the f16 range, subnormals included.
			x = float32(math.Ldexp(1+rng.Float64(), rng.IntN(46)-28))
			if rng.IntN(2) == 0 {
				x = -x
			}
		}
		agreeX448(t, x)
	}
}

func agreeX448(t *testing.T, x float32) {
	t.Helper()
	got := numerics.Encode(numerics.F16, float64(x))
	want := uint64(float16.Fromfloat32(x).Bits())
	if math.IsNaN(float64(x)) {
		if got != 0x7E00 {
			t.Fatalf("Encode(f16, NaN %#x) = %#x, want 0x7E00", math.Float32bits(x), got)
		}
		return
	}
	if got != want {
		t.Fatalf("Encode(f16, %v (f32 %#x)) = %#x, x448 gives %#x", x, math.Float32bits(x), got, want)
	}
}
