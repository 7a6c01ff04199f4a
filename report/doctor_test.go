package report_test

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/tessera-qa/tessera-qa/report"
	"github.com/tessera-qa/tessera-qa/report/parse"
	"github.com/tessera-qa/tessera-qa/report/store/storetest"
)

// doctor --json reports become results (suite doctor) and the node page's metrics: a healthy
// run then one with a pending row remap give gpu:0 a history of its remap count and verdicts;
// the planted SDC run's failure carries E_SDC and names cpu:1.
func TestIngestDoctorReports(t *testing.T) {
	ctx := context.Background()
	db := openDB(t, storetest.SQLite(t))
	for i, f := range []string{"h100-healthy.json", "h100-row-remap-pending.json", "cpu-sdc-planted.json"} {
		res, err := db.IngestFile(ctx, "parse/testdata/doctor/"+f, report.IngestOptions{Fallback: report.Meta{Commit: "c" + string(rune('0'+i)), Branch: "main"}})
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if res.Kind != "doctor" || res.Rows == 0 {
			t.Fatalf("%s: %+v", f, res)
		}
	}
	secs, err := db.Metrics(ctx, parse.DoctorMetric)
	if err != nil {
		t.Fatal(err)
	}
	var gpu *report.MetricSection
	for i := range secs {
		if strings.HasSuffix(secs[i].Name, " gpu:0") {
			gpu = &secs[i]
		}
	}
	if gpu == nil {
		t.Fatalf("no gpu:0 section in %d sections", len(secs))
	}
	var pending, verdicts []float64
	for _, r := range gpu.Rows {
		switch r.Metric {
		case "nvml/remapped-rows pending":
			pending = append(pending, r.Value)
		case "nvml/remapped-rows verdict":
			verdicts = append(verdicts, r.Value)
		}
	}
	if len(pending) != 2 || pending[0] != 0 || pending[1] != 1 || verdicts[0] != 0 || verdicts[1] != 2 {
		t.Errorf("remap history %v, verdicts %v; want [0 1], [0 2]", pending, verdicts)
	}
	b, _ := os.ReadFile("parse/testdata/doctor/cpu-sdc-planted.json")
	p, err := parse.Parse("planted", b)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, r := range p.Batch.Results {
		if r.Case == "cpu:1/sdc/pinned-catalogue" {
			found = r.Verdict == "fail" && r.ErrorCode == "E_SDC" && strings.Contains(r.Reason, "device cpu:1, kernel k")
		}
		if strings.HasPrefix(r.Case, "cpu:0/") && r.Verdict == "fail" {
			t.Errorf("clean device reported: %+v", r)
		}
	}
	if !found {
		t.Error("the planted SDC is not a failing E_SDC result of cpu:1")
	}
	if _, err := parse.Parse("bad", []byte(`{"format":"tessera.doctor","version":9,"checks":[]}`)); err == nil {
		t.Error("a doctor report of another version was accepted")
	}
}
