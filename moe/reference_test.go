package moe

import (
	"context"
	"math"
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/backend"
	_ "github.com/tessera-qa/tessera-qa/engine/backend/cpu"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/training"
)

func TestEngineLossAndGradientsAgainstTheReference(t *testing.T) {
	b, err := backend.Get("cpu")
	if err != nil {
		t.Fatal(err)
	}
	opt, _ := training.NewOptimizer("adamw", 1e-2, b)
	d := training.DefaultMoE
	cfg := training.Config{Model: training.MoEModel, Steps: 1, Seed: 1, Backend: b, Optimizer: opt}
	got, err := training.FirstStep(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	params := Float64s(training.MoEInit(d, numerics.F32, 1))
	x, tg := training.MoEBatch(d, numerics.F32, 1, 1, 0, 1)
	want := Loss(d, params, x.Float64s(), tg.Float64s())
	if l := got.Loss.Float64(0); math.Abs(l-want) > 1e-5*math.Abs(want) {
		t.Errorf("loss %v, reference %v", l, want)
	}
	worst := 0.0
	for _, p := range CentralDifferences(d, params, x.Float64s(), tg.Float64s(), got.Grads[0], 37, 1e-4) {
		err := math.Abs(p.Numerical - p.Engine)
		worst = math.Max(worst, err)
		if err > 2e-5+1e-3*math.Abs(p.Numerical) {
			t.Errorf("%s[%d]: engine %v, central difference %v", p.Param, p.Index, p.Engine, p.Numerical)
		}
	}
	t.Logf("loss %v (reference %v); worst gradient error %g", got.Loss.Float64(0), want, worst)
}
