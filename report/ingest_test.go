package report_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/harness"
	"github.com/tessera-qa/tessera-qa/report"
	"github.com/tessera-qa/tessera-qa/report/store/storetest"
)

func TestIngestResultsFile(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		db := openDB(t, dsn)
		res, err := db.IngestFile(ctx, "testdata/results.json", report.IngestOptions{
			Override: report.Meta{Branch: "main", Event: "nightly"},
			Fallback: report.Meta{Commit: "from-ci", Machine: "from-ci"}})
		if err != nil {
			t.Fatal(err)
		}
		if res.Kind != "results" || res.Rows != 2 || res.Duplicate {
			t.Fatalf("ingest result %+v", res)
		}
		runs, _ := db.Runs(ctx, 0)
		r := runs[0]
		// The file's env wins over the fallback; the override wins over the file.
		if r.Commit != "be0194b" || r.Machine != "ci-7" || r.Branch != "main" || r.Event != "nightly" || r.DeviceClass != "cpu/amd64" {
			t.Fatalf("run meta %+v", r)
		}
		ov, _ := db.Overview(ctx)
		if len(ov.Suites) != 1 || ov.Suites[0].Pass != 1 || ov.Suites[0].Fail != 1 || len(ov.Suites[0].Failing) != 1 ||
			!strings.HasPrefix(ov.Suites[0].Failing[0], "matmul/f32/4x8x16: output %y") {
			t.Fatalf("suite status %+v", ov.Suites)
		}
		again, err := db.IngestFile(ctx, "testdata/results.json", report.IngestOptions{
			Override: report.Meta{Branch: "main", Event: "nightly"}, Fallback: report.Meta{Commit: "elsewhere"}})
		if err != nil || !again.Duplicate || again.RunID != res.RunID {
			t.Fatalf("re-ingest: %+v %v; want a duplicate of run %d", again, err, res.RunID)
		}
		// The same bytes said to come from another branch are another run.
		other, err := db.IngestFile(ctx, "testdata/results.json", report.IngestOptions{Override: report.Meta{Branch: "pr-1"}})
		if err != nil || other.Duplicate {
			t.Fatalf("same file, other branch: %+v %v", other, err)
		}
	})
}

func TestIngestWhatTheHarnessWrites(t *testing.T) {
	// The file harness.WriteResults produces is what `tessera-qa run` leaves behind.
	path := filepath.Join(t.TempDir(), "results.json")
	env := harness.Env{Commit: "c1", DeviceClass: "cpu/amd64", Determinism: harness.DeterminismBitwise, Hostname: "h"}
	rs := []harness.Result{{Schema: harness.ResultSchema, Suite: "smoke", Case: "g/1", Backend: "cpu", DeviceClass: "cpu/amd64",
		Verdict: harness.VerdictError, ErrorCode: "E_SHAPE", Reason: "bad\x00shape", Digest: "", Env: env, Seed: 1<<64 - 1}}
	if err := harness.WriteResults(path, rs); err != nil {
		t.Fatal(err)
	}
	db := openDB(t, storetest.SQLite(t))
	if _, err := db.IngestFile(context.Background(), path, report.IngestOptions{}); err != nil {
		t.Fatalf("ingest of WriteResults output: %v", err)
	}
	fs, _ := db.Store().Failures(context.Background(), []int64{1})
	if len(fs) != 1 || fs[0].Code != "E_SHAPE" || strings.ContainsRune(fs[0].Reason, 0) {
		t.Fatalf("failure rows %+v (a NUL must not reach the store)", fs)
	}
}

