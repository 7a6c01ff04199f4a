package dashboard

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/tessera-qa/tessera-qa/report"
	"github.com/tessera-qa/tessera-qa/report/parse"
)

// The collectives page: busbw against message size, as nccl-tests users read it, from the
// metrics that `report ingest` makes of `tessera-qa collectives --json` (parse/collectives.go).
// One chart per op, dtype and reduction; one line per transport, mode and world, drawn from
// that line's latest run; a table with the numbers under each chart. Correctness of the same
// rows (#wrong, digests) is on the overview and reproducibility pages, suite "collectives".

type collectivesData struct {
	base
	Groups []collGroup
	Lines  int
}

// collGroup is one op, dtype and reduction.
type collGroup struct {
	ID, Title string
	Chart     xyChart
	Sizes     []string // table columns
	Lines     []collLine
}

// collLine is one transport, mode and world: its latest run.
type collLine struct {
	Label, Class string
	Run          report.RunRef
	Cells        []string // busbw per column of Sizes ("" where this line has no point)
	Failed       int      // failing rows in that run
	Runs         int      // runs that measured this line
}

// lineClasses color the lines (static/style.css); a chart with more lines reuses them.
const lineClasses = 8

func (s *Site) collectives(ctx context.Context) (collectivesData, error) {
	secs, err := s.db.Metrics(ctx, parse.CollectivesMetric)
	if err != nil {
		return collectivesData{}, err
	}
	d := collectivesData{base: s.base("Collectives", PageCollectives)}
	type point struct {
		size int64
		bw   float64
	}
	type line struct {
		collLine
		pts []point
	}
	groups := map[string][]*line{}
	var order []string
	for _, sec := range secs {
		op, dt, red, tr, mode, world, ok := parse.SplitCollectivesSeries(sec.Name)
		if !ok || len(sec.Rows) == 0 {
			continue
		}
		// Rows come in run order: keep the latest run's.
		last := sec.Rows[len(sec.Rows)-1].Run
		l := &line{collLine: collLine{Label: fmt.Sprintf("%s %s, %d ranks", tr, mode, world), Run: last}}
		runs := map[int64]bool{}
		for _, r := range sec.Rows {
			runs[r.Run.ID] = true
			size, ok := parse.BusBWSize(r.Metric)
			if r.Run.ID != last.ID || !ok || size <= 0 || math.IsNaN(r.Value) || math.IsInf(r.Value, 0) {
				continue
			}
			l.pts = append(l.pts, point{size, r.Value})
			if r.Verdict == "fail" {
				l.Failed++
			}
		}
		l.Runs = len(runs)
		sort.Slice(l.pts, func(i, j int) bool { return l.pts[i].size < l.pts[j].size })
		key := op + " " + dt + " " + red
		if red == "none" {
			key = op + " " + dt
		}
		if _, ok := groups[key]; !ok {
			order = append(order, key)
		}
		groups[key] = append(groups[key], l)
	}
	sort.Strings(order)
	for gi, key := range order {
		ls := groups[key]
		sort.SliceStable(ls, func(i, j int) bool { return ls[i].Label < ls[j].Label })
		g := collGroup{ID: "coll-" + strconv.Itoa(gi), Title: key}
		sizeSet := map[int64]bool{}
		var in []xyLine
		for i, l := range ls {
			l.Class = "s" + strconv.Itoa(i%lineClasses)
			xl := xyLine{Label: l.Label, Class: l.Class}
			for _, p := range l.pts {
				sizeSet[p.size] = true
				xl.xs = append(xl.xs, float64(p.size))
				xl.ys = append(xl.ys, p.bw)
				xl.titles = append(xl.titles, fmt.Sprintf("%s: %s, busbw %s GB/s", l.Label, sizeLabel(p.size), fmtNum(p.bw)))
			}
			in = append(in, xl)
		}
		var sizes []int64
		for sz := range sizeSet {
			sizes = append(sizes, sz)
		}
		sort.Slice(sizes, func(i, j int) bool { return sizes[i] < sizes[j] })
		col := map[int64]int{}
		for i, sz := range sizes {
			col[sz] = i
			g.Sizes = append(g.Sizes, sizeLabel(sz))
		}
		for _, l := range ls {
			l.Cells = make([]string, len(sizes))
			for _, p := range l.pts {
				l.Cells[col[p.size]] = fmtNum(p.bw)
			}
			g.Lines = append(g.Lines, l.collLine)
		}
		g.Chart = busbwChart("busbw against size: "+key, in, 960, 340)
		d.Lines += len(ls)
		d.Groups = append(d.Groups, g)
	}
	return d, nil
}

