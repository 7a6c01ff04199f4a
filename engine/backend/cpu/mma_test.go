package cpu

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/compiler/tile"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
)

// randF32 draws values spread over many binades, so that rounding differences would show.
func randF32(rng *rand.Rand, n int) []float64 {
	v := make([]float64, n)
	for i := range v {
		v[i] = float64(float32(math.Ldexp(rng.Float64()*2-1, rng.IntN(20)-10)))
	}
	return v
}

// naiveF32 is the IR's f32 MMA written as plainly as possible.
func naiveF32(m, n, k int, a, b, c []float64) []float64 {
	out := make([]float64, m*n)
	for i := range m {
		for j := range n {
			s := float32(c[i*n+j])
			for p := range k {
				s += float32(float32(a[i*k+p]) * float32(b[p*n+j]))
			}
			out[i*n+j] = float64(s)
		}
	}
	return out
}

// naiveRounded is the IR's MMA for any float accumulator: round each product and each sum.
func naiveRounded(dt numerics.DType, m, n, k int, a, b, c []float64) []float64 {
	out := make([]float64, m*n)
	for i := range m {
		for j := range n {
			s := c[i*n+j]
			for p := range k {
				s = numerics.Round(dt, s+numerics.Round(dt, float64(a[i*k+p]*b[p*n+j])))
			}
			out[i*n+j] = s
		}
	}
	return out
}

// runMMA loads A [m,k], B [k,n] and the initial acc [m,n] from buffers of dtype in, runs one
// MMA with accumulator acc and stores the result as f64.
func runMMA(t *testing.T, in, acc numerics.DType, m, n, k int, a, b, c []float64) []float64 {
	t.Helper()
	ta, tb, tc := tt(in, []int{m, k}, a...), tt(in, []int{k, n}, b...), tt(in, []int{m, n}, c...)
	out := tensor.New(numerics.F64, []int{m, n})
	bufs := []*tensor.Tensor{ta, tb, tc, out}
	at := func(p, r, c int) tile.Access { return block2D(p, r, c, tile.C(0), tile.C(0), r, c, true) }
	k0 := kernel([]int{1}, params(bufs, 3), 3, 1,
		tile.Load{Dst: 0, At: at(0, m, k)},
		tile.Load{Dst: 1, At: at(1, k, n)},
		tile.Load{Dst: 2, At: at(2, m, n)},
		tile.MMA{Acc: 2, A: 0, B: 1, AccDType: acc},
		tile.Store{Src: 2, At: at(3, m, n)})
	if err := runTile(k0, 1, bufs...); err != nil {
		t.Fatal(err)
	}
	return out.Float64s()
}

func sameSlices(t *testing.T, what string, got, want []float64) {
	t.Helper()
	bad := 0
	for i := range want {
		if !sameBits(got[i], want[i]) {
			if bad < 3 {
				t.Errorf("%s[%d] = %v, want %v", what, i, got[i], want[i])
			}
			bad++
		}
	}
	if bad > 0 {
		t.Errorf("%s: %d of %d differ", what, bad, len(want))
	}
}

// The blocked f32 path (micro-kernel plus ragged edges) equals the plain triple loop bit for
// bit, for shapes that hit every edge case of the 4x8 blocking.
func TestMMAF32MatchesNaiveLoop(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, s := range [][3]int{{1, 1, 1}, {4, 8, 1}, {5, 9, 7}, {64, 64, 32}, {13, 70, 33}, {3, 17, 64}, {36, 5, 2}} {
		m, n, k := s[0], s[1], s[2]
		a, b, c := randF32(rng, m*k), randF32(rng, k*n), randF32(rng, m*n)
		for _, dt := range []numerics.DType{numerics.F32, numerics.BF16} {
			if dt == numerics.BF16 {
				for _, v := range [][]float64{a, b, c} {
					for i := range v {
						v[i] = numerics.Round(numerics.BF16, v[i])
					}
				}
			}
			sameSlices(t, dt.String()+" inputs, f32 acc", runMMA(t, dt, numerics.F32, m, n, k, a, b, c), naiveF32(m, n, k, a, b, c))
		}
	}
}

func TestMMAF64MatchesNaiveLoop(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, s := range [][3]int{{1, 1, 1}, {4, 4, 3}, {9, 6, 17}, {32, 32, 32}} {
		m, n, k := s[0], s[1], s[2]
		a, b, c := make([]float64, m*k), make([]float64, k*n), make([]float64, m*n)
		for _, v := range [][]float64{a, b, c} {
			for i := range v {
				v[i] = rng.NormFloat64()
			}
		}
		sameSlices(t, "f64", runMMA(t, numerics.F64, numerics.F64, m, n, k, a, b, c), naiveRounded(numerics.F64, m, n, k, a, b, c))
	}
}

// A bf16 accumulator rounds after every add, so it loses what an f32 accumulator keeps.
func TestMMABF16AccumulationDiffersFromF32(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	m, n, k := 8, 8, 64
	a, b, c := randF32(rng, m*k), randF32(rng, k*n), make([]float64, m*n)
	for _, v := range [][]float64{a, b} {
		for i := range v {
			v[i] = numerics.Round(numerics.BF16, v[i])
		}
	}
	accBF16 := runMMA(t, numerics.BF16, numerics.BF16, m, n, k, a, b, c)
	accF32 := runMMA(t, numerics.BF16, numerics.F32, m, n, k, a, b, c)
	sameSlices(t, "bf16 acc", accBF16, naiveRounded(numerics.BF16, m, n, k, a, b, c))
	differ := 0
	for i := range accBF16 {
		if accBF16[i] != accF32[i] {
			differ++
		}
	}
	if differ < len(accBF16)/2 {
		t.Errorf("bf16 and f32 accumulation agree on %d of %d outputs; expected most to differ", len(accBF16)-differ, len(accBF16))
	}
}

