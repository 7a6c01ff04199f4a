package training

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
		one := oneRank(t, model, 8)
		for _, dp := range []string{"dp=2", "dp=4"} {
			cfg, world := meshCfg(t, model, dp, 8)
			r, err := Inproc(ctx, cfg, world)
			if err != nil {
				t.Fatalf("%s %s: %v", model, dp, err)
			}
			if r.World != world || len(r.Losses) != 8 {
				t.Fatalf("%s %s: %+v", model, dp, r)
			}
			closeToOneRank(t, model+" "+dp, r, one)
		}
	}
}

// oneRank trains model for steps on one rank with meshCfg's settings.
func oneRank(t *testing.T, model string, steps int) *Result {
	t.Helper()
	cfg, _ := meshCfg(t, model, "", steps)
	r, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// closeToOneRank holds every loss of a parallel run to one rank's within 1e-4 relative: the
// same function of the same data and parameters, with a few sums in another order.
func closeToOneRank(t *testing.T, what string, r, one *Result) {
	t.Helper()
	for i := range r.Losses {
		if rel := math.Abs(r.Losses[i].Value-one.Losses[i].Value) / one.Losses[i].Value; rel > 1e-4 {
			t.Errorf("%s step %d: loss %v, one rank %v", what, i+1, r.Losses[i].Value, one.Losses[i].Value)
		}
	}
}