func TestIngestGinkgoReport(t *testing.T) {
	ctx := context.Background()
	db := openDB(t, storetest.SQLite(t))
	res, err := db.IngestFile(ctx, "testdata/ginkgo.json", report.IngestOptions{Fallback: report.Meta{Commit: "c9", DeviceClass: "cpu/amd64"}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Kind != "ginkgo" || res.Rows != 4 {
		t.Fatalf("ingest %+v", res)
	}
	ov, _ := db.Overview(ctx)
	if len(ov.Suites) != 1 || ov.Suites[0].Suite != "Sample Suite" || ov.Suites[0].Pass != 2 || ov.Suites[0].Fail != 1 || ov.Suites[0].Skip != 1 {
		t.Fatalf("suite %+v", ov.Suites)
	}
	if !strings.Contains(ov.Suites[0].Failing[0], "outer fails <b>: Expected") {
		t.Fatalf("failing %q", ov.Suites[0].Failing)
	}
	// "flakes" passed on its second attempt: it both failed and passed on this commit.
	if len(ov.Flaky) != 1 || ov.Flaky[0].Spec != "outer flakes" || ov.Flaky[0].Kind != "spec" || ov.Flaky[0].Fails != 1 {
		t.Fatalf("flaky %+v", ov.Flaky)
	}
	runs, _ := db.Runs(ctx, 0)
	if runs[0].Time.Year() != 2026 || runs[0].Commit != "c9" {
		t.Fatalf("run %+v: want the suite's start time and the fallback commit", runs[0])
	}
}

func TestIngestBench(t *testing.T) {
	ctx := context.Background()
	db := openDB(t, storetest.SQLite(t))
	res, err := db.IngestFile(ctx, "testdata/bench.json", report.IngestOptions{})
	if err != nil || res.Kind != "bench" || res.Rows != 2 {
		t.Fatalf("ingest %+v %v", res, err)
	}
	idx, _ := db.SeriesIndex(ctx)
	if len(idx) != 2 {
		t.Fatalf("series %+v", idx)
	}
	mm, _ := db.Series(ctx, report.SeriesKey{Benchmark: "matmul", Device: "cuda/sm_90", DType: "f16", Shape: "4096x4096x4096"})
	if mm.Unit != "ratio" || len(mm.Points) != 1 || len(mm.Points[0].Samples) != 5 || mm.Points[0].Samples[0] != 1.2/1.1 ||
		mm.Points[0].Run.Commit != "abc1234" || mm.Points[0].Run.Branch != "main" {
		t.Fatalf("matmul series %+v", mm)
	}
	sm, _ := db.Series(ctx, report.SeriesKey{Benchmark: "softmax", Device: "cuda/sm_90", DType: "f32", Shape: "8192x8192"})
	if sm.Unit != "ms" || sm.Points[0].Value != 0.42 || sm.Latest.Level != report.LevelNoBaseline {
		t.Fatalf("softmax series %+v", sm)
	}
	// A bare array of rows is a bench report too.
	rows := `[{"op":"add","dtype":"f32","shape":[8],"device":"cpu/amd64","engine_ms":0.5,"ref_ms":0.25}]`
	res, err = db.IngestBytes(ctx, "rows.json", []byte(rows), report.IngestOptions{})
	if err != nil || res.Kind != "bench" {
		t.Fatalf("bare rows: %+v %v", res, err)
	}
}

// hostile are reports that must be refused, with the code expected.
var hostile = []struct {
	name, data string
	code       errs.Code
}{
	{"empty", ``, errs.Parse},
	{"not json", `hello`, errs.Parse},
	{"truncated", `[{"schema":1,"suite":"s","case":"c","verdict":"pass"`, errs.Parse},
	{"trailing garbage", `[{"op":"a","engine_ms":1,"dtype":"f32","device":"d"}] xx`, errs.Parse},
	{"empty array", `[]`, errs.Input},
	{"unknown object", `{"hello":1}`, errs.Parse},
	{"unknown array", `[{"hello":1}]`, errs.Parse},
	{"wrong type", `[{"schema":"one","suite":"s","case":"c","verdict":"pass"}]`, errs.Parse},
	{"newer schema", `[{"schema":99,"suite":"s","case":"c","device_class":"d","verdict":"pass"}]`, errs.Input},
	{"bad verdict", `[{"schema":1,"suite":"s","case":"c","device_class":"d","verdict":"maybe"}]`, errs.Input},
	{"missing case", `[{"schema":1,"suite":"s","device_class":"d","verdict":"pass"}]`, errs.Input},
	{"NUL in case", `[{"schema":1,"suite":"s","case":"c\u0000","device_class":"d","verdict":"pass"}]`, errs.Input},
	{"newline in suite", `[{"schema":1,"suite":"s\nx","case":"c","device_class":"d","verdict":"pass"}]`, errs.Input},
	{"huge name", `[{"schema":1,"suite":"s","case":"` + strings.Repeat("x", 5000) + `","device_class":"d","verdict":"pass"}]`, errs.Input},
	{"digest not hex", `[{"schema":1,"suite":"s","case":"c","device_class":"d","verdict":"pass","digest":"zz'; DROP TABLE runs;--"}]`, errs.Input},
	{"negative time", `[{"schema":1,"suite":"s","case":"c","device_class":"d","verdict":"pass","timing":{"total_ms":-1}}]`, errs.Input},
	{"huge number", `[{"op":"a","engine_ms":1e300,"dtype":"f32","device":"d"}]`, errs.Input},
	{"overflowing number", `[{"op":"a","engine_ms":1e999,"dtype":"f32","device":"d"}]`, errs.Parse},
	{"zero engine time", `[{"op":"a","engine_ms":0,"dtype":"f32","device":"d"}]`, errs.Input},
	{"inconsistent ratio", `[{"op":"a","engine_ms":2,"ref_ms":1,"ratio":5,"dtype":"f32","device":"d"}]`, errs.Input},
	{"negative dim", `[{"op":"a","engine_ms":1,"dtype":"f32","device":"d","shape":[-1]}]`, errs.Input},
	{"bench wrong kind", `{"schema":1,"kind":"other","rows":[{"op":"a","engine_ms":1,"dtype":"f32","device":"d"}]}`, errs.Input},
	{"bench no rows", `{"schema":1,"kind":"tessera-bench","rows":[]}`, errs.Input},
	{"ginkgo bad state", `[{"SuiteDescription":"S","SpecReports":[{"LeafNodeText":"x","State":"exploded"}]}]`, errs.Input},
	{"ginkgo no specs", `[{"SuiteDescription":"S","SpecReports":[]}]`, errs.Input},
	{"ginkgo negative runtime", `[{"SuiteDescription":"S","SpecReports":[{"LeafNodeText":"x","State":"passed","RunTime":-5}]}]`, errs.Input},
	{"deep nesting", strings.Repeat("[", 20000) + strings.Repeat("]", 20000), errs.Parse},
	{"second element wrong shape", `[{"schema":1,"suite":"s","case":"c","device_class":"d","verdict":"pass"}, 7]`, errs.Parse},
}

func TestHostileReportsChangeNothing(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		db := openDB(t, dsn)
		if _, err := db.IngestFile(ctx, "testdata/results.json", report.IngestOptions{}); err != nil {
			t.Fatal(err)
		}
		gen, _ := db.Store().Generation(ctx)
		for _, h := range hostile {
			_, err := db.IngestBytes(ctx, h.name+".json", []byte(h.data), report.IngestOptions{})
			if errs.CodeOf(err) != h.code {
				t.Errorf("%s: error %v; want code %s", h.name, err, h.code)
				continue
			}
			if msg := err.Error(); strings.Contains(msg, "\n") || !strings.Contains(msg, h.name+".json") {
				t.Errorf("%s: error %q should be one line naming the file", h.name, msg)
			}
		}
		if g, _ := db.Store().Generation(ctx); g != gen {
			t.Fatalf("store generation %s -> %s: a rejected report wrote something", gen, g)
		}
		runs, results, series, _ := db.Store().Counts(ctx)
		if runs != 1 || results != 2 || series != 0 {
			t.Fatalf("counts %d %d %d after hostile reports; want 1 2 0", runs, results, series)
		}
	})
}

