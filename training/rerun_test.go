package training

import (
	"context"
	"strings"
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/backend"
	"github.com/tessera-qa/tessera-qa/engine/errs"
)

// A second fresh run into a checkpoint folder that holds a run is refused before its first
// step, naming both ways on; --resume continues it (issue 21).
func TestAFreshRunRefusesAnotherRunsCheckpointsUpFront(t *testing.T) {
	b, err := backend.Get("cpu")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cfg := func(steps int, resume bool, observed *int) Config {
		opt, err := NewOptimizer("sgd", 1e-2, b)
		if err != nil {
			t.Fatal(err)
		}
		return Config{Model: "mlp", Steps: steps, Seed: 1, Backend: b, Optimizer: opt, CheckpointDir: dir, CheckpointEvery: 2, Resume: resume,
			Observe: func(o Observation) {
				if o.Kind == "step" {
					*observed++
				}
			}}
	}
	var n int
	if _, err := Run(context.Background(), cfg(2, false, &n)); err != nil {
		t.Fatal(err)
	}
	n = 0
	_, err = Run(context.Background(), cfg(2, false, &n))
	if errs.CodeOf(err) != errs.Input || !strings.Contains(err.Error(), "--resume continues it") || !strings.Contains(err.Error(), "step-00000002") {
		t.Fatalf("fresh run into a folder with checkpoints: %v", err)
	}
	if n != 0 {
		t.Errorf("the refused run trained %d steps first", n)
	}
	r, err := Run(context.Background(), cfg(4, true, &n))
	if err != nil || r.StartStep != 2 {
		t.Fatalf("--resume: %+v %v", r, err)
	}
}