func TestMMAIntWraps(t *testing.T) {
	// 100*100 = 10000 wraps to 16 in int8; two such products and then 120 more: 16+16 = 32,
	// and 32+120 = 152 wraps to -104.
	got := runMMA(t, numerics.I8, numerics.I8, 1, 1, 3, []float64{100, 100, 120}, []float64{100, 100, 1}, []float64{0})
	sameSlices(t, "int8", got, []float64{-104})
	got = runMMA(t, numerics.I32, numerics.I32, 1, 2, 3, []float64{1, -2, 3}, []float64{4, 5, 6, 7, 8, 9}, []float64{10, 20})
	sameSlices(t, "int32", got, []float64{10 + 4 - 12 + 24, 20 + 5 - 14 + 27})
}

// f64 operands with an f32 accumulator are not f32 values, so the fast path must not
// truncate them: each product is rounded from the exact f64 product.
func TestMMAF32AccWithF64Operands(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	m, n, k := 5, 9, 13
	a, b, c := make([]float64, m*k), make([]float64, k*n), make([]float64, m*n)
	for _, v := range [][]float64{a, b} {
		for i := range v {
			v[i] = rng.Float64() + 1 // not representable in f32
		}
	}
	want := naiveRounded(numerics.F32, m, n, k, a, b, c)
	truncated := naiveF32(m, n, k, a, b, c)
	distinct := 0
	for i := range want {
		if want[i] != truncated[i] {
			distinct++
		}
	}
	if distinct == 0 {
		t.Fatal("inputs do not tell rounding from truncating the operands; pick others")
	}
	sameSlices(t, "f64 in, f32 acc", runMMA(t, numerics.F64, numerics.F32, m, n, k, a, b, c), want)
}

// An accumulator that is also an operand (Acc == A, K == N) must read A's old value.
func TestMMAAccAliasesOperand(t *testing.T) {
	x := tt(numerics.F32, []int{2, 2}, 1, 2, 3, 4)
	out := tensor.New(numerics.F64, []int{2, 2})
	bufs := []*tensor.Tensor{x, out}
	at := func(p int) tile.Access { return block2D(p, 2, 2, tile.C(0), tile.C(0), 2, 2, true) }
	for _, dt := range []numerics.DType{numerics.F32, numerics.F64, numerics.BF16} {
		k := kernel([]int{1}, params(bufs, 1), 1, 1,
			tile.Load{Dst: 0, At: at(0)},
			tile.MMA{Acc: 0, A: 0, B: 0, AccDType: dt},
			tile.Store{Src: 0, At: at(1)})
		if err := runTile(k, 1, bufs...); err != nil {
			t.Fatal(err)
		}
		// X + X*X = [1+7, 2+10, 3+15, 4+22]
		wantValues(t, "acc alias "+dt.String(), out, 8, 12, 18, 26)
	}
}

// The amd64 assembly and the portable Go micro-kernels compute the same bits, including
// subnormals, infinities and signed zeros.
func TestMicroKernelsMatchPortable(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	special := []float64{0, negz, inf, math.Inf(-1), 1e-40, -1e-42, 3.4e38, 1e-30}
	for trial := range 50 {
		k := 1 + rng.IntN(40)
		lda, ldb, ldc := k+rng.IntN(3), 8+rng.IntN(5), 8+rng.IntN(5)
		a32, b32, c32 := make([]float32, 3*lda+k), make([]float32, (k-1)*ldb+8), make([]float32, 3*ldc+8)
		a64, b64, c64 := make([]float64, 3*lda+k), make([]float64, (k-1)*ldb+8), make([]float64, 3*ldc+8)
		fill := func(v32 []float32, v64 []float64) {
			for i := range v32 {
				x := math.Ldexp(rng.Float64()*2-1, rng.IntN(60)-30)
				if trial%5 == 0 && rng.IntN(8) == 0 {
					x = special[rng.IntN(len(special))]
				}
				v32[i], v64[i] = float32(x), x
			}
		}
		fill(a32, a64)
		fill(b32, b64)
		fill(c32, c64)
		g32, g64 := append([]float32{}, c32...), append([]float64{}, c64...)
		kern4x8F32(k, a32, lda, b32, ldb, c32, ldc)
		kern4x8F32Go(k, a32, lda, b32, ldb, g32, ldc)
		kern4x4F64(k, a64, lda, b64, ldb, c64, ldc)
		kern4x4F64Go(k, a64, lda, b64, ldb, g64, ldc)
		for i := range c32 {
			if !sameBits(float64(c32[i]), float64(g32[i])) {
				t.Fatalf("trial %d: f32 kernel element %d = %v, portable %v", trial, i, c32[i], g32[i])
			}
			if !sameBits(c64[i], g64[i]) {
				t.Fatalf("trial %d: f64 kernel element %d = %v, portable %v", trial, i, c64[i], g64[i])
			}
		}
	}
}
