package report_test

import (
	"context"
	"strings"
	"testing"

	"github.com/tessera-qa/tessera-qa/report"
	"github.com/tessera-qa/tessera-qa/report/store/storetest"
	"github.com/tessera-qa/tessera-qa/report/synth"
)

func openDB(t testing.TB, dsn string) *report.DB {
	t.Helper()
	db, err := report.Open(context.Background(), dsn, report.Config{})
	if err != nil {
		t.Fatalf("open %s: %v", dsn, err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// TestSyntheticHistoryGate is issue 5's "done when": a planted 25% slowdown in one series, a
// 3%-noise series with no change and a changed digest in one case. The gate blocks on the
// first and the third and not on the second; the views report all three.
func TestSyntheticHistoryGate(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		db := openDB(t, dsn)
		plan, err := synth.Write(ctx, db, synth.Options{Seed: 1})
		if err != nil {
			t.Fatal(err)
		}
		g, err := db.Gate(ctx, report.GateOptions{Baseline: "main"})
		if err != nil {
			t.Fatal(err)
		}
		if g.Commit != plan.Commits[len(plan.Commits)-1] || len(g.Candidate) != 3 {
			t.Fatalf("candidate: commit %s, %d runs; want the last commit's 3 runs", g.Commit, len(g.Candidate))
		}
		var blocks []report.GateReason
		for _, r := range g.Reasons {
			if strings.Contains(r.Text, plan.Noisy.Benchmark) {
				t.Errorf("gate mentions the noise-only series: %s", r)
			}
			if r.Level == report.GateBlock {
				blocks = append(blocks, r)
			}
		}
		if !g.Blocked || len(blocks) != 2 {
			t.Fatalf("gate blocked=%v with %d blocking reasons, want 2: %v", g.Blocked, len(blocks), g.Reasons)
		}
		if blocks[0].Kind != "perf" || !strings.Contains(blocks[0].Text, plan.Slow.ID()) || !strings.Contains(blocks[0].Text, "+2") {
			t.Errorf("first block %q: want the slowed series %s at about +25%%", blocks[0], plan.Slow.ID())
		}
		if blocks[1].Kind != "repro" || !strings.Contains(blocks[1].Text, plan.ChangedCase.Case) || !strings.Contains(blocks[1].Text, plan.NewDigest[:12]) {
			t.Errorf("second block %q: want the changed case %s", blocks[1], plan.ChangedCase.Case)
		}

		// Views: all three are visible.
		ov, err := db.Overview(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(ov.OpenPerf) != 1 || ov.OpenPerf[0].Key != plan.Slow || ov.OpenPerf[0].Level != report.LevelBlock {
			t.Errorf("overview open perf: %+v; want only the slowed series at block", ov.OpenPerf)
		}
		if len(ov.OpenRepro) != 1 || ov.OpenRepro[0].Key != plan.ChangedCase {
			t.Errorf("overview open repro: %+v", ov.OpenRepro)
		}
		if len(ov.Flaky) != 1 || ov.Flaky[0].Spec != plan.FlakySpec || ov.Flaky[0].Commit != plan.FlakyCommit || len(ov.Flaky[0].Runs) != 2 {
			t.Errorf("overview flaky: %+v; want %q on %s in 2 runs", ov.Flaky, plan.FlakySpec, plan.FlakyCommit)
		}
		if len(ov.Suites) != 2 || ov.Runs != 3*30+1 {
			t.Errorf("overview: %d suites, %d runs; want 2 and 91", len(ov.Suites), ov.Runs)
		}
		slow, err := db.Series(ctx, plan.Slow)
		if err != nil {
			t.Fatal(err)
		}
		n := len(slow.Points)
		if n != 30 || len(slow.ChangePoints) != 1 || slow.ChangePoints[0] != n-3 || !slow.Points[n-3].ChangePoint {
			t.Errorf("slowed series: %d points, change points %v; want one at %d", n, slow.ChangePoints, n-3)
		}
		if slow.Latest.Level != report.LevelBlock || slow.Latest.Delta < 0.2 || slow.BaselineTo != n-1 || slow.BaselineFrom != n-21 {
			t.Errorf("slowed series latest %+v, baseline [%d,%d)", slow.Latest, slow.BaselineFrom, slow.BaselineTo)
		}
		noisy, err := db.Series(ctx, plan.Noisy)
		if err != nil {
			t.Fatal(err)
		}
		if len(noisy.Points) != 30 || len(noisy.ChangePoints) != 0 || noisy.Latest.Level != report.LevelOK {
			t.Errorf("noisy series: %d points, change points %v, latest %s; want 30, none, ok",
				len(noisy.Points), noisy.ChangePoints, noisy.Latest.Level)
		}
		m, err := db.ReproMatrix(ctx)
		if err != nil {
			t.Fatal(err)
		}
		bad := 0
		for _, c := range m.Cells {
			if c.Status == report.ReproNewDigest {
				bad++
				if c.Key != plan.ChangedCase || c.FirstBad == nil || c.LastGood == nil ||
					c.FirstBad.Commit != plan.Commits[29] || c.LastGood.Commit != plan.Commits[28] {
					t.Errorf("new-digest cell %+v: want first bad on the last commit, last good on the one before", c)
				}
			}
		}
		if bad != 1 || len(m.Cases) != 8 || len(m.DeviceClasses) != 1 {
			t.Errorf("matrix: %d new-digest cells, %d cases, %d classes; want 1, 8, 1", bad, len(m.Cases), len(m.DeviceClasses))
		}
		idx, err := db.SeriesIndex(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(idx) != 6 {
			t.Errorf("series index has %d series, want 6", len(idx))
		}

		// Acknowledging both clears the gate, and the acknowledgements are shown.
		if _, err := db.AckRepro(ctx, report.ReproKey{Suite: "golden", Case: plan.ChangedCase.Case, DeviceClass: "cpu/amd64"}, "", "engine changed matmul tiling on purpose", "tester"); err != nil {
			t.Fatal(err)
		}
		if _, err := db.AckPerf(ctx, plan.Slow.ID(), 0, "new f16 path trades speed for accuracy", "tester"); err != nil {
			t.Fatal(err)
		}
		g, err = db.Gate(ctx, report.GateOptions{Baseline: "main"})
		if err != nil {
			t.Fatal(err)
		}
		if g.Blocked || len(g.Reasons) != 1 || g.Reasons[0].Level != report.GateAcked || !strings.Contains(g.Reasons[0].Text, "trades speed") {
			t.Fatalf("gate after acks: blocked=%v %v; want one ACKED perf line with the reason", g.Blocked, g.Reasons)
		}
		ov, _ = db.Overview(ctx)
		if len(ov.OpenPerf) != 0 || len(ov.AckedPerf) != 1 || ov.AckedPerf[0].Ack.Reason == "" || len(ov.OpenRepro) != 0 {
			t.Fatalf("overview after acks: open perf %v, acked %v, open repro %v", ov.OpenPerf, ov.AckedPerf, ov.OpenRepro)
		}
		m, _ = db.ReproMatrix(ctx)
		for _, c := range m.Cells {
			if c.Key == plan.ChangedCase && (c.Status != report.ReproAcked || c.Digests[1].Acked == nil || c.Digests[1].Acked.By != "tester") {
				t.Fatalf("acked cell %+v", c)
			}
		}
	})
}
