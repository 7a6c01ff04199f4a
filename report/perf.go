package report

import (
	"context"
	"math"
	"sort"

	"github.com/tessera-qa/tessera-qa/engine/failpoint"
	"github.com/tessera-qa/tessera-qa/report/stats"
	"github.com/tessera-qa/tessera-qa/report/store"
)

// minSegment is the shortest stretch the change point fit accepts: a single odd run is noise,
// not a new level (the Mann-Whitney comparison judges the latest run on its own).
const minSegment = 3

// seriesHist is one series' points in run time order, one per run.
type seriesHist struct {
	key  SeriesKey
	unit string
	pts  []histPoint
}

type histPoint struct {
	run     int // position in runIndex.runs
	value   float64
	samples []float64
}

// sample is what the point contributes to a comparison: its repetitions, or its value.
func (p histPoint) sample() []float64 {
	if len(p.samples) > 0 {
		return p.samples
	}
	return []float64{p.value}
}

// loadSeries groups bench rows into series. A run with several rows of one series (repeated
// measurements) becomes one point with all their samples. Points in another unit than the
// series' latest (a run that had no reference timing) are left out: ratios and milliseconds
// do not compare.
func (db *DB) loadSeries(ctx context.Context, ix *runIndex, only *SeriesKey) ([]*seriesHist, error) {
	var filter *store.SeriesKey
	if only != nil {
		k := only.store()
		filter = &k
	}
	rows, err := db.st.Bench(ctx, filter)
	if err != nil {
		return nil, err
	}
	type pk struct {
		key SeriesKey
		run int
	}
	type acc struct {
		unit    string
		values  []float64
		samples []float64
	}
	byPoint := map[pk]*acc{}
	for _, r := range rows {
		run := ix.order(r.RunID)
		if run < 0 {
			continue
		}
		k := pk{seriesKeyOf(r.Key), run}
		a := byPoint[k]
		if a == nil {
			a = &acc{unit: r.Unit}
			byPoint[k] = a
		}
		if a.unit != r.Unit {
			continue
		}
		a.values = append(a.values, r.Value)
		a.samples = append(a.samples, r.Samples...)
	}
	bySeries := map[SeriesKey]*seriesHist{}
	for k, a := range byPoint {
		h := bySeries[k.key]
		if h == nil {
			h = &seriesHist{key: k.key}
			bySeries[k.key] = h
		}
		p := histPoint{run: k.run, value: a.values[0], samples: a.samples}
		if len(a.values) > 1 {
			p.value = stats.Median(a.values)
		}
		if len(a.samples) > 0 {
			p.value = stats.Median(a.samples)
		}
		h.pts = append(h.pts, p)
	}
	out := make([]*seriesHist, 0, len(bySeries))
	for _, h := range bySeries {
		sort.Slice(h.pts, func(i, j int) bool { return h.pts[i].run < h.pts[j].run })
		out = append(out, h)
	}
	// Units: the latest point's wins.
	for _, h := range out {
		last := h.pts[len(h.pts)-1]
		h.unit = byPoint[pk{h.key, last.run}].unit
		kept := h.pts[:0]
		for _, p := range h.pts {
			if byPoint[pk{h.key, p.run}].unit == h.unit {
				kept = append(kept, p)
			}
		}
		h.pts = kept
	}
	sort.Slice(out, func(i, j int) bool { return out[i].key.String() < out[j].key.String() })
	return out, nil
}

// latest compares the last point of h with its baseline window and returns the comparison
// and the window (indexes into h.pts).
func (db *DB) latest(h *seriesHist, ix *runIndex) (PerfRegression, []int) {
	cand := []int{len(h.pts) - 1}
	base := db.baselineWindow(h, ix, cand, db.cfg.BaselineBranch, true)
	return db.compare(h, ix, cand, base), base
}

