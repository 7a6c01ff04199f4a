package report_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/harness"
	"github.com/tessera-qa/tessera-qa/report"
	"github.com/tessera-qa/tessera-qa/report/store"
	"github.com/tessera-qa/tessera-qa/report/store/storetest"
)

var day0 = time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC)

// benchRun ingests one run holding one row of series key with the given samples.
func benchRun(t *testing.T, db *report.DB, i int, branch string, key report.SeriesKey, samples ...float64) {
	t.Helper()
	rep := report.BenchReport{Schema: 1, Kind: report.BenchKind, Rows: []report.BenchRow{{Op: key.Benchmark, DType: key.DType,
		Shape: []int{8}, Device: key.Device, EngineMS: samples[0], SamplesMS: samples}}}
	data, _ := json.Marshal(rep)
	_, err := db.IngestBytes(context.Background(), fmt.Sprintf("b%d-%s.json", i, branch), data, report.IngestOptions{
		Override: report.Meta{Commit: fmt.Sprintf("c%03d", i), Branch: branch, Time: day0.Add(time.Duration(i) * time.Hour)}})
	if err != nil {
		t.Fatal(err)
	}
}

func level(v float64, n int) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = v * (1 + 0.002*float64(i%5-2))
	}
	return out
}

var mmKey = report.SeriesKey{Benchmark: "mm", Device: "cpu/amd64", DType: "f32", Shape: "8"}

func TestPerfLevelsAckAndReset(t *testing.T) {
	ctx := context.Background()
	db := openDB(t, storetest.SQLite(t))
	for i := 0; i < 10; i++ {
		benchRun(t, db, i, "main", mmKey, level(1, 8)...)
	}
	s, _ := db.Series(ctx, mmKey)
	if s.Latest.Level != report.LevelOK || s.Unit != "ms" {
		t.Fatalf("flat series: %+v", s.Latest)
	}
	benchRun(t, db, 10, "main", mmKey, level(1.08, 8)...) // 8%: warn
	s, _ = db.Series(ctx, mmKey)
	if s.Latest.Level != report.LevelWarn || s.Latest.BaselineRuns != 10 {
		t.Fatalf("8%% slower: %+v", s.Latest)
	}
	benchRun(t, db, 11, "main", mmKey, level(1.3, 8)...) // 30%: block
	s, _ = db.Series(ctx, mmKey)
	if s.Latest.Level != report.LevelBlock || s.Latest.Delta < 0.25 {
		t.Fatalf("30%% slower: %+v", s.Latest)
	}
	if _, err := db.AckPerf(ctx, mmKey.ID(), 0, "  ", ""); errs.CodeOf(err) != errs.Input {
		t.Fatalf("ack without a reason: %v", err)
	}
	ack, err := db.AckPerf(ctx, mmKey.ID(), 0, "accepted", "me")
	if err != nil || ack.RunID == 0 {
		t.Fatal(err)
	}
	s, _ = db.Series(ctx, mmKey)
	if s.Latest.Ack == nil || s.Latest.Ack.Reason != "accepted" || len(s.Acks) != 1 {
		t.Fatalf("acked slowdown: %+v", s.Latest)
	}
	benchRun(t, db, 12, "main", mmKey, level(1.31, 8)...) // same level: still covered
	if s, _ = db.Series(ctx, mmKey); s.Latest.Ack == nil {
		t.Fatalf("same level after the ack lost it: %+v", s.Latest)
	}
	benchRun(t, db, 13, "main", mmKey, level(1.6, 8)...) // worse again: news
	if s, _ = db.Series(ctx, mmKey); s.Latest.Ack != nil || s.Latest.Level != report.LevelBlock {
		t.Fatalf("a further slowdown stayed acknowledged: %+v", s.Latest)
	}
	// Reset the baseline at the new level: with too few runs since, no comparison.
	if _, err := db.ResetBaseline(ctx, mmKey.ID(), 0, "new normal", "me"); err != nil {
		t.Fatal(err)
	}
	s, _ = db.Series(ctx, mmKey)
	if s.Latest.Level != report.LevelNoBaseline || len(s.Resets) != 1 {
		t.Fatalf("after reset: %+v", s.Latest)
	}
	for i := 14; i < 18; i++ {
		benchRun(t, db, i, "main", mmKey, level(1.6, 8)...)
	}
	s, _ = db.Series(ctx, mmKey)
	if s.Latest.Level != report.LevelOK || s.Latest.BaselineRuns != 4 || s.BaselineFrom != 13 {
		t.Fatalf("after reset and 4 runs: %+v from %d", s.Latest, s.BaselineFrom)
	}
	// Runs on other branches are not baseline runs when the series ran on main.
	benchRun(t, db, 18, "pr-7", mmKey, level(1.0, 8)...)
	s, _ = db.Series(ctx, mmKey)
	if s.Latest.Level != report.LevelImproved || s.Latest.BaselineRuns != 5 {
		t.Fatalf("PR run against main: %+v", s.Latest)
	}
	if _, err := db.AckPerf(ctx, "nosuch", 0, "r", ""); errs.CodeOf(err) != errs.Input {
		t.Fatalf("ack of an unknown series: %v", err)
	}
	if _, err := db.AckPerf(ctx, mmKey.ID(), 99999, "r", ""); errs.CodeOf(err) != errs.Input {
		t.Fatalf("ack at an unknown run: %v", err)
	}
}

