package dashboard

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tessera-qa/tessera-qa/report"
)

// The node page shows, per host and device, the last verdict of every check, the history of
// the row-remap counts and the SDC scans: a healthy then a remap-pending run of one H100, and
// a planted SDC on cpu:1.
func TestNodePage(t *testing.T) {
	ctx := context.Background()
	dsn := filepath.Join(t.TempDir(), "results.db")
	db, err := report.Open(ctx, dsn, report.Config{})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"h100-healthy.json", "h100-row-remap-pending.json", "cpu-sdc-planted.json"} {
		if _, err := db.IngestFile(ctx, filepath.Join("..", "parse", "testdata", "doctor", f), report.IngestOptions{Override: report.Meta{Commit: "c0ffee", Branch: "main"}}); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
	ro, err := report.OpenReadOnly(ctx, dsn, report.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	s, err := New(ro)
	if err != nil {
		t.Fatal(err)
	}
	page := render(t, s, PageNodes)
	gpu := rowOf(page, "data-device", "vm gpu:0")
	if gpu == "" {
		t.Fatalf("no gpu:0 section:\n%s", page)
	}
	for _, want := range []string{`data-worst="fail"`} {
		if !strings.Contains(gpu, want) {
			t.Errorf("gpu:0 section lacks %q: %s", want, gpu)
		}
	}
	for _, want := range []string{"a row remap is pending", `data-check="nvml/remapped-rows"`, `data-group="remap"`, "nvml/remapped-rows pending", `data-device="vm cpu:1"`, "E_SDC: device cpu:1", `aria-current="page"`} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	if cpu0 := rowOf(page, "data-device", "vm cpu:0"); !strings.Contains(cpu0, `data-worst="pass"`) {
		t.Errorf("the clean cpu:0: %s", cpu0)
	}
}
