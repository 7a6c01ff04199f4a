package report_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/report"
	"github.com/tessera-qa/tessera-qa/report/store/storetest"
)

// chaosDoc is a chaos report of one scenario, as `tessera-qa chaos --json` (and the main job's
// chaos suite) writes it: the results file names the same scenario as a case.
const chaosDoc = `{"schema": 1, "kind": "tessera-chaos", "started": "2026-03-01T02:00:00Z", "machine": "ci-7",
 "scenarios": [{"scenario": "inproc/corrupt-frame", "passed": true, "violations": [], "restarts": 1, "lost_steps": 2,
  "bits_identical": true, "digest": "ab12", "wall_s": 0.5,
  "faults": [{"id": "f0", "fault": "net/corrupt", "outcome": "detected", "detected_by": "checksum",
   "time_to_detect_s": 0.01, "time_to_recover_s": 0.2}]}]}`

// IngestRun stores a run of `tessera-qa run` as one run: every verdict of its results file,
// the metrics and bench rows of its measurement files, and no second copy of a verdict.
func TestIngestRunIsOneRunWithTheMeasurements(t *testing.T) {
	dir := t.TempDir()
	chaos := filepath.Join(dir, "chaos.json")
	if err := os.WriteFile(chaos, []byte(chaosDoc), 0o644); err != nil {
		t.Fatal(err)
	}
	storetest.ForEach(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		db := openDB(t, dsn)
		res, err := db.IngestRun(ctx, "testdata/results.json", []string{chaos, "testdata/bench.json"}, report.IngestOptions{})
		if err != nil {
			t.Fatal(err)
		}
		// 2 results + 5 chaos metrics (wall, restarts, lost steps, ttd, ttr) + 2 bench rows.
		if res.Kind != "results" || res.Rows != 9 || res.Duplicate {
			t.Fatalf("ingest %+v", res)
		}
		ov, _ := db.Overview(ctx)
		if ov.Runs != 1 || ov.Results != 2 || len(ov.Suites) != 1 {
			t.Fatalf("one run with the results file's 2 results and its one suite, got %d runs, %d results, suites %+v", ov.Runs, ov.Results, ov.Suites)
		}
		secs, err := db.Metrics(ctx, "chaos")
		if err != nil || len(secs) != 1 || secs[0].Name != "inproc/corrupt-frame" || len(secs[0].Rows) != 5 {
			t.Fatalf("chaos metrics: %+v %v", secs, err)
		}
		idx, err := db.SeriesIndex(ctx)
		if err != nil || len(idx) != 2 {
			t.Fatalf("bench series: %+v %v", idx, err)
		}
		again, err := db.IngestRun(ctx, "testdata/results.json", []string{chaos, "testdata/bench.json"}, report.IngestOptions{})
		if err != nil || !again.Duplicate || again.RunID != res.RunID {
			t.Fatalf("the same run again: %+v %v", again, err)
		}
		// A broken measurement file refuses the whole run; a measurement file is not a results file.
		bad := filepath.Join(t.TempDir(), "stress.json")
		os.WriteFile(bad, []byte(`{"schema": 1, "kind": "tessera-stress", "mode": ""}`), 0o644)
		if _, err := db.IngestRun(ctx, "testdata/results.json", []string{bad}, report.IngestOptions{Override: report.Meta{Branch: "x"}}); errs.CodeOf(err) != errs.Input {
			t.Fatalf("bad measurement file: %v", err)
		}
		if _, err := db.IngestRun(ctx, chaos, nil, report.IngestOptions{}); errs.CodeOf(err) != errs.Input {
			t.Fatalf("a chaos report as the results file: %v", err)
		}
		if ov, _ := db.Overview(ctx); ov.Runs != 1 {
			t.Fatalf("refused runs were stored: %d runs", ov.Runs)
		}
	})
}