func TestThresholdsFromConfig(t *testing.T) {
	cfg, err := report.ParseConfig("c.json", []byte(`{"defaults": {"warn": 0.1},
		"benchmarks": [{"benchmark": "m*", "device": "cpu/*", "block": 0.5}, {"benchmark": "mm", "block": 0.9}]}`))
	if err != nil {
		t.Fatal(err)
	}
	th := cfg.ThresholdsFor(mmKey)
	if th.Warn != 0.1 || th.Block != 0.5 || th.Alpha != 0.05 || th.Window != 20 {
		t.Fatalf("thresholds %+v: want warn from defaults, block from the first matching rule", th)
	}
	if th := cfg.ThresholdsFor(report.SeriesKey{Benchmark: "add"}); th.Block != 0.2 || th.Warn != 0.1 {
		t.Fatalf("unmatched series %+v", th)
	}
	for _, bad := range []string{`{"defaults": {"warn": 0.3}}`, `{"defualts": {}}`, `{"benchmarks": [{"benchmark": "[", "warn": 0.1}]}`,
		`{"defaults": {"alpha": 2}}`, `{"defaults": {"min_runs": 50}}`, `{} {}`} {
		if _, err := report.ParseConfig("bad.json", []byte(bad)); err == nil {
			t.Errorf("config %s accepted", bad)
		}
	}
	// A stricter block threshold turns the 8% slowdown into a block.
	cfg, _ = report.ParseConfig("c.json", []byte(`{"benchmarks": [{"benchmark": "mm", "warn": 0.03, "block": 0.06}]}`))
	ctx := context.Background()
	dsn := storetest.SQLite(t)
	db := openDB(t, dsn)
	for i := 0; i < 6; i++ {
		benchRun(t, db, i, "main", mmKey, level(1, 8)...)
	}
	benchRun(t, db, 6, "main", mmKey, level(1.08, 8)...)
	db.Close()
	strict, err := report.Open(ctx, dsn, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer strict.Close()
	g, _ := strict.Gate(ctx, report.GateOptions{})
	if !g.Blocked || !strings.Contains(g.Reasons[0].Text, "block 6%") {
		t.Fatalf("gate with per-benchmark thresholds: %+v", g.Reasons)
	}
}

// results ingests one results file: case name -> digest, on device class cpu/amd64.
func results(t *testing.T, db *report.DB, i int, det string, digests map[string]string, verdicts ...string) {
	t.Helper()
	var rs []harness.Result
	for c, d := range digests {
		v := harness.VerdictPass
		if len(verdicts) > 0 {
			v = verdicts[0]
		}
		rs = append(rs, harness.Result{Schema: 1, Suite: "golden", Case: c, DeviceClass: "cpu/amd64", Verdict: v, Digest: d,
			Env: harness.Env{Determinism: det}, Outputs: []harness.OutputResult{}})
	}
	data, _ := json.Marshal(rs)
	if _, err := db.IngestBytes(context.Background(), fmt.Sprintf("r%d-%s.json", i, det), data, report.IngestOptions{
		Override: report.Meta{Commit: fmt.Sprintf("c%03d", i), Branch: "main", Time: day0.Add(time.Duration(i) * time.Hour)}}); err != nil {
		t.Fatal(err)
	}
}

func TestReproTracker(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		db := openDB(t, dsn)
		// Case x: aa aa bb aa cc. bb is new at run 3 (last good 2); cc is new at run 5 (last
		// good 4: aa came back, which the digests table alone cannot tell).
		seq := []string{"aa", "aa", "bb", "aa", "cc"}
		for i, d := range seq {
			results(t, db, i+1, harness.DeterminismBitwise, map[string]string{"x": d, "y": "ff"})
			results(t, db, i+1, harness.DeterminismUnknown, map[string]string{"z": fmt.Sprintf("%02x", i)})
		}
		m, err := db.ReproMatrix(ctx)
		if err != nil {
			t.Fatal(err)
		}
		byCase := map[string]report.ReproCell{}
		for _, c := range m.Cells {
			byCase[c.Key.Case] = c
		}
		x := byCase["x"]
		if x.Status != report.ReproNewDigest || len(x.Digests) != 3 || x.Digests[0].Digest != "aa" || x.Digests[0].Count != 3 {
			t.Fatalf("case x: %+v", x)
		}
		if byCase["y"].Status != report.ReproStable || byCase["z"].Status != report.ReproUntracked {
			t.Fatalf("y %s, z %s; want stable and untracked", byCase["y"].Status, byCase["z"].Status)
		}
		if len(m.Regressions) != 2 {
			t.Fatalf("regressions %+v", m.Regressions)
		}
		bb, cc := m.Regressions[0], m.Regressions[1]
		if bb.Digest != "bb" || bb.FirstBad.Commit != "c003" || bb.LastGood.Commit != "c002" || bb.Previous != "aa" {
			t.Errorf("bb: %+v", bb)
		}
		if cc.Digest != "cc" || cc.FirstBad.Commit != "c005" || cc.LastGood.Commit != "c004" {
			t.Errorf("cc: %+v", cc)
		}
		// The gate judges the latest commit: cc blocks, bb (not in the candidate) does not.
		g, _ := db.Gate(ctx, report.GateOptions{})
		if !g.Blocked || len(g.Reasons) != 1 || !strings.Contains(g.Reasons[0].Text, "new digest cc") {
			t.Fatalf("gate %+v", g.Reasons)
		}
		k := report.ReproKey{Suite: "golden", Case: "x", DeviceClass: "cpu/amd64"}
		if _, err := db.AckRepro(ctx, k, "", "two to choose from", ""); errs.CodeOf(err) != errs.Input {
			t.Fatalf("ack with two unaccepted digests and no --digest: %v", err)
		}
		if _, err := db.AckRepro(ctx, k, "c", "cc is the new tiling", "me"); err != nil {
			t.Fatal(err)
		}
		if g, _ = db.Gate(ctx, report.GateOptions{}); g.Blocked {
			t.Fatalf("gate after ack: %+v", g.Reasons)
		}
		if _, err := db.AckRepro(ctx, report.ReproKey{Suite: "golden", Case: "nope", DeviceClass: "cpu/amd64"}, "", "r", ""); errs.CodeOf(err) != errs.Input {
			t.Fatalf("ack of an unknown case: %v", err)
		}
	})
}

