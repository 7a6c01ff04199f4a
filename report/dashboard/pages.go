package dashboard

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/tessera-qa/tessera-qa/report"
)

// base is what the layout of every page reads.
type base struct {
	Title     string
	Nav       string // the page file of the current tab
	Generated time.Time
}

func (s *Site) base(title, nav string) base {
	return base{Title: title, Nav: nav, Generated: s.now().UTC()}
}

// sparkLimit bounds the sparklines on the overview: each costs a series read.
const sparkLimit = 12

type overviewData struct {
	base
	Ov         report.Overview
	Suites     []suiteRow
	OpenPerf   []perfRow
	Blocking   int
	Recent     []report.RunRef
	Chaos      int // metric sections ingested
	Stress     int
	Partitions int
	FlakyTop   []report.FlakySpec
	FlakyMore  int
}

type suiteRow struct {
	report.SuiteStatus
	Bar []barPart
}

// barPart is one colored stretch of a suite's pass/fail bar (widths in percent of 200 px).
type barPart struct {
	X, W  string
	Class string
	Title string
}

type perfRow struct {
	report.PerfRegression
	Spark *spark
}

func (s *Site) overview(ctx context.Context) (overviewData, error) {
	ov, err := s.db.Overview(ctx)
	if err != nil {
		return overviewData{}, err
	}
	d := overviewData{base: s.base("Overview", PageOverview), Ov: ov}
	for _, st := range ov.Suites {
		d.Suites = append(d.Suites, suiteRow{SuiteStatus: st, Bar: suiteBar(st, 200)})
	}
	for i, p := range ov.OpenPerf {
		r := perfRow{PerfRegression: p}
		if p.Level == report.LevelBlock {
			d.Blocking++
		}
		if i < sparkLimit {
			ser, err := s.db.Series(ctx, p.Key)
			if err != nil {
				return overviewData{}, err
			}
			sp := sparkline(ser, 160, 34)
			r.Spark = &sp
		}
		d.OpenPerf = append(d.OpenPerf, r)
	}
	d.Blocking += len(ov.OpenRepro)
	if d.Recent, err = s.db.Runs(ctx, 8); err != nil {
		return overviewData{}, err
	}
	for kind, n := range map[string]*int{"chaos": &d.Chaos, "stress": &d.Stress, "partitions": &d.Partitions} {
		secs, err := s.db.Metrics(ctx, kind)
		if err != nil {
			return overviewData{}, err
		}
		*n = len(secs)
	}
	d.FlakyTop = ov.Flaky
	if len(d.FlakyTop) > 5 {
		d.FlakyTop, d.FlakyMore = d.FlakyTop[:5], len(d.FlakyTop)-5
	}
	return d, nil
}

func suiteBar(st report.SuiteStatus, width float64) []barPart {
	total := float64(st.Total)
	if total == 0 {
		return nil
	}
	var out []barPart
	x := 0.0
	for _, p := range []struct {
		n     int
		class string
		what  string
	}{{st.Pass, "pass", "passed"}, {st.Fail, "fail", "failed"}, {st.Error, "error", "errors"}, {st.Skip, "skip", "skipped"}} {
		if p.n == 0 {
			continue
		}
		w := width * float64(p.n) / total
		out = append(out, barPart{X: px(x), W: px(w), Class: p.class, Title: fmt.Sprintf("%d %s", p.n, p.what)})
		x += w
	}
	return out
}

type seriesIndexData struct {
	base
	Rows   []report.SeriesSummary
	Counts map[string]int // by level
}

// levelOrder sorts the series index: what needs a person first.
var levelOrder = map[string]int{report.LevelBlock: 0, report.LevelWarn: 1, report.LevelImproved: 2,
	report.LevelOK: 3, report.LevelNoBaseline: 4}

