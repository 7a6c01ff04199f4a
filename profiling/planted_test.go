//go:build failpoints

package profiling

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/backend/cpu"
	"github.com/tessera-qa/tessera-qa/engine/failpoint"
	"github.com/tessera-qa/tessera-qa/harness"
	"github.com/tessera-qa/tessera-qa/report"
)

// TestPlantedSlowdownNamesItsKernel is the second "done when", end to end: six
// baseline commits profile a step on the CPU, then the failpoint makes the first matmul
// kernel do its work twice; the profiles go through report ingest, and the gate's BLOCK line
// names that kernel (k0, MatMul[128x128x256]) as the one that added the time.
//
//	go test -tags failpoints -run Planted ./profiling
func TestPlantedSlowdownNamesItsKernel(t *testing.T) {
	ctx := context.Background()
	defer failpoint.Activate()
	g := mustGraph(t, `graph layer {
  input %x: f32[128,256]
  input %w: f32[256,128]
  input %b: f32[128]
  %h = matmul(%x, %w)
  %hb = add(%h, %b)
  %y = relu(%hb)
  output %y
}
`)
	in, err := harness.RandomInputs(g, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	// One worker: a step on one core is less at the mercy of what else this machine runs.
	b := &cpu.Backend{Workers: 1}
	db, err := report.Open(ctx, filepath.Join(t.TempDir(), "r.db"), report.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	t0 := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	for i := range 7 {
		if i == 6 {
			if err := failpoint.Activate(failpoint.CPUMatmulKernelRunsTwice); err != nil {
				t.Fatal(err)
			}
		}
		rep, err := Profile(g, in, b, Options{Reps: 15})
		if err != nil {
			t.Fatal(err)
		}
		if i == 6 && rep.Kernels[0].Points != 2*rep.Kernels[0].GridPoints {
			t.Fatalf("the fault did not double k0: %d points of %d", rep.Kernels[0].Points, rep.Kernels[0].GridPoints)
		}
		t.Logf("run %d: step %s, k0 %s %s, k1 %s %s", i, Latency(median(rep.StepUS)), rep.Kernels[0].Label, Latency(rep.Kernels[0].MedianUS),
			rep.Kernels[1].Label, Latency(rep.Kernels[1].MedianUS))
		data, _ := json.Marshal(rep.BenchDoc())
		if _, err := db.IngestBytes(ctx, fmt.Sprintf("p%d.json", i), data, report.IngestOptions{
			Override: report.Meta{Commit: fmt.Sprintf("c%d", i), Branch: "main", Time: t0.Add(time.Duration(i) * time.Hour)}}); err != nil {
			t.Fatal(err)
		}
	}
	all, _ := db.AllSeries(ctx)
	for _, s := range all {
		t.Logf("series %s: %d points, latest %+v", s.Key, len(s.Points), s.Latest)
	}
	gr, err := db.Gate(ctx, report.GateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range gr.Reasons {
		t.Log(r)
		if r.Level == report.GateBlock && r.Kind == "perf" && strings.Contains(r.Text, "slowest-growing kernel k0 MatMul[128x128x256]") {
			return
		}
	}
	t.Errorf("no BLOCK perf line names k0 MatMul[128x128x256]: blocked %v, %v", gr.Blocked, gr.Reasons)
}
