package report

import (
	"context"
	"fmt"
	"sort"

	"github.com/tessera-qa/tessera-qa/engine/errs"
)

// GateOptions chooses what the gate judges.
type GateOptions struct {
	// Baseline is the branch whose runs form the baseline windows ("main").
	Baseline string
	// Commit: the candidate is every run of this commit; empty: the latest run's commit.
	Commit string
	// RunIDs, when set, are the candidate runs (Commit is then ignored).
	RunIDs []int64
}

// Gate reason levels.
const (
	GateBlock = "BLOCK"
	GateWarn  = "WARN"
	GateAcked = "ACKED"
)

// GateReason is one line of the gate's verdict.
type GateReason struct {
	Level string `json:"level"` // GateBlock, GateWarn, GateAcked
	Kind  string `json:"kind"`  // "perf", "repro", "fail", "flaky"
	Text  string `json:"text"`
}

func (r GateReason) String() string { return r.Level + " " + r.Kind + " " + r.Text }

// GateResult is the gate's verdict on a candidate.
type GateResult struct {
	Commit    string       `json:"commit"`
	Baseline  string       `json:"baseline"`
	Candidate []RunRef     `json:"candidate"`
	Reasons   []GateReason `json:"reasons"`
	Blocked   bool         `json:"blocked"`
	// What was judged: perf series, repro keys and results of the candidate runs.
	Series    int `json:"series"`
	ReproKeys int `json:"repro_keys"`
	Checked   int `json:"checked"`
}

// Gate judges the candidate runs: it blocks on a performance regression at the block level,
// on a reproducibility regression (a digest the tracker does not accept) and on a failing
// result or spec. A test that also passed on the candidate commit is flaky: a warning, not a
// block (the flaky page tracks it). Acknowledged regressions are listed as ACKED.
func (db *DB) Gate(ctx context.Context, o GateOptions) (GateResult, error) {
	if o.Baseline == "" {
		o.Baseline = db.cfg.BaselineBranch
	}
	snap, err := db.snapshot(ctx)
	if err != nil {
		return GateResult{}, err
	}
	ix := snap.runs
	cand, commit, err := candidates(ix, o)
	if err != nil {
		return GateResult{}, err
	}
	g := GateResult{Commit: commit, Baseline: o.Baseline, Reasons: []GateReason{}}
	isCand := map[int]bool{}
	var ids []int64
	for _, i := range cand {
		isCand[i] = true
		ids = append(ids, ix.runs[i].ID)
		g.Candidate = append(g.Candidate, runRef(ix.runs[i]))
	}
	if err := db.gatePerf(ctx, snap.series, ix, isCand, o.Baseline, &g); err != nil {
		return GateResult{}, err
	}
	if err := db.gateRepro(ctx, snap.states, ids, &g); err != nil {
		return GateResult{}, err
	}
	if err := db.gateFailures(ctx, ix, ids, commit, &g); err != nil {
		return GateResult{}, err
	}
	rank := map[string]int{GateBlock: 0, GateWarn: 1, GateAcked: 2}
	sort.SliceStable(g.Reasons, func(i, j int) bool { return rank[g.Reasons[i].Level] < rank[g.Reasons[j].Level] })
	for _, r := range g.Reasons {
		if r.Level == GateBlock {
			g.Blocked = true
		}
	}
	return g, nil
}

func candidates(ix *runIndex, o GateOptions) ([]int, string, error) {
	if len(ix.runs) == 0 {
		return nil, "", errs.New(errs.Input, "gate: the store has no runs; ingest some first")
	}
	var out []int
	if len(o.RunIDs) > 0 {
		for _, id := range o.RunIDs {
			i, ok := ix.byID[id]
			if !ok {
				return nil, "", errs.New(errs.Input, "gate: no run %d in the store", id)
			}
			out = append(out, i)
		}
		sort.Ints(out)
		return out, ix.runs[out[len(out)-1]].Commit, nil
	}
	commit := o.Commit
	if commit == "" {
		commit = ix.runs[len(ix.runs)-1].Commit
	}
	for i, r := range ix.runs {
		if r.Commit == commit {
			out = append(out, i)
		}
	}
	if len(out) == 0 {
		return nil, "", errs.New(errs.Input, "gate: no runs of commit %q in the store", clip(commit))
	}
	return out, commit, nil
}

