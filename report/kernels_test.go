package report_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tessera-qa/tessera-qa/report"
	"github.com/tessera-qa/tessera-qa/report/parse"
	"github.com/tessera-qa/tessera-qa/report/store/storetest"
)

var profKey = report.SeriesKey{Benchmark: "profile/mlp", Device: "cpu/amd64", DType: "mixed", Shape: "2"}

// profRun ingests one profiled point of profKey: two kernels at k0ms and k1ms (8 samples of
// the step, their sum, with ±0.4% noise), k0's grid given.
func profRun(t *testing.T, db *report.DB, i int, k0ms, k1ms float64, k0grid []int) {
	t.Helper()
	s := level(k0ms+k1ms, 8)
	row := report.BenchRow{Op: profKey.Benchmark, DType: profKey.DType, Shape: []int{2}, Device: profKey.Device, EngineMS: s[0], SamplesMS: s,
		Kernels: []parse.KernelPoint{
			{Kernel: "k0", Label: "MatMul[64x64x64]", MedianMS: k0ms, Grid: k0grid, Block: []int{2}, FLOPs: 524288, Bytes: 49152},
			{Kernel: "k1", Label: "Softmax[64x64]", MedianMS: k1ms, Grid: []int{8}, Block: []int{2}, FLOPs: 16640, Bytes: 32768},
		}}
	data, _ := json.Marshal(report.BenchReport{Schema: 1, Kind: report.BenchKind, Rows: []report.BenchRow{row}})
	if _, err := db.IngestBytes(context.Background(), fmt.Sprintf("prof-%d.json", i), data, report.IngestOptions{
		Override: report.Meta{Commit: fmt.Sprintf("c%03d", i), Branch: "main", Time: day0.Add(time.Duration(i) * time.Hour)}}); err != nil {
		t.Fatal(err)
	}
}

// A step that got 33% slower because k0 doubled: the gate's BLOCK line names k0, and the
// kernel diff says k0 added the time while k1 stayed, and that k0's grid changed.
func TestGateNamesTheKernelThatGotSlower(t *testing.T) {
	ctx := context.Background()
	db := openDB(t, storetest.SQLite(t))
	for i := range 6 {
		profRun(t, db, i, 1, 2, []int{1, 1})
	}
	profRun(t, db, 6, 2, 2, []int{2, 1})
	g, err := db.Gate(ctx, report.GateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var line string
	for _, r := range g.Reasons {
		if r.Level == report.GateBlock && r.Kind == "perf" {
			line = r.Text
		}
	}
	if !g.Blocked || !strings.Contains(line, "slowest-growing kernel k0 MatMul[64x64x64] 1 -> 2 ms (+100%)") || !strings.Contains(line, "grid 1x1 -> 2x1") {
		t.Fatalf("gate: blocked %v, perf line %q (reasons %v)", g.Blocked, line, g.Reasons)
	}
	ds, err := db.KernelDiff(ctx, profKey, []int64{1, 2, 3}, []int64{7})
	if err != nil {
		t.Fatal(err)
	}
	if len(ds) != 2 || ds[0].Kernel != "k0" || ds[0].Delta < 0.99 || ds[1].Kernel != "k1" || ds[1].Delta != 0 || len(ds[1].Changed) != 0 {
		t.Errorf("kernel diff %+v", ds)
	}
}

// A series without breakdowns keeps its old gate line (nothing about kernels).
func TestGateWithoutBreakdownNamesNoKernel(t *testing.T) {
	ctx := context.Background()
	db := openDB(t, storetest.SQLite(t))
	for i := range 6 {
		benchRun(t, db, i, "main", mmKey, level(1, 8)...)
	}
	benchRun(t, db, 6, "main", mmKey, level(1.5, 8)...)
	g, err := db.Gate(ctx, report.GateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range g.Reasons {
		if strings.Contains(r.Text, "kernel") {
			t.Errorf("a series without kernels names one: %s", r.Text)
		}
	}
	if !g.Blocked {
		t.Errorf("50%% slower did not block: %v", g.Reasons)
	}
}
