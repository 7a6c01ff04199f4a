package train

import (
	"context"
	"math"
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/backend"
	_ "github.com/tessera-qa/tessera-qa/engine/backend/all"
)

// Each model learns its task in 20 steps: the loss falls by at least a third.
func TestEveryModelLearns(t *testing.T) {
	b, err := backend.Get("cpu")
	if err != nil {
		t.Fatal(err)
	}
	for _, model := range Models {
		opt, err := NewOptimizer("adamw", 1e-2, b)
		if err != nil {
			t.Fatal(err)
		}
		r, err := Run(context.Background(), Config{Model: model, Steps: 20, Seed: 1, Backend: b, Optimizer: opt})
		if err != nil {
			t.Fatal(err)
		}
		first, last := r.Losses[0].Value, r.Losses[len(r.Losses)-1].Value
		if !(last < first*2/3) || len(r.Digest) != 64 {
			t.Errorf("%s: loss %v -> %v, digest %q", model, first, last, r.Digest)
		}
	}
}

// Data-parallel ranks train like one rank on the whole batch: each rank's block of the global
// batch gives it a mean loss and gradients, and their average over equal blocks is the whole
// batch's. Only the order of a few sums differs, so the losses agree to 1e-4, not to the bit.
// Self-consistency (same bits twice, across transports) cannot see a wrong average; this can.
func TestDataParallelTrainsAsOneRank(t *testing.T) {
	ctx := context.Background()
	for _, model := range Models {
		cfg1, _ := meshCfg(t, model, "", 8)
		one, err := Run(ctx, cfg1)
		if err != nil {
			t.Fatal(err)
		}
		for _, dp := range []string{"dp=2", "dp=4"} {
			cfg, world := meshCfg(t, model, dp, 8)
			r, err := Inproc(ctx, cfg, world)
			if err != nil {
				t.Fatalf("%s %s: %v", model, dp, err)
			}
			if r.World != world || len(r.Losses) != 8 {
				t.Fatalf("%s %s: %+v", model, dp, r)
			}
			for i := range r.Losses {
				rel := math.Abs(r.Losses[i].Value-one.Losses[i].Value) / one.Losses[i].Value
				if rel > 1e-4 {
					t.Errorf("%s %s step %d: loss %v, one rank %v", model, dp, i+1, r.Losses[i].Value, one.Losses[i].Value)
				}
			}
		}
	}
}
