package dashboard

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/tessera-qa/tessera-qa/report"
)

// chart is an SVG line chart laid out in Go, with every coordinate already in pixels, so the
// template (templates/chart.html) only places elements and escapes text. Text fields hold
// raw strings from the store; only the template turns them into markup.
type chart struct {
	W, H           int
	Title          string // the chart's accessible name
	Plot           box
	XTicks, YTicks []tick
	XLabel, YLabel string
	YLabelX        string  // where the rotated y label sits
	Bands          []band  // shaded x ranges (baseline window, regression)
	Levels         []seg   // fitted levels between change points
	Whiskers       []seg   // min-max of each run's repetitions
	Marks          []mark  // change points
	Line           string  // the series as polyline points
	Points         []point // one per run
	Notes          []note
}

// box is the plotting area; TickY is where the x axis' tick marks end.
type box struct{ X, Y, W, H, Right, Bottom, TickY string }

type tick struct{ Pos, Label string }

type band struct{ X, W, Class, Label, LabelX string }

type seg struct{ X1, Y1, X2, Y2, Class string }

type mark struct{ X, Label, Class string }

type point struct{ X, Y, R, Class, Title string }

type note struct{ X, Y, Text, Class, Anchor string }

// plotIn is what any of the line charts is drawn from.
type plotIn struct {
	w, h           int
	title          string
	values         []float64
	lows, highs    []float64 // per point, NaN where there is no spread; nil for none
	times          []time.Time
	titles         []string // tooltip per point
	pointClass     func(i int) string
	yLabel, xLabel string
}

// layout is a chart's frame: its scales and the parts every line chart shares.
type layout struct {
	c   chart
	x   func(i int) float64 // center of point i
	gap float64             // distance between two points
	y   linear
	top float64 // of the plotting area
}

func newLayout(in plotIn, extraY []float64) layout {
	const left, right, top, bottom = 72.0, 28.0, 40.0, 56.0
	W, H := float64(in.w), float64(in.h)
	pw, ph := W-left-right, H-top-bottom
	n := max(len(in.values), 1)
	gap := pw / float64(n)
	l := layout{gap: gap, top: top}
	l.x = func(i int) float64 { return left + (float64(i)+0.5)*gap }

	lo, hi := math.Inf(1), math.Inf(-1)
	for _, vs := range [][]float64{in.values, extraY} {
		for _, v := range vs {
			if !math.IsNaN(v) && !math.IsInf(v, 0) {
				lo, hi = math.Min(lo, v), math.Max(hi, v)
			}
		}
	}
	if lo > hi {
		lo, hi = 0, 1
	}
	// A little air above and below, so the extreme points are not drawn on the frame.
	pad := (hi - lo) * 0.08
	d0, d1, ticks := niceRange(lo-pad, hi+pad, 5)
	l.y = linear{d0: d0, d1: d1, p0: top + ph, p1: top}
	step := 1.0
	if len(ticks) > 1 {
		step = ticks[1] - ticks[0]
	}
	c := chart{W: in.w, H: in.h, Title: in.title, XLabel: in.xLabel, YLabel: clip(in.yLabel, 48),
		Plot:    box{X: px(left), Y: px(top), W: px(pw), H: px(ph), Right: px(left + pw), Bottom: px(top + ph), TickY: px(top + ph + 5)},
		YLabelX: px(18)}
	for _, t := range ticks {
		c.YTicks = append(c.YTicks, tick{Pos: px(l.y.at(t)), Label: tickLabel(t, step)})
	}
	for _, i := range xTickIndexes(len(in.values), 9) {
		label := ""
		if i < len(in.times) {
			label = in.times[i].UTC().Format("Jan 2")
		}
		c.XTicks = append(c.XTicks, tick{Pos: px(l.x(i)), Label: label})
	}
	l.c = c
	return l
}

// xTickIndexes picks at most n evenly spaced points to label, always including the newest.
func xTickIndexes(count, n int) []int {
	if count == 0 {
		return nil
	}
	every := (count + n - 1) / n
	var out []int
	for i := (count - 1) % every; i < count; i += every {
		out = append(out, i)
	}
	return out
}

