package report

import (
	"context"

	"github.com/tessera-qa/tessera-qa/report/store"
)

// runIndex is every run, in time order, with lookups.
type runIndex struct {
	runs []store.RunRow
	byID map[int64]int // run id -> position in time order
	acks []store.AckRow
}

func (db *DB) loadRuns(ctx context.Context) (*runIndex, error) {
	runs, err := db.st.Runs(ctx)
	if err != nil {
		return nil, err
	}
	acks, err := db.st.Acks(ctx)
	if err != nil {
		return nil, err
	}
	ix := &runIndex{runs: runs, byID: make(map[int64]int, len(runs)), acks: acks}
	for i, r := range runs {
		ix.byID[r.ID] = i
	}
	return ix, nil
}

func (ix *runIndex) ref(id int64) RunRef {
	if i, ok := ix.byID[id]; ok {
		return runRef(ix.runs[i])
	}
	return RunRef{ID: id}
}

// order is a run's position in time; unknown runs sort first.
func (ix *runIndex) order(id int64) int {
	if i, ok := ix.byID[id]; ok {
		return i
	}
	return -1
}

// snapshot caches the whole-store analyses of one generation: the overview reads every
// series, and the dashboard asks for it on every page load.
type snapshot struct {
	gen    string
	runs   *runIndex
	series []*seriesHist
	perf   []PerfRegression // latest comparison of each series, parallel to series
	states []*reproKeyState
	repro  ReproMatrix
	flaky  []FlakySpec
	// Store-wide counts for the overview: three COUNT(*) scans cost most of an overview
	// render, and they only change when a run is ingested, which changes gen.
	nRuns, nResults, nSeries int
}

func (db *DB) snapshot(ctx context.Context) (*snapshot, error) {
	gen, err := db.st.Generation(ctx)
	if err != nil {
		return nil, err
	}
	db.mu.Lock()
	defer db.mu.Unlock()
	if db.cache != nil && db.cache.gen == gen {
		return db.cache, nil
	}
	s := &snapshot{gen: gen}
	if s.runs, err = db.loadRuns(ctx); err != nil {
		return nil, err
	}
	if s.series, err = db.loadSeries(ctx, s.runs, nil); err != nil {
		return nil, err
	}
	s.perf = make([]PerfRegression, len(s.series))
	for i, h := range s.series {
		s.perf[i], _ = db.latest(h, s.runs)
	}
	if s.states, err = db.reproStates(ctx, s.runs); err != nil {
		return nil, err
	}
	s.repro = reproMatrix(s.states)
	if s.flaky, err = db.flaky(ctx, s.runs); err != nil {
		return nil, err
	}
	if s.nRuns, s.nResults, s.nSeries, err = db.st.Counts(ctx); err != nil {
		return nil, err
	}
	db.cache = s
	return s, nil
}
