package training

import (
	"context"
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/backend"
	"github.com/tessera-qa/tessera-qa/engine/dist/mesh"
)

func pipeCfg(t *testing.T, model, meshText, schedule string, micro int) Config {
	t.Helper()
	b, err := backend.Get("cpu")
	if err != nil {
		t.Fatal(err)
	}
	opt, err := NewOptimizer("adamw", 1e-2, b)
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Model: model, Steps: 1, Seed: 1, Backend: b, Optimizer: opt, Schedule: schedule, MicroBatches: micro}
	if meshText != "" {
		ms, err := mesh.ParseMesh(meshText)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Mesh = ms
	}
	return cfg
}

func TestPipelineGradientsMatchTheUnpipelinedRun(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct{ model, mesh, sched string }{
		{"transformer-block", "pp=4", "1f1b"},
		{"transformer-block", "pp=4", "gpipe"},
		{"transformer-block", "pp=4", "interleaved"},
		{"mlp", "pp=2,dp=2", "1f1b"},
	} {
		cfg := pipeCfg(t, c.model, c.mesh, c.sched, 8)
		got, err := FirstStep(ctx, cfg)
		if err != nil {
			t.Fatalf("%+v: %v", c, err)
		}
		one := pipeCfg(t, c.model, "", "", 0)
		one.Dims = defaultDims(cfg)
		ref, err := FirstStep(ctx, one)
		if err != nil {
			t.Fatal(err)
		}
		d, err := CompareGrads(ref.Grads[0], got.Grads, 1e-5, 4e-5)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%+v: loss %v vs %v; grads max |diff| %g (%s), bitwise %v, %d elements; bubble %+v", c, got.Loss.Float64(0), ref.Loss.Float64(0), d.MaxAbs, d.Worst, d.Bitwise, d.Compared, *got.Pipeline)
		if d.Violates != "" {
			t.Errorf("%+v: %s", c, d.Violates)
		}
	}
}
