package optim

import (
	"math/rand/v2"
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/backend/backendtest"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
)

// benchStep times one step of o on a single 1M-element f32 param on the cpu backend, after a
// first step that compiles the program and creates the state. It reports the update's kernels.
func benchStep(b *testing.B, o Optimizer, kernels func() int) {
	be := backendtest.CPU(b)
	rng := rand.New(rand.NewPCG(1, 2))
	shape := []int{1 << 20}
	params := map[string]*tensor.Tensor{"w": randn(rng, numerics.F32, shape, 1, false)}
	grads := map[string]*tensor.Tensor{"w": randn(rng, numerics.F32, shape, 0.1, false)}
	st := NewState()
	if err := o.Step(be, params, grads, st); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(params["w"].Len() * 4))
	b.ResetTimer()
	for range b.N {
		if err := o.Step(be, params, grads, st); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(kernels()), "kernels")
}

func BenchmarkAdamWStep1MF32(b *testing.B) {
	o := DefaultAdamW()
	benchStep(b, o, func() int { return programKernels(b, cacheKey(KindAdamW, o.structure(), numerics.F32, []int{1 << 20})) })
}

func BenchmarkSGDMomentumStep1MF32(b *testing.B) {
	o := SGD{LR: 0.01, Momentum: 0.9}
	benchStep(b, o, func() int {
		return programKernels(b, cacheKey(KindSGD, o.structure(false), numerics.F32, []int{1 << 20}))
	})
}

func programKernels(b *testing.B, key string) int {
	up := programs.m[key]
	if up == nil {
		b.Fatalf("no program %s", key)
	}
	return len(up.prog.Kernels)
}
