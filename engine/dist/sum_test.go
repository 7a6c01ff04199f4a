package dist

import (
	"math"
	"math/rand/v2"
	"testing"
)

// The row-by-row sums must keep the element-by-element order's bits (rank 0 first), NaN,
// infinities, signed zeros and averages included, and an in-place call (out is a later
// contribution) must still add the value it held before.
func TestRowSumsHaveTheElementOrdersBits(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	specials := []float64{math.NaN(), math.Inf(1), math.Inf(-1), math.Copysign(0, -1), 0, 1e38, -1e38, 1e-45}
	draw := func() float64 {
		if rng.IntN(8) == 0 {
			return specials[rng.IntN(len(specials))]
		}
		return rng.NormFloat64() * math.Pow(10, float64(rng.IntN(9)-4))
	}
	for world := 1; world <= 5; world++ {
		for _, avg := range []bool{false, true} {
			const n = 257
			i32 := make([][]float32, world)
			i64 := make([][]float64, world)
			for r := range world {
				i32[r], i64[r] = make([]float32, n), make([]float64, n)
				for i := range n {
					v := draw()
					i32[r][i], i64[r][i] = float32(v), v
				}
			}
			want32, want64 := make([]float32, n), make([]float64, n)
			for i := range n {
				a32, a64 := i32[0][i], i64[0][i]
				for r := 1; r < world; r++ {
					a32 += i32[r][i]
					a64 += i64[r][i]
				}
				if avg {
					a32 /= float32(world)
					a64 /= float64(world)
				}
				want32[i], want64[i] = a32, a64
			}
			same32 := func(got []float32, how string) {
				for i := range n {
					w, g := want32[i], got[i]
					if (w != w) != (g != g) || w == w && math.Float32bits(w) != math.Float32bits(g) {
						t.Fatalf("world %d avg %v %s: f32 element %d: got %v, want %v", world, avg, how, i, g, w)
					}
				}
			}
			out32, out64 := make([]float32, n), make([]float64, n)
			sumF32(out32, i32, avg)
			sumF64(out64, i64, avg)
			same32(out32, "into a fresh buffer")
			for i := range n {
				w, g := want64[i], out64[i]
				if (w != w) != (g != g) || w == w && math.Float64bits(w) != math.Float64bits(g) {
					t.Fatalf("world %d avg %v: f64 element %d: got %v, want %v", world, avg, i, g, w)
				}
			}
			if world > 1 {
				inPlace := make([][]float32, world)
				for r := range world {
					inPlace[r] = append([]float32(nil), i32[r]...)
				}
				sumF32(inPlace[world-1], inPlace, avg) // out is the last contribution
				same32(inPlace[world-1], "in place over the last contribution")
			}
		}
	}
}