// sizeLabel writes a byte size the way nccl-tests' options take it: 64B, 4K, 1M, 1G.
func sizeLabel(b int64) string {
	for _, u := range []struct {
		n   int64
		suf string
	}{{1 << 30, "G"}, {1 << 20, "M"}, {1 << 10, "K"}} {
		if b >= u.n && b%u.n == 0 {
			return strconv.FormatInt(b/u.n, 10) + u.suf
		}
	}
	return strconv.FormatInt(b, 10) + "B"
}

// xyChart is a line chart over a numeric x axis (log2 of the size) with several lines, laid
// out in Go like chart; the template (templates/collectives.html) only places elements.
type xyChart struct {
	W, H           int
	Title          string
	Plot           box
	XTicks, YTicks []tick
	XLabel, YLabel string
	YLabelX        string
	Lines          []xyLine
}

type xyLine struct {
	Label, Class string
	Points       string  // polyline points
	Dots         []point // one per measurement, with a tooltip
	xs, ys       []float64
	titles       []string
}

// busbwChart lays out lines of (size, busbw) with sizes on a log2 axis.
func busbwChart(title string, lines []xyLine, w, h int) xyChart {
	const left, right, top, bottom = 72.0, 28.0, 24.0, 56.0
	W, H := float64(w), float64(h)
	pw, ph := W-left-right, H-top-bottom
	c := xyChart{W: w, H: h, Title: title, XLabel: "message size (bytes, log scale)", YLabel: "busbw (GB/s, higher is better)", YLabelX: px(18),
		Plot: box{X: px(left), Y: px(top), W: px(pw), H: px(ph), Right: px(left + pw), Bottom: px(top + ph), TickY: px(top + ph + 5)}}
	xlo, xhi, yhi := math.Inf(1), math.Inf(-1), 0.0
	for _, l := range lines {
		for i, x := range l.xs {
			xlo, xhi = math.Min(xlo, math.Log2(x)), math.Max(xhi, math.Log2(x))
			yhi = math.Max(yhi, l.ys[i])
		}
	}
	if xlo > xhi {
		xlo, xhi = 0, 1
	}
	if xhi-xlo < 1 {
		xlo, xhi = xlo-1, xhi+1
	}
	x := linear{d0: xlo, d1: xhi, p0: left + 8, p1: left + pw - 8}
	y0, y1, yticks := niceRange(0, yhi*1.08, 5)
	y := linear{d0: y0, d1: y1, p0: top + ph, p1: top}
	step := 1.0
	if len(yticks) > 1 {
		step = yticks[1] - yticks[0]
	}
	for _, t := range yticks {
		c.YTicks = append(c.YTicks, tick{Pos: px(y.at(t)), Label: tickLabel(t, step)})
	}
	// A tick every power of 2, 4, 16 ... so that at most about 10 are labelled.
	every := 1
	for (xhi-xlo)/float64(every) > 10 {
		every *= 2
	}
	for k := int(math.Ceil(xlo)); float64(k) <= xhi; k++ {
		if k%every == 0 {
			c.XTicks = append(c.XTicks, tick{Pos: px(x.at(float64(k))), Label: sizeLabel(int64(1) << max(k, 0))})
		}
	}
	for _, l := range lines {
		var sb strings.Builder
		for i, xv := range l.xs {
			px0, py0 := x.at(math.Log2(xv)), y.at(l.ys[i])
			if i > 0 {
				sb.WriteByte(' ')
			}
			sb.WriteString(px(px0) + "," + px(py0))
			l.Dots = append(l.Dots, point{X: px(px0), Y: px(py0), R: "3", Class: "pt " + l.Class, Title: l.titles[i]})
		}
		l.Points = sb.String()
		c.Lines = append(c.Lines, l)
	}
	return c
}
