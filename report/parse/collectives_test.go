package parse_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/tessera-qa/tessera-qa/collectives"
	"github.com/tessera-qa/tessera-qa/engine/dist"
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/harness"
	"github.com/tessera-qa/tessera-qa/report/parse"
)

// collectivesDoc is a real report of the collectives package: 2 ranks, every op at one size
// in deterministic mode, exact-mode all_reduce.
func collectivesDoc(t *testing.T) collectives.Report {
	t.Helper()
	rep := collectives.Report{Schema: collectives.ReportSchema, Kind: collectives.ReportKind, DeviceClass: "cpu/amd64", Seed: 3, Machine: "m1"}
	m := collectives.Matrix{Ops: collectives.Ops, RedOps: []dist.RedOp{dist.Sum}, DTypes: []numerics.DType{numerics.F32}, Sizes: []int64{256}}
	for _, mode := range []dist.Mode{dist.Deterministic, dist.Fast} {
		rows, err := collectives.RunInproc(context.Background(), 2, collectives.Config{Cases: m.Cases(2), Mode: mode, Seed: 3, Iters: 1})
		if err != nil {
			t.Fatal(err)
		}
		rep.Rows = append(rep.Rows, rows...)
	}
	rep.Finish()
	return rep
}

func TestCollectivesReportsBecomeResultsAndBusBWMetrics(t *testing.T) {
	doc := collectivesDoc(t)
	data, _ := json.Marshal(doc)
	p, err := parse.Parse("c.json", data)
	if err != nil {
		t.Fatal(err)
	}
	if p.Kind != "collectives" || len(p.Batch.Results) != len(doc.Rows) || len(p.Batch.Metrics) != len(doc.Rows) || len(p.Batch.Bench) != 0 {
		t.Fatalf("kind %s: %d results, %d metrics, %d bench rows for %d rows", p.Kind, len(p.Batch.Results), len(p.Batch.Metrics), len(p.Batch.Bench), len(doc.Rows))
	}
	if p.Batch.Run.DeviceClass != "cpu/amd64" || p.Batch.Run.Machine != "m1" || !strings.Contains(p.Batch.Run.Env, `"seed":"3"`) {
		t.Errorf("run %+v", p.Batch.Run)
	}
	for i, r := range p.Batch.Results {
		row := doc.Rows[i]
		wantDet := harness.DeterminismBitwise
		if row.Mode == "fast" {
			wantDet = harness.DeterminismUnknown
		}
		if r.Suite != parse.CollectivesSuite || r.Verdict != harness.VerdictPass || r.Digest != row.Digest || r.Determinism != wantDet ||
			!strings.HasSuffix(r.Case, "/w2/inproc/"+row.Mode) {
			t.Errorf("result %+v for row %+v", r, row)
		}
		m := p.Batch.Metrics[i]
		op, dt, red, tr, mode, w, ok := parse.SplitCollectivesSeries(m.Name)
		size, ok2 := parse.BusBWSize(m.Metric)
		if !ok || !ok2 || op != row.Op || dt != row.DType || red != row.RedOp || tr != "inproc" || mode != row.Mode || w != 2 ||
			size != row.Bytes || m.Value != row.BusBWGBs || m.Kind != parse.CollectivesMetric || m.Unit != "GB/s" {
			t.Errorf("metric %+v for row %+v", m, row)
		}
	}
	if len(p.Batch.Suites) != 1 || p.Batch.Suites[0].Pass != len(doc.Rows) {
		t.Errorf("suites %+v", p.Batch.Suites)
	}

	// A failing row fails its result; gloo's side becomes bench ratios.
	doc.Rows[0].OK, doc.Rows[0].Wrong, doc.Rows[0].Note = false, 3, "3 wrong elements"
	doc.Rows[1].GlooTimeUS, doc.Rows[1].GlooBusBWGBs = doc.Rows[1].TimeUS*2, doc.Rows[1].BusBWGBs/2
	data, _ = json.Marshal(doc)
	if p, err = parse.Parse("c.json", data); err != nil {
		t.Fatal(err)
	}
	if r := p.Batch.Results[0]; r.Verdict != harness.VerdictFail || r.Reason != "3 wrong elements" {
		t.Errorf("failing row: %+v", r)
	}
	// Two series: out of place, and in place (like with like: gloo's calls are in place).
	if b := p.Batch.Bench; len(b) != 2 || b[0].Unit != "ratio" || b[0].Value != 0.5 || !strings.HasPrefix(b[0].Key.Benchmark, "collectives/") ||
		b[1].Key.Benchmark != b[0].Key.Benchmark+"/in-place" || b[1].Value != doc.Rows[1].TimeUSIP/doc.Rows[1].GlooTimeUS || b[1].Key.Shape != b[0].Key.Shape {
		t.Errorf("gloo bench rows %+v", p.Batch.Bench)
	}

	// Bare rows are accepted too.
	rows, _ := json.Marshal(doc.Rows)
	if p, err = parse.Parse("rows.json", rows); err != nil || p.Kind != "collectives" || len(p.Batch.Results) != len(doc.Rows) {
		t.Fatalf("bare rows: %v", err)
	}
}

func TestBadCollectivesReportsAreOneCodedLine(t *testing.T) {
	doc := collectivesDoc(t)
	for name, edit := range map[string]func(r *collectives.Report){
		"digest not hex":     func(r *collectives.Report) { r.Rows[0].Digest = "XYZ" },
		"digest missing":     func(r *collectives.Report) { r.Rows[0].Digest = "" },
		"two rows of a case": func(r *collectives.Report) { r.Rows[1] = r.Rows[0] },
		"negative wrong":     func(r *collectives.Report) { r.Rows[0].Wrong = -1 },
		"world 0":            func(r *collectives.Report) { r.Rows[0].World = 0 },
		"slash in an op":     func(r *collectives.Report) { r.Rows[0].Op = "all/reduce" },
		"control in a dtype": func(r *collectives.Report) { r.Rows[0].DType = "f32\x01" },
		"negative busbw":     func(r *collectives.Report) { r.Rows[0].BusBWGBs = -1 },
		"another schema":     func(r *collectives.Report) { r.Schema = 2 },
		"no rows":            func(r *collectives.Report) { r.Rows = nil },
		"root outside world": func(r *collectives.Report) { r.Rows[0].Root = 2 },
	} {
		d := doc
		d.Rows = append([]collectives.Row(nil), doc.Rows...)
		edit(&d)
		data, _ := json.Marshal(d)
		_, err := parse.Parse("bad.json", data)
		if c := errs.CodeOf(err); (c != errs.Input && c != errs.Parse) || strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), "bad.json") {
			t.Errorf("%s: %v", name, err)
		}
	}
}