func (s *Site) seriesIndex(ctx context.Context) (seriesIndexData, error) {
	rows, err := s.db.SeriesIndex(ctx)
	if err != nil {
		return seriesIndexData{}, err
	}
	rows = append([]report.SeriesSummary(nil), rows...)
	sort.SliceStable(rows, func(i, j int) bool {
		a, b := levelOrder[rows[i].Level], levelOrder[rows[j].Level]
		if a != b {
			return a < b
		}
		if a <= 1 {
			return rows[i].Delta > rows[j].Delta
		}
		return rows[i].Key.String() < rows[j].Key.String()
	})
	d := seriesIndexData{base: s.base("Benchmark series", PageSeries), Rows: rows, Counts: map[string]int{}}
	for _, r := range rows {
		d.Counts[r.Level]++
	}
	return d, nil
}

type seriesData struct {
	base
	S       report.Series
	Chart   chart
	Changes []changeRow
	Recent  []report.SeriesPoint // newest first
	Regress bool
	// Kernels: for a regression of a profiled series, the per-kernel diff between the
	// baseline window and the latest run (which kernel got slower).
	Kernels []report.KernelDelta
}

type changeRow struct {
	Index         int
	Run           report.RunRef
	Before, After float64
	Shift         float64
}

func (s *Site) series(ctx context.Context, key report.SeriesKey) (seriesData, error) {
	ser, err := s.db.Series(ctx, key)
	if err != nil {
		return seriesData{}, err
	}
	d := seriesData{base: s.base(key.String(), PageSeries), S: ser, Chart: seriesChart(ser, 960, 380),
		Regress: isRegression(ser.Latest)}
	for i := 1; i < len(ser.Segments); i++ {
		a, b := ser.Segments[i-1], ser.Segments[i]
		if b.From >= len(ser.Points) {
			continue
		}
		sh, _ := levelShift(ser.Segments, b.From)
		d.Changes = append(d.Changes, changeRow{Index: b.From, Run: ser.Points[b.From].Run, Before: a.Level, After: b.Level, Shift: sh})
	}
	for i := len(ser.Points) - 1; i >= 0; i-- {
		d.Recent = append(d.Recent, ser.Points[i])
	}
	if d.Regress && ser.BaselineTo > ser.BaselineFrom && len(ser.Points) > 0 {
		var base []int64
		for _, p := range ser.Points[ser.BaselineFrom:ser.BaselineTo] {
			base = append(base, p.Run.ID)
		}
		if d.Kernels, err = s.db.KernelDiff(ctx, key, base, []int64{ser.Points[len(ser.Points)-1].Run.ID}); err != nil {
			return seriesData{}, err
		}
	}
	return d, nil
}

type reproData struct {
	base
	M       report.ReproMatrix
	Rows    []reproRow
	Counts  map[string]int
	Acked   []report.ReproCell
	Classes []string
}

type reproRow struct {
	Case  string
	Cells []*report.ReproCell // one per device class; nil: no result there
	Bad   bool
}

func (s *Site) repro(ctx context.Context) (reproData, error) {
	m, err := s.db.ReproMatrix(ctx)
	if err != nil {
		return reproData{}, err
	}
	d := reproData{base: s.base("Reproducibility", PageRepro), M: m, Counts: map[string]int{}, Classes: m.DeviceClasses}
	col := map[string]int{}
	for i, c := range m.DeviceClasses {
		col[c] = i
	}
	row := map[string]int{}
	for _, c := range m.Cases {
		row[c] = len(d.Rows)
		d.Rows = append(d.Rows, reproRow{Case: c, Cells: make([]*report.ReproCell, len(m.DeviceClasses))})
	}
	for i := range m.Cells {
		c := &m.Cells[i]
		r, ok1 := row[c.Case]
		k, ok2 := col[c.Key.DeviceClass]
		if !ok1 || !ok2 {
			continue
		}
		d.Rows[r].Cells[k] = c
		d.Counts[c.Status]++
		if c.Status == report.ReproNewDigest {
			d.Rows[r].Bad = true
		}
		if c.Status == report.ReproAcked {
			d.Acked = append(d.Acked, *c)
		}
	}
	// Rows with a new digest first: on a matrix of hundreds of cases they would be lost.
	sort.SliceStable(d.Rows, func(i, j int) bool { return d.Rows[i].Bad && !d.Rows[j].Bad })
	return d, nil
}

