package dashboard

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tessera-qa/tessera-qa/report"
	"github.com/tessera-qa/tessera-qa/report/parse"
)

// A profiled series whose k0 doubled: its series page shows the per-kernel diff, k0 first
// with +100% and its grid change, k1 unchanged.
func TestSeriesPageShowsTheKernelDiff(t *testing.T) {
	ctx := context.Background()
	dsn := filepath.Join(t.TempDir(), "r.db")
	db, err := report.Open(ctx, dsn, report.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	key := report.SeriesKey{Benchmark: "profile/mlp", Device: "cpu/amd64", DType: "mixed", Shape: "2"}
	t0 := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	for i := range 7 {
		k0, grid := 1.0, []int{1, 1}
		if i == 6 {
			k0, grid = 2, []int{2, 1}
		}
		var samples []float64
		for j := range 8 {
			samples = append(samples, (k0+2)*(1+0.001*float64(j%3)))
		}
		row := parse.BenchRow{Op: key.Benchmark, DType: key.DType, Shape: []int{2}, Device: key.Device, EngineMS: samples[0], SamplesMS: samples,
			Kernels: []parse.KernelPoint{{Kernel: "k0", Label: "MatMul[4x16x8]", MedianMS: k0, Grid: grid, Block: []int{1}},
				{Kernel: "k1", Label: "Softmax[4x4]", MedianMS: 2, Grid: []int{1}, Block: []int{1}}}}
		data, _ := json.Marshal(parse.BenchReport{Schema: 1, Kind: parse.BenchKind, Rows: []parse.BenchRow{row}})
		if _, err := db.IngestBytes(ctx, fmt.Sprintf("p%d.json", i), data, report.IngestOptions{
			Override: report.Meta{Commit: fmt.Sprintf("c%d", i), Branch: "main", Time: t0.Add(time.Duration(i) * time.Hour)}}); err != nil {
			t.Fatal(err)
		}
	}
	s, err := New(db)
	if err != nil {
		t.Fatal(err)
	}
	page := render(t, s, seriesPage(key.ID()))
	i0, i1 := strings.Index(page, `<tr class="kernel" data-kernel="k0">`), strings.Index(page, `<tr class="kernel" data-kernel="k1">`)
	if i0 < 0 || i1 < i0 {
		t.Fatalf("series page: kernel rows k0 at %d, k1 at %d (want k0 first)", i0, i1)
	}
	k0row, k1row := page[i0:i0+strings.Index(page[i0:], "</tr>")], page[i1:i1+strings.Index(page[i1:], "</tr>")]
	if !strings.Contains(k0row, "MatMul[4x16x8]") || !strings.Contains(k0row, "&#43;100") || !strings.Contains(k0row, "grid") {
		t.Errorf("k0 row %q", k0row)
	}
	if !strings.Contains(k1row, "unchanged") {
		t.Errorf("k1 row %q", k1row)
	}
}
