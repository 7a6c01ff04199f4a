package doctor

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/compiler/ptx/ptxas"
)

// The device memory test's kernels assemble with NVIDIA's ptxas (where CI installed it), so a
// GPU run does not meet a PTX syntax error first.
func TestMemtestPTXAssembles(t *testing.T) {
	if os.Getenv("TESSERA_PTXAS") == "" {
		if _, err := os.Stat("/opt/tessera-ptxas/ptxas"); err == nil {
			t.Setenv("TESSERA_PTXAS", "/opt/tessera-ptxas/ptxas")
		}
	}
	tool, err := ptxas.Find()
	if err != nil {
		t.Skipf("no ptxas: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := tool.Assemble(ctx, memtestPTX, "memtest")
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, f := range res.Functions {
		names[f.Name] = true
	}
	if !names["memtest_write"] || !names["memtest_check"] {
		t.Fatalf("functions %+v", res.Functions)
	}
}
