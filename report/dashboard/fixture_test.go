package dashboard

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tessera-qa/tessera-qa/harness"
	"github.com/tessera-qa/tessera-qa/report"
	"github.com/tessera-qa/tessera-qa/report/store"
	"github.com/tessera-qa/tessera-qa/report/synth"
)

// Hostile strings planted in the fixture store: each would run script, break out of an
// attribute or a <title>/<textarea> if a page printed it unescaped.
const (
	hostileBench  = `matmul<script>alert("bench")</script>`
	hostileDevice = `cuda/"sm_90'><b onmouseover=alert(1)>`
	hostileCase   = `<img src=x onerror=alert('case')>/f32`
	hostileSpec   = `</title></textarea><script>alert('spec')</script>`
	hostileLog    = `panic: <script>document.location="http://evil"</script> & "quotes" 'too'`
	hostileChaos  = `kill-rank <svg onload=alert(2)>`
	hostileMetric = `recovery_s"><script>alert(3)</script>`
)

// hostileMarkers must never appear verbatim in a rendered page.
var hostileMarkers = []string{"<script>", "<img src=x", "<b onmouseover", "<svg onload", `"><script`, "</textarea><script"}

type fixture struct {
	dsn  string
	plan synth.Plan
}

var shared struct {
	once sync.Once
	dir  string
	f    *fixture
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	for _, d := range []string{shared.dir, big.dir} {
		if d != "" {
			os.RemoveAll(d)
		}
	}
	os.Exit(code)
}

// sharedFixture is one SQLite store for the whole package: the synthetic history of
// report/synth (a 25% slowdown, a 3%-noise series, a changed digest, a flaky spec)
// plus runs whose names and logs are hostile markup, chaos metrics, and the stress and
// partitions reports of metrics_test.go.
func sharedFixture(t testing.TB) *fixture {
	t.Helper()
	shared.once.Do(func() {
		shared.dir, shared.err = os.MkdirTemp("", "dashboard-test-")
		if shared.err != nil {
			return
		}
		shared.f, shared.err = buildFixture(filepath.Join(shared.dir, "results.db"))
	})
	if shared.err != nil {
		t.Fatalf("fixture: %v", shared.err)
	}
	return shared.f
}

func buildFixture(dsn string) (*fixture, error) {
	ctx := context.Background()
	db, err := report.Open(ctx, dsn, report.Config{})
	if err != nil {
		return nil, err
	}
	defer db.Close()
	plan, err := synth.Write(ctx, db, synth.Options{Seed: 7})
	if err != nil {
		return nil, err
	}
	if err := writeHostile(ctx, db); err != nil {
		return nil, err
	}
	if err := writeStressAndPartitions(ctx, db); err != nil {
		return nil, err
	}
	return &fixture{dsn: dsn, plan: plan}, nil
}

// writeHostile ingests, before the synthetic history's first night, a bench series, a case,
// a flaky Ginkgo spec and a chaos scenario whose names and failure text are markup.
func writeHostile(ctx context.Context, db *report.DB) error {
	at := time.Date(2025, 12, 20, 2, 0, 0, 0, time.UTC)
	meta := func(commit, dc string, t time.Time) report.IngestOptions {
		return report.IngestOptions{Override: report.Meta{Commit: commit, Branch: "evil<b>branch", Event: "pr",
			Machine: `m"1`, DeviceClass: dc, Time: t}}
	}
	ingest := func(name string, v any, o report.IngestOptions) error {
		data, err := json.Marshal(v)
		if err != nil {
			return err
		}
		_, err = db.IngestBytes(ctx, name, data, o)
		return err
	}
	for r := 0; r < 4; r++ {
		b := report.BenchReport{Schema: report.BenchSchema, Kind: report.BenchKind, Started: at,
			Rows: []report.BenchRow{{Op: hostileBench, DType: "f16", Shape: []int{64, 64}, Device: hostileDevice,
				EngineMS: 1 + float64(r)/100, RefMS: 1, Ratio: 1 + float64(r)/100, SamplesMS: []float64{1, 1.01, 0.99}}}}
		if err := ingest(fmt.Sprintf("evil/bench%d.json", r), b, meta("badc0de", "cuda/sm_90", at.Add(time.Duration(r)*time.Hour))); err != nil {
			return err
		}
	}
	env := harness.Env{EngineVersion: "0.1.0", Commit: "badc0de", OS: "linux", Arch: "amd64", Backend: "cpu",
		Device: "cpu", DeviceClass: "cpu/amd64", Determinism: harness.DeterminismBitwise}
	res := []harness.Result{{Schema: harness.ResultSchema, Suite: "golden", Case: hostileCase, Backend: "cpu", Device: "cpu",
		DeviceClass: "cpu/amd64", Verdict: harness.VerdictPass, Outputs: []harness.OutputResult{}, Digest: strings.Repeat("ab", 32), Env: env}}
	if err := ingest("evil/results.json", res, meta("badc0de", "cpu/amd64", at)); err != nil {
		return err
	}
	for i, state := range []string{"failed", "passed"} {
		spec := map[string]any{"ContainerHierarchyTexts": []string{}, "LeafNodeType": "It", "LeafNodeText": hostileSpec,
			"State": state, "RunTime": 1000000, "NumAttempts": 1, "Failure": map[string]any{"Message": hostileLog}}
		rep := []map[string]any{{"SuitePath": "/src/suites/evil", "SuiteDescription": "Evil <i>Suite</i>", "SuiteSucceeded": state == "passed",
			"StartTime": at, "SpecReports": []any{spec}}}
		if err := ingest(fmt.Sprintf("evil/ginkgo%d.json", i), rep, meta("badc0de", "cpu/amd64", at.Add(time.Duration(i)*time.Minute))); err != nil {
			return err
		}
	}
	// Chaos metrics have no ingest format yet (a later issue adds one): write them as a run.
	for r := 0; r < 6; r++ {
		verdict := "pass"
		if r == 4 {
			verdict = "fail"
		}
		b := &store.Batch{
			Run: store.RunRow{Kind: "chaos", Source: fmt.Sprintf("chaos%d.json", r), ContentSHA: fmt.Sprintf("chaos-%d", r),
				Commit: "c4a05", Branch: "main", Event: "nightly", Machine: "cluster-1", DeviceClass: "cuda/sm_90", Env: "{}",
				Started: at.Add(time.Duration(r) * 24 * time.Hour), Ingested: at},
			Metrics: []store.MetricRow{
				{Kind: "chaos", Name: hostileChaos, Metric: hostileMetric, Unit: "s", Value: 2 + float64(r%3), Verdict: verdict, Note: hostileLog},
				{Kind: "chaos", Name: hostileChaos, Metric: "lost_steps", Unit: "steps", Value: float64(r % 2), Verdict: verdict},
			},
		}
		if _, err := db.Store().Ingest(ctx, b, nil); err != nil {
			return err
		}
	}
	return nil
}

// openSite opens the fixture store read-only, as the dashboard does.
func openSite(t testing.TB) (*Site, *fixture) {
	t.Helper()
	f := sharedFixture(t)
	db, err := report.OpenReadOnly(context.Background(), f.dsn, report.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	s, err := New(db)
	if err != nil {
		t.Fatal(err)
	}
	return s, f
}

func render(t testing.TB, s *Site, page string) string {
	t.Helper()
	var buf bytes.Buffer
	if err := s.Render(context.Background(), &buf, page); err != nil {
		t.Fatalf("render %s: %v", page, err)
	}
	return buf.String()
}
