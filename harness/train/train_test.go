package train

import (
	"context"
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
