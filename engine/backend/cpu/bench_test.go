package cpu

import (
	"math/rand/v2"
	"testing"
	"time"

	"gonum.org/v1/gonum/mat"

	"github.com/tessera-qa/tessera-qa/engine/compiler"
	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
)

// BenchmarkMatmul1024 compares this backend's f32 matmul (compiled by engine/compiler) with
// gonum's float64 mat.Dense.Mul on the same sizes and machine. The "interleaved" case
// alternates the two within each iteration, so load from other processes hits both alike, and
// reports gonum-time / cpu-time (above 1: the backend is faster).
func BenchmarkMatmul1024(b *testing.B) {
	const n = 1024
	bld := graph.NewBuilder("matmul1024")
	bld.Output(bld.Op("matmul", nil, bld.Input("a", numerics.F32, n, n), bld.Input("b", numerics.F32, n, n)))
	g, err := bld.Build()
	if err != nil {
		b.Fatal(err)
	}
	p, err := compiler.Compile(g, compiler.Options{})
	if err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	feed := map[string]*tensor.Tensor{"a": randTensor(rng, numerics.F32, n, n), "b": randTensor(rng, numerics.F32, n, n)}
	x, y := mat.NewDense(n, n, feed["a"].Float64s()), mat.NewDense(n, n, feed["b"].Float64s())
	var z mat.Dense
	be := &Backend{}
	runCPU := func(b *testing.B) {
		if _, err := be.Run(p, feed); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("cpu-f32", func(b *testing.B) {
		for b.Loop() {
			runCPU(b)
		}
	})
	b.Run("gonum-f64", func(b *testing.B) {
		for b.Loop() {
			z.Mul(x, y)
		}
	})
	b.Run("interleaved", func(b *testing.B) {
		var tc, tg time.Duration
		for b.Loop() {
			t0 := time.Now()
			runCPU(b)
			t1 := time.Now()
			z.Mul(x, y)
			tc, tg = tc+t1.Sub(t0), tg+time.Since(t1)
		}
		b.ReportMetric(tc.Seconds()*1e3/float64(b.N), "cpu-ms/op")
		b.ReportMetric(tg.Seconds()*1e3/float64(b.N), "gonum-ms/op")
		b.ReportMetric(tg.Seconds()/tc.Seconds(), "gonum/cpu")
	})
}
