package report

import (
	"context"
	"sort"
	"time"
)

// Overview builds the front page.
func (db *DB) Overview(ctx context.Context) (Overview, error) {
	s, err := db.snapshot(ctx)
	if err != nil {
		return Overview{}, err
	}
	ov := Overview{Generated: time.Now().UTC(), Suites: []SuiteStatus{}, OpenPerf: []PerfRegression{},
		AckedPerf: []PerfRegression{}, OpenRepro: s.repro.Regressions, Flaky: s.flaky}
	if ov.Suites, err = db.suiteStatus(ctx, s.runs); err != nil {
		return Overview{}, err
	}
	for _, p := range s.perf {
		if p.Level != LevelWarn && p.Level != LevelBlock {
			continue
		}
		if p.Ack != nil {
			ov.AckedPerf = append(ov.AckedPerf, p)
		} else {
			ov.OpenPerf = append(ov.OpenPerf, p)
		}
	}
	sort.SliceStable(ov.OpenPerf, func(i, j int) bool {
		a, b := ov.OpenPerf[i], ov.OpenPerf[j]
		if (a.Level == LevelBlock) != (b.Level == LevelBlock) {
			return a.Level == LevelBlock
		}
		return a.Delta > b.Delta
	})
	ov.Runs, ov.Results, ov.Series = s.nRuns, s.nResults, s.nSeries
	return ov, nil
}

// IsNightly reports whether a run's event is a nightly one ("nightly", or GitHub's
// "schedule").
func IsNightly(event string) bool { return event == "nightly" || event == "schedule" }

// suiteStatus is each suite's last nightly run, or its last run when it never ran nightly.
func (db *DB) suiteStatus(ctx context.Context, ix *runIndex) ([]SuiteStatus, error) {
	rows, err := db.st.RunSuites(ctx)
	if err != nil {
		return nil, err
	}
	type best struct {
		order   int
		nightly bool
		st      SuiteStatus
	}
	by := map[string]*best{}
	for _, r := range rows {
		o := ix.order(r.RunID)
		if o < 0 {
			continue
		}
		run := ix.runs[o]
		n := IsNightly(run.Event)
		b := by[r.Suite]
		if b != nil && (b.nightly && !n || b.nightly == n && b.order > o) {
			continue
		}
		failing := r.Failing
		if failing == nil {
			failing = []string{}
		}
		by[r.Suite] = &best{o, n, SuiteStatus{Suite: r.Suite, Run: runRef(run), Pass: r.Pass, Fail: r.Fail, Error: r.Error,
			Skip: r.Skip, Total: r.Pass + r.Fail + r.Error + r.Skip, WallMS: r.WallMS, Failing: failing}}
	}
	out := make([]SuiteStatus, 0, len(by))
	for _, b := range by {
		out = append(out, b.st)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Suite < out[j].Suite })
	return out, nil
}

// Runs lists the newest runs, newest first; limit <= 0 means all.
func (db *DB) Runs(ctx context.Context, limit int) ([]RunRef, error) {
	ix, err := db.loadRuns(ctx)
	if err != nil {
		return nil, err
	}
	out := []RunRef{}
	for i := len(ix.runs) - 1; i >= 0 && (limit <= 0 || len(out) < limit); i-- {
		out = append(out, runRef(ix.runs[i]))
	}
	return out, nil
}

// Metrics returns the chaos or stress metrics (kind "chaos" or "stress"), one section per
// scenario or workload, rows in run order.
func (db *DB) Metrics(ctx context.Context, kind string) ([]MetricSection, error) {
	ix, err := db.loadRuns(ctx)
	if err != nil {
		return nil, err
	}
	rows, err := db.st.Metrics(ctx, kind)
	if err != nil {
		return nil, err
	}
	out := []MetricSection{}
	at := map[string]int{}
	for _, r := range rows {
		i, ok := at[r.Name]
		if !ok {
			i = len(out)
			at[r.Name] = i
			out = append(out, MetricSection{Kind: kind, Name: r.Name})
		}
		out[i].Rows = append(out[i].Rows, MetricRow{Run: ix.ref(r.RunID), Metric: r.Metric, Value: r.Value, Unit: r.Unit,
			Verdict: r.Verdict, Note: r.Note})
	}
	for i := range out {
		sort.SliceStable(out[i].Rows, func(a, b int) bool { return ix.order(out[i].Rows[a].Run.ID) < ix.order(out[i].Rows[b].Run.ID) })
	}
	return out, nil
}