type flakyData struct {
	base
	Flaky []report.FlakySpec
	// Runs and Results say what "no flaky specs" was judged over (a fresh store's one run
	// reads differently from a year of nightlies).
	Runs, Results int
}

func (s *Site) flaky(ctx context.Context) (flakyData, error) {
	f, err := s.db.Flaky(ctx)
	if err != nil {
		return flakyData{}, err
	}
	ov, err := s.db.Overview(ctx)
	if err != nil {
		return flakyData{}, err
	}
	return flakyData{base: s.base("Flaky specs", PageFlaky), Flaky: f, Runs: ov.Runs, Results: ov.Results}, nil
}

type metricsData struct {
	base
	Kinds []metricKind
}

type metricKind struct {
	Kind, Title, About string
	// Empty says, while the store has none, what would fill the part: a reader of a fresh
	// store (after one `tessera-qa run`) learns whether it is missing or not measured here.
	Empty string
	Note  string // a caveat shown under About (partitions: what green contexts share)
	// Groups, when set, sort a section's charts under titled groups; a metric no group takes
	// is in the section's table only. Without groups every metric gets a chart.
	Groups   []chartGroupSpec
	Sections []metricSection
}

type chartGroupSpec struct {
	ID, Title string
	Takes     func(metric string) bool
}

type metricSection struct {
	report.MetricSection
	Groups []chartGroup
}

// chartGroup is a titled run of charts in a section ("" title: the kind's only group).
type chartGroup struct {
	ID, Title string
	Charts    []chart // one per metric name
}

// stressGroups are the stress charts a reader looks for (issue 12): interference first, then
// the leak monitors' slopes, then latency alone vs under load, then the pressure modes.
// Growth rows stay in the table: the slope tells the trend, growth only the end points.
var stressGroups = []chartGroupSpec{
	{ID: "health", Title: "Mismatches, errors, leaks and throughput", Takes: func(m string) bool {
		return m == "mismatches" || m == "errors" || m == "leaks" || m == "graphs_per_s"
	}},
	{ID: "leak-slopes", Title: "Leak slopes (worst source, per minute)", Takes: func(m string) bool { return strings.HasSuffix(m, " slope") }},
	{ID: "latency", Title: "Latency alone vs under load (the job slowest under load)", Takes: func(m string) bool { return strings.HasPrefix(m, "latency ") }},
	{ID: "pressure", Title: "Pressure modes", Takes: func(m string) bool { return strings.HasPrefix(m, "oom ") || strings.HasPrefix(m, "cache ") }},
}

// partitionsGroups: the metrics of parse/partitions.go, one chart per pair or SM count.
var partitionsGroups = []chartGroupSpec{
	{ID: "interference", Title: "A's throughput next to B, as a fraction of alone (1: no interference)", Takes: func(m string) bool { return strings.Contains(m, " next to ") }},
	{ID: "golden", Title: "Golden catalogue specs whose bits differ from the whole GPU's (0: same bits)", Takes: func(m string) bool { return strings.HasSuffix(m, "from the whole GPU") }},
}