func (db *DB) gatePerf(ctx context.Context, series []*seriesHist, ix *runIndex, isCand map[int]bool, branch string, g *GateResult) error {
	for _, h := range series {
		var cand []int
		for i, p := range h.pts {
			if isCand[p.run] {
				cand = append(cand, i)
			}
		}
		if len(cand) == 0 {
			continue
		}
		g.Series++
		base := db.baselineWindow(h, ix, cand, branch, false)
		pr := db.compare(h, ix, cand, base)
		th := db.cfg.ThresholdsFor(h.key)
		line := fmt.Sprintf("%s [%s]: %+.1f%% (median %.4g vs %.4g %s over %d baseline runs on %s, p=%.2g); warn %.0f%%, block %.0f%%",
			h.key, h.key.ID(), 100*pr.Delta, pr.Median, pr.BaselineMedian, pr.Unit, pr.BaselineRuns, branch, pr.P, 100*th.Warn, 100*th.Block)
		if pr.Level == LevelBlock || pr.Level == LevelWarn {
			// A profiled series names the kernel that added the most time.
			ds, err := db.KernelDiff(ctx, h.key, runIDs(h, ix, base), runIDs(h, ix, cand))
			if err != nil {
				return err
			}
			if len(ds) > 0 && ds[0].MS > ds[0].BaseMS {
				line += "; slowest-growing " + ds[0].String()
			}
		}
		switch {
		case pr.Ack != nil && (pr.Level == LevelBlock || pr.Level == LevelWarn):
			g.Reasons = append(g.Reasons, GateReason{GateAcked, "perf", line + fmt.Sprintf("; acknowledged by %s: %s", pr.Ack.By, pr.Ack.Reason)})
		case pr.Level == LevelBlock:
			g.Reasons = append(g.Reasons, GateReason{GateBlock, "perf", line})
		case pr.Level == LevelWarn:
			g.Reasons = append(g.Reasons, GateReason{GateWarn, "perf", line})
		}
	}
	return nil
}

func (db *DB) gateRepro(ctx context.Context, states []*reproKeyState, ids []int64, g *GateResult) error {
	byKey := map[ReproKey]*reproKeyState{}
	for _, st := range states {
		byKey[st.key] = st
	}
	rows, err := db.st.Results(ctx, ids)
	if err != nil {
		return err
	}
	g.Checked = len(rows)
	seen := map[string]bool{}
	keys := map[ReproKey]bool{}
	for _, r := range rows {
		k := ReproKey{Suite: r.Suite, Case: r.Case, DeviceClass: r.DeviceClass, Determinism: r.Determinism, Computation: r.Computation}
		st := byKey[k]
		if st == nil || r.Digest == "" || st.status == ReproUntracked {
			continue
		}
		keys[k] = true
		for _, reg := range st.regs {
			if reg.Digest != r.Digest || seen[k.String()+reg.Digest] {
				continue
			}
			seen[k.String()+reg.Digest] = true
			g.Reasons = append(g.Reasons, GateReason{GateBlock, "repro", fmt.Sprintf(
				"%s on %s (%s): new digest %s first in run %d (commit %s), last good run %d (commit %s, digest %s); accept with `tessera-qa report ack repro` if intended",
				k.Name(), k.DeviceClass, k.Determinism, shortDigest(reg.Digest), reg.FirstBad.ID, reg.FirstBad.Commit,
				reg.LastGood.ID, reg.LastGood.Commit, shortDigest(reg.Previous))})
		}
	}
	g.ReproKeys = len(keys)
	return nil
}

func (db *DB) gateFailures(ctx context.Context, ix *runIndex, ids []int64, commit string, g *GateResult) error {
	fails, err := db.st.Failures(ctx, ids)
	if err != nil {
		return err
	}
	outs, err := db.st.Outcomes(ctx, true)
	if err != nil {
		return err
	}
	flaky := map[string]bool{}
	for _, o := range outs {
		if o.Commit == commit {
			flaky[o.Kind+"\x00"+o.Suite+"\x00"+o.Name+"\x00"+o.DeviceClass] = true
		}
	}
	seen := map[string]bool{}
	for _, f := range fails {
		k := f.Kind + "\x00" + f.Suite + "\x00" + f.Name + "\x00" + f.DeviceClass
		if seen[k] {
			continue
		}
		seen[k] = true
		line := fmt.Sprintf("%s/%s [%s] %s in run %d: %s", f.Suite, f.Name, f.DeviceClass, f.Verdict, f.RunID, oneLine(f.Reason))
		if flaky[k] {
			g.Reasons = append(g.Reasons, GateReason{GateWarn, "flaky", line + " (also passed on this commit)"})
		} else {
			g.Reasons = append(g.Reasons, GateReason{GateBlock, "fail", line})
		}
	}
	return nil
}

func oneLine(s string) string {
	out := make([]rune, 0, min(len(s), 200))
	space := false
	for _, r := range s {
		if r == '\n' || r == '\r' || r == '\t' || r == ' ' {
			space = true
			continue
		}
		if space && len(out) > 0 {
			out = append(out, ' ')
		}
		space = false
		out = append(out, r)
		if len(out) >= 200 {
			out = append(out, '…')
			break
		}
	}
	return string(out)
}
