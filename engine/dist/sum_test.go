package dist

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

// The blocked sums must keep the element-by-element order's bits (rank 0 first), NaN,
// infinities, signed zeros and averages included, across block edges (n = 2500 is two whole
// blocks and a partial one); an in-place call (out is any one of the contributions) must still
// add the value it held before, and so must an output that starts before a contribution it
// overlaps (which the element loop allowed too).
func TestRowSumsHaveTheElementOrdersBits(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	nan32 := uint32(numerics.Encode(numerics.F32, math.NaN())) // a NaN result is the canonical one
	specials := []float64{math.NaN(), math.Inf(1), math.Inf(-1), math.Copysign(0, -1), 0, 1e38, -1e38, 1e-45}
	draw := func() float64 {
		if rng.IntN(8) == 0 {
			return specials[rng.IntN(len(specials))]
		}
		return rng.NormFloat64() * math.Pow(10, float64(rng.IntN(9)-4))
	}
	for _, n := range []int{257, 2*sumBlock + 452} {
		for world := 1; world <= 5; world++ {
			for _, avg := range []bool{false, true} {
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
						if (w != w) != (g != g) || w == w && math.Float32bits(w) != math.Float32bits(g) || w != w && math.Float32bits(g) != nan32 {
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
					if (w != w) != (g != g) || w == w && math.Float64bits(w) != math.Float64bits(g) || w != w && math.Float64bits(g) != math.Float64bits(math.NaN()) {
						t.Fatalf("world %d avg %v: f64 element %d: got %v, want %v", world, avg, i, g, w)
					}
				}
				for j := range world {
					inPlace := make([][]float32, world)
					for r := range world {
						inPlace[r] = append([]float32(nil), i32[r]...)
					}
					sumF32(inPlace[j], inPlace, avg)
					same32(inPlace[j], fmt.Sprintf("in place over contribution %d", j))
				}
				if world > 1 {
					// out starts one element into the last contribution's storage, which holds a
					// copy of it shifted by one: writing out[i] clobbers element i+1 of the input.
					store := make([]float32, n+1)
					copy(store[1:], i32[world-1])
					shifted := append(append([][]float32(nil), i32[:world-1]...), store[1:])
					sumF32(store[:n], shifted, avg)
					same32(store[:n], "over a contribution shifted by one element")
				}
			}
		}
	}
}

// BenchmarkSumF32 is the reduction alone: two ranks' 1M floats into a third buffer (bytes are
// the output's). With -tags purego it times the scalar loop instead of the SSE2 adds.
func BenchmarkSumF32(b *testing.B) {
	const n = 1 << 18
	ins := [][]float32{make([]float32, n), make([]float32, n)}
	out := make([]float32, n)
	for i := range n {
		ins[0][i], ins[1][i] = float32(i), float32(2*i)
	}
	b.SetBytes(4 * n)
	for b.Loop() {
		sumF32(out, ins, false)
	}
}