func TestGateFailuresAndFlaky(t *testing.T) {
	ctx := context.Background()
	db := openDB(t, storetest.SQLite(t))
	results(t, db, 1, harness.DeterminismBitwise, map[string]string{"x": "aa"})
	results(t, db, 2, harness.DeterminismBitwise, map[string]string{"x": "aa"}, harness.VerdictFail)
	g, _ := db.Gate(ctx, report.GateOptions{})
	if !g.Blocked || len(g.Reasons) != 1 || g.Reasons[0].Kind != "fail" || g.Reasons[0].Level != report.GateBlock {
		t.Fatalf("failing case: %+v", g.Reasons)
	}
	// The same commit passes in a rerun: now it is flaky, a warning.
	data, _ := json.Marshal([]harness.Result{{Schema: 1, Suite: "golden", Case: "x", DeviceClass: "cpu/amd64", Verdict: "pass",
		Digest: "aa", Env: harness.Env{Determinism: "bitwise", Hostname: "other"}, Outputs: []harness.OutputResult{}}})
	if _, err := db.IngestBytes(ctx, "rerun.json", data, report.IngestOptions{Override: report.Meta{Commit: "c002", Branch: "main",
		Time: day0.Add(3 * time.Hour)}}); err != nil {
		t.Fatal(err)
	}
	g, _ = db.Gate(ctx, report.GateOptions{})
	if g.Blocked || len(g.Reasons) != 1 || g.Reasons[0].Kind != "flaky" || len(g.Candidate) != 2 {
		t.Fatalf("flaky case: %+v, %d candidate runs", g.Reasons, len(g.Candidate))
	}
	if g, _ = db.Gate(ctx, report.GateOptions{RunIDs: []int64{1}}); g.Blocked || g.Commit != "c001" {
		t.Fatalf("gate of run 1: %+v", g)
	}
	if _, err := db.Gate(ctx, report.GateOptions{RunIDs: []int64{42}}); errs.CodeOf(err) != errs.Input {
		t.Fatalf("unknown run: %v", err)
	}
}

func TestMetricsSection(t *testing.T) {
	ctx := context.Background()
	db := openDB(t, storetest.SQLite(t))
	// No ingest format carries metrics yet (later issues add one): write through the store.
	b := &store.Batch{Run: store.RunRow{Kind: "chaos", Source: "x", ContentSHA: "m1", Commit: "c", Branch: "main", Event: "nightly",
		Machine: "m", DeviceClass: "cuda/sm_90", Env: "{}", Started: day0, Ingested: day0},
		Metrics: []store.MetricRow{{Kind: "chaos", Name: "kill-rank/1", Metric: "recovery_s", Value: 2.5, Unit: "s", Verdict: "pass"}}}
	if _, err := db.Store().Ingest(ctx, b, nil); err != nil {
		t.Fatal(err)
	}
	ms, err := db.Metrics(ctx, "chaos")
	if err != nil || len(ms) != 1 || ms[0].Name != "kill-rank/1" || ms[0].Rows[0].Value != 2.5 || ms[0].Rows[0].Run.Commit != "c" {
		t.Fatalf("metrics %+v %v", ms, err)
	}
	if ms, _ := db.Metrics(ctx, "stress"); len(ms) != 0 {
		t.Fatalf("stress metrics %+v", ms)
	}
}