func TestParseErrorsNameTheLine(t *testing.T) {
	_, err := report.Check("f.json", []byte("[\n{\"schema\": 1,\n \"case\": \"c\", \"verdict\": \"pass\",\n \"suite\": x}]"))
	if err == nil || !strings.Contains(err.Error(), "line 4") {
		t.Fatalf("error %v: want it to name line 4", err)
	}
}

func TestMetaPrecedence(t *testing.T) {
	ctx := context.Background()
	db := openDB(t, storetest.SQLite(t))
	at := time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)
	_, err := db.IngestBytes(ctx, "r.json", []byte(`[{"op":"a","engine_ms":1,"dtype":"f32","device":"cpu/amd64"}]`), report.IngestOptions{
		Override: report.Meta{Commit: "over", Env: map[string]string{"runner": "r1"}},
		Fallback: report.Meta{Commit: "fb", Branch: "fb-branch", Time: at}})
	if err != nil {
		t.Fatal(err)
	}
	runs, _ := db.Store().Runs(ctx)
	r := runs[0]
	if r.Commit != "over" || r.Branch != "fb-branch" || r.Machine != "unknown" || !r.Started.Equal(at) || r.DeviceClass != "cpu/amd64" ||
		!strings.Contains(r.Env, `"runner":"r1"`) {
		t.Fatalf("run %+v", r)
	}
	if _, err := db.IngestBytes(ctx, "r2.json", []byte(`[{"op":"b","engine_ms":1,"dtype":"f32","device":"d"}]`), report.IngestOptions{
		Override: report.Meta{Branch: "evil\nbranch"}}); errs.CodeOf(err) != errs.Input {
		t.Fatalf("control character in --branch: %v", err)
	}
}

func TestIngestMissingFile(t *testing.T) {
	db := openDB(t, storetest.SQLite(t))
	_, err := db.IngestFile(context.Background(), filepath.Join(t.TempDir(), "nope.json"), report.IngestOptions{})
	if errs.CodeOf(err) != errs.Input || !strings.Contains(err.Error(), "nope.json") {
		t.Fatalf("missing file: %v", err)
	}
	if _, err := os.Stat("testdata/ginkgo.json"); err != nil {
		t.Fatal(err)
	}
}
