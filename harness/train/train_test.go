package train

import (
	"context"
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/backend"
	_ "github.com/tessera-qa/tessera-qa/engine/backend/all"
)

func TestQuick(t *testing.T) {
	b, _ := backend.Get("cpu")
	for _, model := range Models {
		opt, _ := NewOptimizer("adamw", 1e-2, b)
		r, err := Run(context.Background(), Config{Model: model, Steps: 20, Seed: 1, Backend: b, Optimizer: opt})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s first %v last %v digest %s", model, r.Losses[0].Value, r.Losses[len(r.Losses)-1].Value, r.Digest)
	}
}