// drawPoints adds the polyline, the whiskers and a circle per point.
func (l *layout) drawPoints(in plotIn) {
	var sb strings.Builder
	r := math.Max(1.6, math.Min(4, l.gap/3))
	for i, v := range in.values {
		x, y := l.x(i), l.y.at(v)
		if i > 0 {
			sb.WriteByte(' ')
		}
		sb.WriteString(px(x) + "," + px(y))
		if in.lows != nil && i < len(in.lows) && !math.IsNaN(in.lows[i]) && in.highs[i] > in.lows[i] {
			l.c.Whiskers = append(l.c.Whiskers, seg{X1: px(x), X2: px(x), Y1: px(l.y.clamp(l.y.at(in.lows[i]))),
				Y2: px(l.y.clamp(l.y.at(in.highs[i]))), Class: "whisker"})
		}
		class := "pt"
		if in.pointClass != nil {
			class = in.pointClass(i)
		}
		title := ""
		if i < len(in.titles) {
			title = in.titles[i]
		}
		l.c.Points = append(l.c.Points, point{X: px(x), Y: px(y), R: px(r), Class: class, Title: title})
	}
	l.c.Line = sb.String()
}

// between is the x halfway between point i-1 and point i: where a new level starts.
func (l *layout) between(i int) float64 { return l.x(i) - l.gap/2 }

// seriesChart draws one benchmark series: each run's median with the spread of its
// repetitions, the fitted level of each segment, change points, the baseline window the
// latest run was judged against, and the latest run's verdict when it is a regression.
func seriesChart(s report.Series, w, h int) chart {
	n := len(s.Points)
	in := plotIn{w: w, h: h, title: "history of " + s.Key.String(), yLabel: unitLabel(s.Unit),
		xLabel: fmt.Sprintf("runs, oldest to newest (%d)", n)}
	in.lows, in.highs = make([]float64, n), make([]float64, n)
	for i, p := range s.Points {
		in.values = append(in.values, p.Value)
		in.times = append(in.times, p.Run.Time)
		in.lows[i], in.highs[i] = spread(p.Samples)
		in.titles = append(in.titles, fmt.Sprintf("%s  %s  %s: %s", p.Run.Time.UTC().Format("2006-01-02 15:04"),
			shortCommit(p.Run.Commit), p.Run.Branch, fmtValue(p.Value, s.Unit)))
	}
	var extra []float64
	for _, sg := range s.Segments {
		extra = append(extra, sg.Level)
	}
	if s.Latest.BaselineMedian > 0 {
		extra = append(extra, s.Latest.BaselineMedian)
	}
	extra = append(extra, whiskerRange(in.values, in.lows, in.highs)...)
	l := newLayout(in, extra)
	regressed := isRegression(s.Latest)
	// The regression stretch: from the last change point (or the latest run alone) to the end.
	// The baseline window may already hold the first slow runs (it is the runs before the
	// latest), so the stretch starts at the last upward change point, not after the window.
	hlFrom := -1
	if regressed && n > 0 {
		hlFrom = n - 1
		if k := len(s.ChangePoints); k > 0 {
			if d, ok := levelShift(s.Segments, s.ChangePoints[k-1]); ok && d > 0 {
				hlFrom = s.ChangePoints[k-1]
			}
		}
	}
	in.pointClass = func(i int) string {
		switch {
		case hlFrom >= 0 && i >= hlFrom:
			return "pt bad " + s.Latest.Level
		case s.Points[i].InBaseline:
			return "pt base"
		}
		return "pt"
	}
	if s.BaselineTo > s.BaselineFrom {
		x0, x1 := l.between(s.BaselineFrom), l.between(s.BaselineTo)
		l.c.Bands = append(l.c.Bands, band{X: px(x0), W: px(x1 - x0), Class: "band-base",
			Label: fmt.Sprintf("baseline: %d runs", s.BaselineTo-s.BaselineFrom), LabelX: px((x0 + x1) / 2)})
	}
	if hlFrom >= 0 {
		x0, x1 := l.between(hlFrom), l.between(n)
		l.c.Bands = append(l.c.Bands, band{X: px(x0), W: px(x1 - x0), Class: "band-" + s.Latest.Level})
	}
	for _, sg := range s.Segments {
		if sg.To <= sg.From {
			continue
		}
		y := px(l.y.at(sg.Level))
		l.c.Levels = append(l.c.Levels, seg{X1: px(l.between(sg.From)), X2: px(l.between(sg.To)), Y1: y, Y2: y, Class: "level"})
	}
	for _, cp := range s.ChangePoints {
		label := "change"
		if d, ok := levelShift(s.Segments, cp); ok {
			label = fmt.Sprintf("change %+.1f%%", d*100)
		}
		l.c.Marks = append(l.c.Marks, mark{X: px(l.between(cp)), Label: label, Class: "cp"})
	}
	l.drawPoints(in)
	if regressed && n > 0 {
		last := l.c.Points[n-1]
		last.R = px(math.Max(5, l.gap/2.5))
		l.c.Points[n-1] = last
		l.c.Notes = append(l.c.Notes, note{X: px(l.x(n-1) - 10), Y: px(l.top + 14), Anchor: "end",
			Class: "note " + s.Latest.Level,
			Text:  fmt.Sprintf("%s %+.1f%% vs baseline", strings.ToUpper(s.Latest.Level), s.Latest.Delta*100)})
	}
	return l.c
}