// compileGroups: the metrics of parse/ptxas.go, one chart per code path and measure.
var compileGroups = []chartGroupSpec{
	{ID: "ptx-size", Title: "PTX a module (KB): what the driver's JIT reads", Takes: func(m string) bool { return strings.HasSuffix(m, ": PTX a module") }},
	{ID: "registers", Title: "Registers of the hungriest entry (occupancy falls past 64, 128)", Takes: func(m string) bool { return strings.HasSuffix(m, ": registers (most)") }},
	{ID: "spills", Title: "Bytes spilled to local memory (0 wanted)", Takes: func(m string) bool { return strings.HasSuffix(m, ": bytes spilled") }},
	{ID: "ptxas-time", Title: "ptxas time a module (ms; moves with the machine too)", Takes: func(m string) bool { return strings.HasSuffix(m, ": ptxas a module") }},
}

// partitionsNote is said wherever interference ratios are shown: they measure shared
// resources, not a failure of SM isolation (design.md §10).
const partitionsNote = "Green contexts isolate SMs only: memory bandwidth and L2 are shared, so a ratio below 1 where both neighbours stream memory is expected, not an isolation failure."

func (s *Site) metrics(ctx context.Context) (metricsData, error) {
	d := metricsData{base: s.base("Chaos, stress, partitions and compile cost", PageMetrics)}
	for _, k := range []metricKind{
		{Kind: "chaos", Title: "Chaos", About: "fault injection scenarios: recovery time, lost work, verdict per run",
			Empty: "tessera-qa run (its chaos suite) stores them, and so does report ingest of tessera-qa chaos --json FILE"},
		{Kind: "stress", Title: "Stress", About: "concurrent workloads and soaks (tessera-qa stress --json): mismatches, leak slopes, latency under load, verdict per run",
			Groups: stressGroups, Empty: "tessera-qa run (its stress suite) stores them, and so does report ingest of tessera-qa stress --json FILE"},
		{Kind: "partitions", Title: "Partitions", About: "the partitions suite's Ginkgo report: the interference ratio of each pair of SM partitions, and the golden catalogue's bits per SM count",
			Note: partitionsNote, Groups: partitionsGroups,
			Empty: "measured only on a GPU (green contexts): ingest the partitions suite's Ginkgo report from a GPU runner; tessera-qa run does not measure it"},
		{Kind: "compile", Title: "Compile cost", About: "the ptxas suite's Ginkgo report: what NVIDIA's assembler makes of the generator's kernels for sm_90, per code path, on the golden catalogue and on the same random graphs each CI run",
			Groups: compileGroups, Empty: "needs NVIDIA's ptxas: ingest the ptxas suite's Ginkgo report from a machine with the CUDA toolkit; tessera-qa run does not measure it"},
	} {
		secs, err := s.db.Metrics(ctx, k.Kind)
		if err != nil {
			return metricsData{}, err
		}
		for _, sec := range secs {
			k.Sections = append(k.Sections, metricSection{MetricSection: sec, Groups: chartGroups(sec.Rows, k.Groups)})
		}
		d.Kinds = append(d.Kinds, k)
	}
	return d, nil
}

// chartGroups charts each metric of rows (in order of first appearance) under the first group
// that takes it; without specs, all under one untitled group.
func chartGroups(rows []report.MetricRow, specs []chartGroupSpec) []chartGroup {
	var names []string
	by := map[string][]report.MetricRow{}
	for _, r := range rows {
		if _, ok := by[r.Metric]; !ok {
			names = append(names, r.Metric)
		}
		by[r.Metric] = append(by[r.Metric], r)
	}
	if len(specs) == 0 {
		g := chartGroup{}
		for _, n := range names {
			g.Charts = append(g.Charts, metricChart(n, by[n], 960, 260))
		}
		return []chartGroup{g}
	}
	groups := make([]chartGroup, len(specs))
	for _, n := range names {
		for i, sp := range specs {
			if sp.Takes(n) {
				groups[i].Charts = append(groups[i].Charts, metricChart(n, by[n], 480, 220))
				break
			}
		}
	}
	var out []chartGroup
	for i, g := range groups {
		if len(g.Charts) > 0 {
			g.ID, g.Title = specs[i].ID, specs[i].Title
			out = append(out, g)
		}
	}
	return out
}