// baselineWindow picks the points a candidate is compared with: points before the first
// candidate, on the baseline branch (when fallback is set and the series has no point on it,
// any branch), after the latest baseline reset, at most Window of them, newest kept.
func (db *DB) baselineWindow(h *seriesHist, ix *runIndex, cand []int, branch string, fallback bool) []int {
	th := db.cfg.ThresholdsFor(h.key)
	first := len(h.pts)
	isCand := map[int]bool{}
	for _, c := range cand {
		first = min(first, c)
		isCand[c] = true
	}
	if fallback && branch != "" {
		on := false
		for _, p := range h.pts {
			if ix.runs[p.run].Branch == branch {
				on = true
				break
			}
		}
		if !on {
			branch = ""
		}
	}
	from := -1 // run position the baseline restarts at
	candRun := -1
	if first < len(h.pts) {
		candRun = h.pts[first].run
	}
	id := h.key.ID()
	for _, a := range ix.acks {
		if a.Kind == AckBaseline && a.Target == id {
			if o := ix.order(a.RunID); o >= 0 && o <= candRun && o > from {
				from = o
			}
		}
	}
	var base []int
	for i := first - 1; i >= 0 && len(base) < th.Window; i-- {
		p := h.pts[i]
		if isCand[i] || p.run < from || (branch != "" && ix.runs[p.run].Branch != branch) {
			continue
		}
		base = append(base, i)
	}
	sort.Ints(base)
	return base
}

// compare judges candidate points against baseline points.
func (db *DB) compare(h *seriesHist, ix *runIndex, cand, base []int) PerfRegression {
	th := db.cfg.ThresholdsFor(h.key)
	last := h.pts[cand[len(cand)-1]]
	pr := PerfRegression{Key: h.key, ID: h.key.ID(), Run: runRef(ix.runs[last.run]), Unit: h.unit, BaselineRuns: len(base)}
	var cs, bs []float64
	for _, i := range cand {
		cs = append(cs, h.pts[i].sample()...)
	}
	for _, i := range base {
		bs = append(bs, h.pts[i].sample()...)
	}
	pr.Median = stats.Median(cs)
	if len(base) < th.MinRuns {
		pr.Level = LevelNoBaseline
		pr.P = 1
		return pr
	}
	c := stats.Compare(cs, bs)
	pr.P, pr.Delta, pr.BaselineMedian = c.P, c.Delta, c.BaselineMedian
	if math.IsInf(pr.Delta, 0) {
		pr.Delta = math.MaxFloat64 // JSON has no Inf
	}
	switch {
	case failpoint.Pick(failpoint.JudgeReportPValueInverted, c.P >= th.Alpha, c.P < th.Alpha) || math.Abs(c.Delta) < th.MinEffect:
		pr.Level = LevelOK
	case c.Delta < 0:
		pr.Level = LevelImproved
	case c.Delta >= failpoint.Pick(failpoint.JudgeReportBlockAboveWarn, th.Block, th.Block+th.Warn):
		pr.Level = LevelBlock
	case c.Delta >= th.Warn:
		pr.Level = LevelWarn
	default:
		pr.Level = LevelOK
	}
	if pr.Level == LevelWarn || pr.Level == LevelBlock {
		pr.Ack = db.perfAck(h, ix, last, th)
	}
	return pr
}

// perfAck finds the acknowledgement covering a slowdown at point last: the newest perf ack of
// the series made at or before last's run, provided last is not slower than the acknowledged
// run by more than the warn threshold (a further slowdown is news again).
func (db *DB) perfAck(h *seriesHist, ix *runIndex, last histPoint, th Thresholds) *Ack {
	id := h.key.ID()
	for i := len(ix.acks) - 1; i >= 0; i-- {
		a := ix.acks[i]
		if a.Kind != AckPerf || (a.Target != id && !failpoint.Enabled(failpoint.JudgeReportPerfAckAnySeries)) {
			continue
		}
		o := ix.order(a.RunID)
		if o < 0 || o > last.run {
			continue
		}
		for _, p := range h.pts {
			if p.run == o && last.value > p.value*(1+th.Warn) {
				return nil
			}
		}
		ack := ackOf(a)
		return &ack
	}
	return nil
}

