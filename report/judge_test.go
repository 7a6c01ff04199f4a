package report_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tessera-qa/tessera-qa/harness"
	"github.com/tessera-qa/tessera-qa/report"
	"github.com/tessera-qa/tessera-qa/report/store/storetest"
)

// benchRuns ingests one run of commit i holding a row of each series, series k with the
// samples of level(vals[k], 8).
func benchRuns(t *testing.T, db *report.DB, i int, keys []report.SeriesKey, vals ...float64) {
	t.Helper()
	rep := report.BenchReport{Schema: 1, Kind: report.BenchKind}
	for k, key := range keys {
		s := level(vals[k], 8)
		rep.Rows = append(rep.Rows, report.BenchRow{Op: key.Benchmark, DType: key.DType, Shape: []int{8}, Device: key.Device, EngineMS: s[0], SamplesMS: s})
	}
	data, _ := json.Marshal(rep)
	if _, err := db.IngestBytes(context.Background(), fmt.Sprintf("judge-b%d.json", i), data, report.IngestOptions{
		Override: report.Meta{Commit: fmt.Sprintf("c%03d", i), Branch: "main", Time: day0.Add(time.Duration(i) * time.Hour)}}); err != nil {
		t.Fatal(err)
	}
}

// The perf levels at their edges, with the default thresholds (warn 5%, block 20%, effects
// under 2% ignored): each slowdown is far outside the ±0.4% noise, so only the thresholds
// decide. 21% blocks, 19% warns, 6% warns, 4% is a significant change under the warn
// threshold (no regression), 1% is under the smallest effect.
func TestJudgePerfLevelsAtTheThresholds(t *testing.T) {
	for _, tc := range []struct {
		slower float64
		want   string
	}{{1.21, report.LevelBlock}, {1.19, report.LevelWarn}, {1.06, report.LevelWarn}, {1.04, report.LevelOK}, {1.01, report.LevelOK}, {0.9, report.LevelImproved}} {
		ctx := context.Background()
		db := openDB(t, storetest.SQLite(t))
		for i := range 6 {
			benchRun(t, db, i, "main", mmKey, level(1, 8)...)
		}
		benchRun(t, db, 6, "main", mmKey, level(tc.slower, 8)...)
		s, err := db.Series(ctx, mmKey)
		if err != nil {
			t.Fatal(err)
		}
		if s.Latest.Level != tc.want {
			t.Errorf("%+.0f%%: level %s (delta %+.3f, p %.2g), want %s", 100*(tc.slower-1), s.Latest.Level, s.Latest.Delta, s.Latest.P, tc.want)
		}
		g, err := db.Gate(ctx, report.GateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if g.Blocked != (tc.want == report.LevelBlock) {
			t.Errorf("%+.0f%%: gate blocked %v with level %s: %v", 100*(tc.slower-1), g.Blocked, tc.want, g.Reasons)
		}
	}
}

// A perf acknowledgement excuses the series it names and no other: two series slow down by
// 30% in one run, one is acknowledged, the other still blocks the gate.
func TestJudgePerfAckExcusesOnlyItsSeries(t *testing.T) {
	ctx := context.Background()
	db := openDB(t, storetest.SQLite(t))
	addKey := report.SeriesKey{Benchmark: "add", Device: "cpu/amd64", DType: "f32", Shape: "8"}
	keys := []report.SeriesKey{mmKey, addKey}
	for i := range 6 {
		benchRuns(t, db, i, keys, 1, 2)
	}
	benchRuns(t, db, 6, keys, 1.3, 2.6)
	if _, err := db.AckPerf(ctx, mmKey.ID(), 0, "mm is slower on purpose", "me"); err != nil {
		t.Fatal(err)
	}
	mm, _ := db.Series(ctx, mmKey)
	add, _ := db.Series(ctx, addKey)
	if mm.Latest.Ack == nil || add.Latest.Ack != nil || add.Latest.Level != report.LevelBlock {
		t.Fatalf("mm acked %v; add acked %v at level %s: want only mm excused", mm.Latest.Ack != nil, add.Latest.Ack != nil, add.Latest.Level)
	}
	g, _ := db.Gate(ctx, report.GateOptions{})
	var blocks, acked int
	for _, r := range g.Reasons {
		switch {
		case r.Level == report.GateBlock && strings.HasPrefix(r.Text, addKey.String()):
			blocks++
		case r.Level == report.GateAcked && strings.HasPrefix(r.Text, mmKey.String()):
			acked++
		}
	}
	if !g.Blocked || blocks != 1 || acked != 1 || len(g.Reasons) != 2 {
		t.Fatalf("gate %+v: want add blocking and mm acknowledged", g.Reasons)
	}
}

// A repro acknowledgement accepts the digest it names and no other: case x goes aa, bb, cc;
// accepting bb leaves cc a regression that blocks the latest commit, accepting cc too clears it.
func TestJudgeReproAckAcceptsOnlyItsDigest(t *testing.T) {
	ctx := context.Background()
	db := openDB(t, storetest.SQLite(t))
	for i, d := range []string{"aa", "bb", "cc"} {
		results(t, db, i+1, harness.DeterminismBitwise, map[string]string{"x": d, "y": "ff"})
	}
	k := report.ReproKey{Suite: "golden", Case: "x", DeviceClass: "cpu/amd64"}
	if _, err := db.AckRepro(ctx, k, "bb", "bb is the new tiling", "me"); err != nil {
		t.Fatal(err)
	}
	m, _ := db.ReproMatrix(ctx)
	if len(m.Regressions) != 1 || m.Regressions[0].Digest != "cc" || m.Regressions[0].Previous != "bb" {
		t.Fatalf("regressions after accepting bb: %+v", m.Regressions)
	}
	g, _ := db.Gate(ctx, report.GateOptions{})
	if !g.Blocked || len(g.Reasons) != 1 || !strings.Contains(g.Reasons[0].Text, "new digest cc") {
		t.Fatalf("gate after accepting bb only: %+v", g.Reasons)
	}
	if _, err := db.AckRepro(ctx, k, "cc", "and cc", "me"); err != nil {
		t.Fatal(err)
	}
	if g, _ = db.Gate(ctx, report.GateOptions{}); g.Blocked {
		t.Fatalf("gate after accepting cc: %+v", g.Reasons)
	}
}

// Flaky means passed and failed on one commit: a case that only failed is not on the flaky
// page, and is once a rerun of the commit passes.
func TestJudgeFlakyNeedsAPassAndAFailure(t *testing.T) {
	ctx := context.Background()
	db := openDB(t, storetest.SQLite(t))
	results(t, db, 1, harness.DeterminismBitwise, map[string]string{"x": "aa", "y": "bb"}, harness.VerdictFail)
	if f, err := db.Flaky(ctx); err != nil || len(f) != 0 {
		t.Fatalf("two cases that only failed: flaky %+v, %v", f, err)
	}
	data, _ := json.Marshal([]harness.Result{{Schema: 1, Suite: "golden", Case: "x", DeviceClass: "cpu/amd64", Verdict: "pass",
		Digest: "aa", Env: harness.Env{Determinism: "bitwise", Hostname: "other"}, Outputs: []harness.OutputResult{}}})
	if _, err := db.IngestBytes(ctx, "rerun.json", data, report.IngestOptions{Override: report.Meta{Commit: "c001", Branch: "main",
		Time: day0.Add(2 * time.Hour)}}); err != nil {
		t.Fatal(err)
	}
	f, err := db.Flaky(ctx)
	if err != nil || len(f) != 1 || f[0].Spec != "x" || f[0].Passes != 1 || f[0].Fails != 1 {
		t.Fatalf("x failed and passed, y only failed: flaky %+v, %v", f, err)
	}
}