// metricChart draws one chaos/stress metric over runs; failing runs are red.
func metricChart(name string, rows []report.MetricRow, w, h int) chart {
	unit := ""
	in := plotIn{w: w, h: h, title: name, xLabel: fmt.Sprintf("runs, oldest to newest (%d)", len(rows))}
	for _, r := range rows {
		// Byte counts (the stress leak monitors) are drawn in MiB: tick labels of 2.2e+09
		// do not fit the axis and are hard to read. The table keeps the bytes.
		v, u := r.Value, r.Unit
		if rest, ok := strings.CutPrefix(u, "bytes"); ok {
			v, u = v/(1<<20), "MiB"+rest
		}
		in.values = append(in.values, v)
		in.times = append(in.times, r.Run.Time)
		in.titles = append(in.titles, fmt.Sprintf("%s  %s: %s %s %s", r.Run.Time.UTC().Format("2006-01-02 15:04"),
			shortCommit(r.Run.Commit), fmtNum(v), u, r.Verdict))
		unit = u
	}
	in.yLabel = unit
	in.pointClass = func(i int) string {
		if rows[i].Verdict == "fail" {
			return "pt bad block"
		}
		return "pt"
	}
	l := newLayout(in, nil)
	l.drawPoints(in)
	return l.c
}

// spark is a small chart without axes for tables: the shape of the series and its latest run.
type spark struct {
	W, H  int
	Line  string
	Last  point
	Title string
}

func sparkline(s report.Series, w, h int) spark {
	sp := spark{W: w, H: h, Title: s.Key.String()}
	if len(s.Points) == 0 {
		return sp
	}
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, p := range s.Points {
		lo, hi = math.Min(lo, p.Value), math.Max(hi, p.Value)
	}
	y := linear{d0: lo, d1: hi, p0: float64(h) - 3, p1: 3}
	gap := (float64(w) - 6) / float64(max(len(s.Points)-1, 1))
	var sb strings.Builder
	for i, p := range s.Points {
		if i > 0 {
			sb.WriteByte(' ')
		}
		sb.WriteString(px(3+float64(i)*gap) + "," + px(y.at(p.Value)))
	}
	sp.Line = sb.String()
	last := s.Points[len(s.Points)-1]
	sp.Last = point{X: px(3 + float64(len(s.Points)-1)*gap), Y: px(y.at(last.Value)), R: "2.5",
		Class: "pt bad " + s.Latest.Level}
	return sp
}

// spread is the range of a run's repetitions (NaN, NaN without any).
func spread(xs []float64) (float64, float64) {
	if len(xs) == 0 {
		return math.NaN(), math.NaN()
	}
	lo, hi := xs[0], xs[0]
	for _, x := range xs[1:] {
		lo, hi = math.Min(lo, x), math.Max(hi, x)
	}
	return lo, hi
}

// levelShift is the relative change of the fitted level at change point cp.
func levelShift(segs []report.Segment, cp int) (float64, bool) {
	for i := 1; i < len(segs); i++ {
		if segs[i].From == cp && segs[i-1].Level != 0 {
			return segs[i].Level/segs[i-1].Level - 1, true
		}
	}
	return 0, false
}

func isRegression(p report.PerfRegression) bool {
	return p.Ack == nil && (p.Level == report.LevelBlock || p.Level == report.LevelWarn)
}

func unitLabel(unit string) string {
	switch unit {
	case "ratio":
		return "time / reference time (lower is better)"
	case "ms":
		return "milliseconds (lower is better)"
	case "":
		return "value"
	}
	return unit
}

// clip shortens a label that would run off the chart; the full text stays in the page.
func clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// whiskerRange is how far the y axis stretches for the repetitions' spread: all of it, but at
// most one median range (or 5% of the level) beyond the medians, so that one wild repetition
// cannot flatten the line a person reads. Whiskers beyond that are cut at the frame.
func whiskerRange(values, lows, highs []float64) []float64 {
	if len(values) == 0 {
		return nil
	}
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, v := range values {
		lo, hi = math.Min(lo, v), math.Max(hi, v)
	}
	span := math.Max(hi-lo, 0.05*math.Abs(hi))
	wlo, whi := lo, hi
	for i := range lows {
		if !math.IsNaN(lows[i]) {
			wlo, whi = math.Min(wlo, lows[i]), math.Max(whi, highs[i])
		}
	}
	return []float64{math.Max(wlo, lo-span), math.Min(whi, hi+span)}
}