// SeriesIndex lists every series with its latest level.
func (db *DB) SeriesIndex(ctx context.Context) ([]SeriesSummary, error) {
	s, err := db.snapshot(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]SeriesSummary, len(s.series))
	for i, h := range s.series {
		level := s.perf[i].Level
		if s.perf[i].Ack != nil {
			level = LevelOK
		}
		out[i] = SeriesSummary{Key: h.key, ID: h.key.ID(), Unit: h.unit, Points: len(h.pts),
			Last: h.pts[len(h.pts)-1].value, Level: level, Delta: s.perf[i].Delta}
	}
	return out, nil
}

// SeriesByID finds the key of a series from its ID.
func (db *DB) SeriesByID(ctx context.Context, id string) (SeriesKey, bool, error) {
	s, err := db.snapshot(ctx)
	if err != nil {
		return SeriesKey{}, false, err
	}
	for _, h := range s.series {
		if h.key.ID() == id {
			return h.key, true, nil
		}
	}
	return SeriesKey{}, false, nil
}

// Series is one series' history with change points and the latest comparison. An unknown key
// gives a Series with no points.
func (db *DB) Series(ctx context.Context, key SeriesKey) (Series, error) {
	ix, err := db.loadRuns(ctx)
	if err != nil {
		return Series{}, err
	}
	hs, err := db.loadSeries(ctx, ix, &key)
	if err != nil {
		return Series{}, err
	}
	if len(hs) == 0 {
		return db.buildSeries(&seriesHist{key: key}, ix), nil
	}
	return db.buildSeries(hs[0], ix), nil
}

// AllSeries is Series for every series, read in one pass (static exports, the analysis
// benchmark).
func (db *DB) AllSeries(ctx context.Context) ([]Series, error) {
	s, err := db.snapshot(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]Series, len(s.series))
	for i, h := range s.series {
		out[i] = db.buildSeries(h, s.runs)
	}
	return out, nil
}

func (db *DB) buildSeries(h *seriesHist, ix *runIndex) Series {
	key := h.key
	out := Series{Key: key, ID: key.ID(), Thresholds: db.cfg.ThresholdsFor(key), Points: []SeriesPoint{},
		ChangePoints: []int{}, Segments: []Segment{}, Resets: []Ack{}, Acks: []Ack{}}
	for _, a := range ix.acks {
		switch {
		case a.Kind == AckBaseline && a.Target == out.ID:
			out.Resets = append(out.Resets, ackOf(a))
		case a.Kind == AckPerf && a.Target == out.ID:
			out.Acks = append(out.Acks, ackOf(a))
		}
	}
	if len(h.pts) == 0 {
		return out
	}
	out.Unit = h.unit
	values := make([]float64, len(h.pts))
	for i, p := range h.pts {
		values[i] = p.value
		out.Points = append(out.Points, SeriesPoint{Run: runRef(ix.runs[p.run]), Value: p.value, Samples: p.samples, Unit: h.unit})
	}
	cps := stats.ChangePoints(values, stats.CPOptions{MinSeg: minSegment, MinShift: out.Thresholds.MinEffect})
	for _, c := range cps {
		out.Points[c].ChangePoint = true
		out.ChangePoints = append(out.ChangePoints, c)
	}
	for _, sg := range stats.Segments(values, cps) {
		out.Segments = append(out.Segments, Segment{From: sg.From, To: sg.To, Level: sg.Mean})
	}
	latest, base := db.latest(h, ix)
	out.Latest = latest
	for _, b := range base {
		out.Points[b].InBaseline = true
	}
	if len(base) > 0 {
		out.BaselineFrom, out.BaselineTo = base[0], base[len(base)-1]+1
	}
	return out
}
