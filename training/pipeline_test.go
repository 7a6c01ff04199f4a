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

// A pipelined run (dp=2,pp=2) stopped after a checkpoint and resumed ends with the uninterrupted
// run's digest and losses: each rank's checkpoint holds its stages' parameters and optimizer.
func TestPipelineResumesFromItsCheckpointsBitForBit(t *testing.T) {
	ctx := context.Background()
	whole := pipeCfg(t, "transformer-block", "dp=2,pp=2", "1f1b", 4)
	whole.Steps = 6
	full, err := Inproc(ctx, whole, 4)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	first := pipeCfg(t, "transformer-block", "dp=2,pp=2", "1f1b", 4)
	first.Steps, first.CheckpointDir, first.CheckpointEvery = 3, dir, 3
	if _, err := Inproc(ctx, first, 4); err != nil {
		t.Fatal(err)
	}
	rest := pipeCfg(t, "transformer-block", "dp=2,pp=2", "1f1b", 4)
	rest.Steps, rest.CheckpointDir, rest.CheckpointEvery, rest.Resume = 6, dir, 3, true
	res, err := Inproc(ctx, rest, 4)
	if err != nil {
		t.Fatal(err)
	}
	if res.StartStep != 3 || len(res.Losses) != 3 {
		t.Fatalf("resumed at %d with %d losses", res.StartStep, len(res.Losses))
	}
	for i, l := range res.Losses {
		if l.Bits != full.Losses[3+i].Bits {
			t.Errorf("step %d: %s, uninterrupted %s", l.Step, l.Bits, full.Losses[3+i].Bits)
		}
	}
	if res.Digest != full.Digest {
		t.Errorf("digest %s, uninterrupted %s", res.Digest, full.Digest)
	}
	// A pipeline's checkpoint is not a data-parallel run's: another mesh is refused.
	other := pipeCfg(t, "transformer-block", "dp=4", "", 0)
	other.Mesh = nil
	other.Steps, other.CheckpointDir, other.Resume = 6, dir, true
	if _, err := Inproc(ctx, other, 4); err == nil {
		t.Errorf("a dp=4 run resumed from the pipeline's checkpoint")
	}
}

// With dp, each stage's gradients are averaged over dp as soon as its last backward ran, while
// the rest of the rank's list runs (interleaved: chunk 1's stages finish before chunk 0's); the
// bits are those of averaging everything after the step.
func TestOverlappedGradientBucketsHaveTheSequentialBits(t *testing.T) {
	ctx := context.Background()
	run := func(noOverlap bool) *Result {
		c := pipeCfg(t, "transformer-block", "dp=2,pp=2", "interleaved", 4)
		c.Steps, c.NoOverlap = 3, noOverlap
		r, err := Inproc(ctx, c, 4)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	over, seq := run(false), run(true)
	if over.Digest != seq.Digest {
		t.Errorf("overlapped digest %s, sequential %s", over.Digest, seq.Digest)
	}
	for i := range seq.Losses {
		if over.Losses[i].Bits != seq.Losses[i].Bits {
			t.Errorf("step %d: %s vs %s", i+1, over.Losses[i].Bits, seq.Losses[i].Bits)
		}
	}
	if over.Pipeline.OverlappedBuckets < 1 || seq.Pipeline.OverlappedBuckets != 0 {
		t.Errorf("overlapped buckets: %d with overlap, %d without", over.Pipeline.OverlappedBuckets, seq.Pipeline.OverlappedBuckets)
	}
}
