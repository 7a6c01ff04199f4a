package dashboard

import (
	"html/template"
	"math"
	"strconv"
	"time"

	"github.com/tessera-qa/tessera-qa/report"
)

// funcs are the template helpers. They return plain strings: html/template escapes them
// where they land like any other value.
var funcs = template.FuncMap{
	"pct":       fmtPct,
	"delta":     fmtDelta,
	"num":       fmtNum,
	"value":     fmtValue,
	"when":      fmtTime,
	"day":       func(t time.Time) string { return t.UTC().Format("Jan 2") },
	"commit":    shortCommit,
	"digest":    shortDigest,
	"ms":        fmtMS,
	"levelText": levelText,
	"reproText": reproText,
	"pvalue":    func(p float64) string { return strconv.FormatFloat(p, 'g', 2, 64) },
	"seriesURL": func(id string) string { return seriesPage(id) },
	"navItems":  func() []navItem { return nav },
}

type navItem struct{ File, Label string }

// nav is the tab bar of every page.
var nav = []navItem{{PageOverview, "Overview"}, {PageSeries, "Benchmarks"}, {PageRepro, "Reproducibility"},
	{PageFlaky, "Flaky"}, {PageMetrics, "Chaos, stress, partitions, compile"}, {PageCollectives, "Collectives"}, {PageNodes, "Nodes"}}

func fmtPct(d float64) string {
	if d >= math.MaxFloat64/2 {
		return "+inf%"
	}
	return strconv.FormatFloat(d*100, 'f', 1, 64) + "%"
}

// fmtDelta is fmtPct with a sign: "+25.0%".
func fmtDelta(d float64) string {
	if d >= 0 {
		return "+" + fmtPct(d)
	}
	return fmtPct(d)
}

func fmtNum(v float64) string {
	a := math.Abs(v)
	switch {
	case v == 0:
		return "0"
	case a >= 1e6 || a < 1e-3:
		return strconv.FormatFloat(v, 'e', 3, 64)
	case a >= 100:
		return strconv.FormatFloat(v, 'f', 1, 64)
	case a >= 10:
		return strconv.FormatFloat(v, 'f', 2, 64)
	}
	// Three decimals: a 0.3% change of a ratio near 1 stays visible.
	return strconv.FormatFloat(v, 'f', 3, 64)
}

func fmtValue(v float64, unit string) string {
	switch unit {
	case "ratio":
		return fmtNum(v) + "x"
	case "":
		return fmtNum(v)
	}
	return fmtNum(v) + " " + unit
}

func fmtMS(ms float64) string {
	if ms >= 1000 {
		return strconv.FormatFloat(ms/1000, 'f', 1, 64) + " s"
	}
	return strconv.FormatFloat(ms, 'f', 0, 64) + " ms"
}

func fmtTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format("2006-01-02 15:04 UTC")
}

func shortCommit(c string) string {
	if len(c) > 10 {
		return c[:10]
	}
	return c
}

func shortDigest(d string) string {
	if len(d) > 12 {
		return d[:12]
	}
	return d
}

// levelText is what a level reads as in a badge.
func levelText(level string) string {
	switch level {
	case report.LevelBlock:
		return "BLOCK"
	case report.LevelWarn:
		return "warn"
	case report.LevelImproved:
		return "faster"
	case report.LevelNoBaseline:
		return "no baseline"
	case report.LevelOK:
		return "ok"
	}
	return level
}

func reproText(status string) string {
	switch status {
	case report.ReproStable:
		return "stable"
	case report.ReproNewDigest:
		return "NEW DIGEST"
	case report.ReproAcked:
		return "acked"
	case report.ReproUntracked:
		return "untracked"
	}
	return status
}
