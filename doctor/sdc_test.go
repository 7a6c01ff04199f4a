package doctor

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/backend/cpu"
	"github.com/tessera-qa/tessera-qa/golden"
)

func matmulSpecs() []golden.Spec {
	var out []golden.Spec
	for _, s := range golden.Catalogue() {
		if s.Op == "matmul" {
			out = append(out, s)
		}
	}
	return out
}

// A clean scan of two CPU devices passes on every pinned case.
func TestSDCScanCleanPasses(t *testing.T) {
	start := time.Now()
	cs := ScanSDC(context.Background(), []Target{{"cpu:0", &cpu.Backend{}}, {"cpu:1", &cpu.Backend{ID: 1}}}, SDCOptions{Specs: matmulSpecs()})
	for _, c := range cs {
		if c.Verdict != Pass && c.Verdict != Skipped {
			t.Errorf("%s %s: %s %s", c.Device, c.Name, c.Verdict, c.Reason)
		}
		t.Logf("%s: %s %s (%.2fs)", c.Device, c.Verdict, c.Reason, c.Seconds)
	}
	t.Logf("%d matmul specs in %v", len(matmulSpecs()), time.Since(start))
	_ = strings.Contains
}
