package training

import (
	"context"
	"strings"
	"testing"

	"github.com/tessera-qa/tessera-qa/profiling"
)

// Profiling a dp=2,tp=2 run keeps every loss's bits and the final digest, and leaves one
// record per rank whose timeline has kernels and collectives (op, bytes, peers, mode).
func TestProfiledMeshRunKeepsBitsAndRecordsRanks(t *testing.T) {
	ctx := context.Background()
	cfg, world := meshCfg(t, "mlp", "dp=2,tp=2", 3)
	plain, err := Inproc(ctx, cfg, world)
	if err != nil {
		t.Fatal(err)
	}
	cfg.ProfileDir = t.TempDir()
	prof, err := Inproc(ctx, cfg, world)
	if err != nil {
		t.Fatal(err)
	}
	if prof.Digest != plain.Digest {
		t.Fatalf("digest %s profiled, %s plain", prof.Digest, plain.Digest)
	}
	for i := range plain.Losses {
		if prof.Losses[i].Bits != plain.Losses[i].Bits {
			t.Errorf("step %d: loss bits %s profiled, %s plain", i+1, prof.Losses[i].Bits, plain.Losses[i].Bits)
		}
	}
	ranks, _, err := profiling.LoadRanks(cfg.ProfileDir)
	if err != nil {
		t.Fatal(err)
	}
	if len(ranks) != world {
		t.Fatalf("%d rank records, want %d", len(ranks), world)
	}
	for _, r := range ranks {
		var comp, comm int
		for _, s := range r.Spans {
			switch s.Kind {
			case profiling.SpanCompute:
				comp++
			case profiling.SpanComm:
				comm++
				if p := s.Args["peers"].(int); p < 1 || p > 3 || s.Args["mode"] != "deterministic" || s.Args["bytes"].(int64) <= 0 || !strings.HasPrefix(s.Name, "all_") {
					t.Errorf("rank %d collective %s: args %v", r.Rank, s.Name, s.Args)
				}
			}
		}
		if comp == 0 || comm == 0 || r.Step <= 0 {
			t.Errorf("rank %d: %d compute and %d comm spans, step %v", r.Rank, comp, comm, r.Step)
		}
	}
}
