package training

import (
	"context"
	"fmt"
	"testing"
)

// TestDataParallelScale: the mlp at dp = 1, 2, 4, ..., 64 in process (goroutine ranks, one
// global batch of 64 split over them) keeps every loss within the documented 1e-4 relative of
// one rank's, and repeats its own bits. (docs/distributed.md has the sweep to dp=128.)
func TestDataParallelScale(t *testing.T) {
	ctx := context.Background()
	base, _ := meshCfg(t, "mlp", "", 3)
	base.Dims = DefaultDims("mlp")
	base.Dims.Batch = 64
	one, err := Run(ctx, base)
	if err != nil {
		t.Fatal(err)
	}
	for dp := 2; dp <= 64; dp *= 2 {
		cfg, _ := meshCfg(t, "mlp", "", 3)
		cfg.Dims = base.Dims
		r, err := Inproc(ctx, cfg, dp)
		if err != nil {
			t.Fatalf("dp=%d: %v", dp, err)
		}
		if r.World != dp || len(r.Losses) != 3 {
			t.Fatalf("dp=%d: %+v", dp, r)
		}
		closeToOneRank(t, fmt.Sprintf("mlp on dp=%d", dp), r, one)
		if dp == 64 {
			again, err := Inproc(ctx, cfg, dp)
			if err != nil {
				t.Fatal(err)
			}
			if again.Digest != r.Digest {
				t.Errorf("dp=64: digest %s then %s", r.Digest, again.Digest)
			}
		}
	}
}
