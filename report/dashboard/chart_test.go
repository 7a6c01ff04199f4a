package dashboard

import (
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tessera-qa/tessera-qa/report"
)

func TestNiceRange(t *testing.T) {
	for _, c := range []struct {
		lo, hi         float64
		wantLo, wantHi float64
		wantTicks      string
	}{
		{0.93, 1.27, 0.9, 1.3, "0.9 1 1.1 1.2 1.3"},
		{0, 97, 0, 100, "0 20 40 60 80 100"},
		{5, 5, 4.7, 5.3, "4.7 4.8 4.9 5 5.1 5.2 5.3"},
		{0, 0, -1, 1, "-1 -0.5 0 0.5 1"},
		{0.1, 0.3, 0.1, 0.3, "0.1 0.15 0.2 0.25 0.3"},
		{math.NaN(), 1, 0, 1, "0 0.2 0.4 0.6 0.8 1"},
	} {
		lo, hi, ticks := niceRange(c.lo, c.hi, 5)
		var s []string
		for _, v := range ticks {
			s = append(s, strconv.FormatFloat(v, 'g', -1, 64))
		}
		if lo != c.wantLo || hi != c.wantHi || strings.Join(s, " ") != c.wantTicks {
			t.Errorf("niceRange(%g, %g) = %g, %g, [%s]; want %g, %g, [%s]", c.lo, c.hi, lo, hi, strings.Join(s, " "), c.wantLo, c.wantHi, c.wantTicks)
		}
	}
}

func TestXTicksAlwaysLabelTheNewestRun(t *testing.T) {
	for _, n := range []int{1, 2, 9, 10, 30, 200, 1001} {
		ix := xTickIndexes(n, 9)
		if len(ix) == 0 || len(ix) > 9 || ix[len(ix)-1] != n-1 {
			t.Errorf("xTickIndexes(%d) = %v", n, ix)
		}
	}
}

// A slowdown at point 7 of 10, baseline window [2, 9): the chart must put the change mark
// between points 6 and 7, shade the window and the regression, and flag the latest point.
func TestSeriesChartGeometry(t *testing.T) {
	s := report.Series{Key: report.SeriesKey{Benchmark: "mm"}, Unit: "ratio", ChangePoints: []int{7},
		Segments:     []report.Segment{{From: 0, To: 7, Level: 1}, {From: 7, To: 10, Level: 1.25}},
		BaselineFrom: 2, BaselineTo: 9,
		Latest: report.PerfRegression{Level: report.LevelBlock, Delta: 0.2, BaselineMedian: 1.02}}
	for i := 0; i < 10; i++ {
		v := 1.0
		if i >= 7 {
			v = 1.25
		}
		s.Points = append(s.Points, report.SeriesPoint{Value: v, Samples: []float64{v - 0.01, v + 0.01},
			Run: report.RunRef{Time: time.Date(2026, 1, 1+i, 0, 0, 0, 0, time.UTC)}, InBaseline: i >= 2 && i < 9})
	}
	c := seriesChart(s, 960, 380)
	x := func(p point) float64 { v, _ := strconv.ParseFloat(p.X, 64); return v }
	f := func(s string) float64 { v, _ := strconv.ParseFloat(s, 64); return v }
	if len(c.Points) != 10 || len(c.Whiskers) != 10 || len(c.Levels) != 2 || len(c.Marks) != 1 {
		t.Fatalf("points %d whiskers %d levels %d marks %d", len(c.Points), len(c.Whiskers), len(c.Levels), len(c.Marks))
	}
	if m := f(c.Marks[0].X); !(m > x(c.Points[6]) && m < x(c.Points[7])) || !strings.Contains(c.Marks[0].Label, "+25.0%") {
		t.Errorf("change mark at %v (%q), want between %v and %v, +25.0%%", m, c.Marks[0].Label, x(c.Points[6]), x(c.Points[7]))
	}
	if len(c.Bands) != 2 || c.Bands[0].Class != "band-base" || c.Bands[1].Class != "band-block" {
		t.Fatalf("bands %+v", c.Bands)
	}
	base, bad := c.Bands[0], c.Bands[1]
	if f(base.X) > x(c.Points[2]) || f(base.X) < x(c.Points[1]) || f(base.X)+f(base.W) < x(c.Points[8]) || f(base.X)+f(base.W) > x(c.Points[9]) {
		t.Errorf("baseline band [%s +%s] does not cover points 2..8", base.X, base.W)
	}
	if f(bad.X) > x(c.Points[7]) || f(bad.X) < x(c.Points[6]) {
		t.Errorf("regression band starts at %s, want at the change point", bad.X)
	}
	for i, p := range c.Points {
		if bad := strings.Contains(p.Class, "bad block"); bad != (i >= 7) {
			t.Errorf("point %d class %q", i, p.Class)
		}
	}
	if len(c.Notes) != 1 || !strings.Contains(c.Notes[0].Text, "BLOCK +20.0%") {
		t.Errorf("notes %+v", c.Notes)
	}
	// Higher values are drawn higher: y grows downwards on screen.
	if f(c.Points[9].Y) >= f(c.Points[0].Y) {
		t.Errorf("the slower point is not above the faster one")
	}
	// Every label of the y axis is inside the drawing.
	for _, tk := range c.YTicks {
		if y := f(tk.Pos); y < 0 || y > 380 {
			t.Errorf("y tick %q at %v", tk.Label, y)
		}
	}
}

func TestAckedRegressionIsNotHighlighted(t *testing.T) {
	s := report.Series{Unit: "ms", Points: []report.SeriesPoint{{Value: 1}, {Value: 2}},
		Latest: report.PerfRegression{Level: report.LevelBlock, Delta: 1, Ack: &report.Ack{Reason: "expected"}}}
	c := seriesChart(s, 400, 200)
	if len(c.Notes) != 0 || len(c.Bands) != 0 || strings.Contains(c.Points[1].Class, "bad") {
		t.Errorf("an acknowledged regression is drawn as open: %+v %+v", c.Notes, c.Bands)
	}
}
