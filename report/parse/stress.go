package parse

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/harness"
	"github.com/tessera-qa/tessera-qa/report/store"
)

// StressSchema and StressKind mark what `tessera-qa stress --json` writes (stress.Report).
// Reports written before the marker existed are recognised by their shape (stressShape) and
// read as schema 1.
const (
	StressSchema = 1
	StressKind   = "tessera-stress"
)

// Where stress runs go in the store:
//
//   - results (suite "stress"): one per run, case = the workload (stressWorkload), pass when
//     the run passed, the failures as the reason;
//   - metrics (kind "stress", the dashboard's stress section): one section per workload with
//     throughput, mismatches, errors and leaks; per leak monitor the worst slope and growth
//     over its sources (a process, or one per job process); the p50/p99 latency alone and
//     under load of the job slowest under load; and the pressure modes' counts (OOM
//     recoveries, the cache's lost and wrong entries) when the run had one.
const (
	StressSuite  = "stress"
	StressMetric = "stress"
)

// StressReport is the reporter's reading of a stress report: the fields it stores.
type StressReport struct {
	Schema       int             `json:"schema"`
	Kind         string          `json:"kind"`
	Mode         string          `json:"mode"`
	Workload     string          `json:"workload"` // absent for graphs, "train" (stress.Report.Workload)
	Device       string          `json:"device"`
	Jobs         int             `json:"jobs"`
	Seed         string          `json:"seed"`
	DurationS    float64         `json:"duration_s"`
	Graphs       int             `json:"graphs"`
	GraphsPerSec float64         `json:"graphs_per_s"`
	Mismatches   int             `json:"mismatches"`
	Errors       int             `json:"errors"`
	Leaks        int             `json:"leaks"`
	Monitors     []StressMonitor `json:"monitors"`
	Latency      []StressLatency `json:"latency"`
	Failures     []string        `json:"failures"`
	Replays      []string        `json:"replays"`
	Pressure     string          `json:"pressure"`
	OOM          *StressOOM      `json:"oom"`
	Cache        *StressCache    `json:"cache"`
	Artifacts    string          `json:"artifacts"`
	Pass         bool            `json:"pass"`
}

// StressMonitor is one leak monitor of one source (stress.Leak).
type StressMonitor struct {
	Monitor   string  `json:"monitor"`
	Source    string  `json:"source"`
	Samples   int     `json:"samples"`
	Growth    float64 `json:"growth"`
	Slope     float64 `json:"slope_per_min"`
	Allowance float64 `json:"allowance"`
	Leak      bool    `json:"leak"`
}

// StressLatency is one job's latency in ms (stress.JobLatency).
type StressLatency struct {
	Job       int     `json:"job"`
	AloneP50  float64 `json:"alone_p50_ms"`
	AloneP99  float64 `json:"alone_p99_ms"`
	LoadedP50 float64 `json:"loaded_p50_ms"`
	LoadedP99 float64 `json:"loaded_p99_ms"`
}

// StressOOM is the OOM pressure mode's row (stress.OOMReport).
type StressOOM struct {
	Rounds        int `json:"rounds"`
	Recoveries    int `json:"recoveries"`
	UnderOOM      int `json:"under_oom"`
	NeighbourOOMs int `json:"neighbour_ooms"`
}

// StressCache is the cache pressure mode's row (stress.CacheReport).
type StressCache struct {
	Hammers  int `json:"hammers"`
	Entries  int `json:"entries"`
	Lost     int `json:"lost"`
	Wrong    int `json:"wrong"`
	OpErrors int `json:"op_errors"`
}

// stressShape tells an unmarked stress report by the fields only it has at the top level.
var stressShape = []string{"mode", "jobs", "graphs_per_s", "mismatches", "monitors", "latency"}

// maxJobs bounds a report's jobs: a run has a few dozen; the bound keeps a hostile file's
// numbers from growing names and loops.
const maxJobs = 1 << 16

// stressWorkload names a run's section: what it ran where, e.g. "processes x8 +oom on NVIDIA
// H100 ..." or "processes x2 train on cpu ...". Runs of the same workload on the same device
// line up as one series.
func stressWorkload(r *StressReport) string {
	w := r.Mode + " x" + strconv.Itoa(r.Jobs)
	if r.Workload != "" && r.Workload != "graphs" {
		w += " " + r.Workload
	}
	if r.Pressure != "" {
		w += " +" + r.Pressure
	}
	return w + " on " + r.Device
}

func parseStress(file string, data []byte) (*Report, error) {
	var rep StressReport
	if err := decodeStrict(file, data, &rep); err != nil {
		return nil, err
	}
	c := NewChecker(file)
	if rep.Kind == "" && rep.Schema == 0 {
		rep.Schema, rep.Kind = StressSchema, StressKind // written before the marker
	}
	if rep.Schema != StressSchema || rep.Kind != StressKind {
		c.failf("stress schema %d kind %q, this build reads schema %d kind %q", rep.Schema, clip(rep.Kind), StressSchema, StressKind)
		return nil, c.err
	}
	c.ident("header", "mode", rep.Mode, true)
	c.ident("header", "workload", rep.Workload, false)
	c.ident("header", "device", rep.Device, true)
	c.ident("header", "pressure", rep.Pressure, false)
	c.ident("header", "seed", rep.Seed, false)
	if rep.Jobs < 1 || rep.Jobs > maxJobs {
		c.failf("header: jobs %d out of range [1, %d]", rep.Jobs, maxJobs)
	}
	for _, n := range []int{rep.Graphs, rep.Mismatches, rep.Errors, rep.Leaks} {
		if n < 0 {
			c.failf("header: negative graphs, mismatches, errors or leaks")
			break
		}
	}
	if len(rep.Monitors) > MaxRows || len(rep.Latency) > maxJobs {
		c.failf("%d monitor rows and %d latency rows (limits %d, %d)", len(rep.Monitors), len(rep.Latency), MaxRows, maxJobs)
	}
	if c.err != nil {
		return nil, c.err
	}
	name := stressWorkload(&rep)
	c.ident("header", "workload", name, true)

	run := harness.VerdictPass
	if !rep.Pass {
		run = harness.VerdictFail
	}
	p := &Report{Kind: "stress"}
	env := map[string]string{"mode": rep.Mode, "device": rep.Device}
	for k, v := range map[string]string{"seed": rep.Seed, "pressure": rep.Pressure, "artifacts": text(rep.Artifacts)} {
		if v != "" {
			env[k] = v
		}
	}
	class := "cuda"
	if strings.HasPrefix(rep.Device, "cpu") {
		class = "cpu"
	}
	p.Batch.Run = store.RunRow{DeviceClass: class, Env: jsonString(env)}
	c.num("header", "duration_s", rep.DurationS)
	c.num("header", "graphs_per_s", rep.GraphsPerSec)
	m := func(metric, unit string, v float64, verdict, note string) {
		p.Batch.Metrics = append(p.Batch.Metrics, store.MetricRow{Kind: StressMetric, Name: name, Metric: metric, Unit: unit,
			Value: signed(c, "metric", metric, v), Verdict: verdict, Note: note})
	}
	failIf := func(bad bool) string {
		if bad {
			return harness.VerdictFail
		}
		return run
	}
	m("graphs_per_s", "graphs/s", rep.GraphsPerSec, run, fmt.Sprintf("%d graphs in %.0f s", rep.Graphs, rep.DurationS))
	m("mismatches", "graphs", float64(rep.Mismatches), failIf(rep.Mismatches > 0), "results that differ from the graph's alone digest")
	m("errors", "graphs", float64(rep.Errors), failIf(rep.Errors > 0), "")
	m("leaks", "monitors", float64(rep.Leaks), failIf(rep.Leaks > 0), "")
	if err := stressMonitors(c, &rep, m, run); err != nil {
		return nil, err
	}
	if err := stressLatency(c, &rep, m, run); err != nil {
		return nil, err
	}
	if o := rep.OOM; o != nil {
		if o.Rounds < 0 || o.Recoveries < 0 || o.UnderOOM < 0 || o.NeighbourOOMs < 0 {
			c.failf("oom: negative counts")
			return nil, c.err
		}
		m("oom recoveries", "rounds", float64(o.Recoveries), failIf(o.Recoveries < o.Rounds), fmt.Sprintf("of %d rounds", o.Rounds))
		m("oom neighbour_ooms", "graphs", float64(o.NeighbourOOMs), run, "a job's graph refused with E_OOM while the hog held the memory")
	}
	if k := rep.Cache; k != nil {
		if k.Hammers < 0 || k.Entries < 0 || k.Lost < 0 || k.Wrong < 0 || k.OpErrors < 0 {
			c.failf("cache: negative counts")
			return nil, c.err
		}
		note := fmt.Sprintf("%d hammers, %d entries in the final file", k.Hammers, k.Entries)
		m("cache lost", "entries", float64(k.Lost), failIf(k.Lost > 0), note)
		m("cache wrong", "entries", float64(k.Wrong), failIf(k.Wrong > 0), note)
	}
	if c.err != nil {
		return nil, c.err
	}

	reason, code, replay := "", "", ""
	if !rep.Pass {
		reason = fmt.Sprintf("%d mismatches, %d errors, %d leaks", rep.Mismatches, rep.Errors, rep.Leaks)
		if len(rep.Failures) > 0 {
			reason = text(strings.Join(rep.Failures, "; "))
		}
	}
	if rep.Mismatches > 0 {
		code = string(errs.Nondeterministic)
	}
	if len(rep.Replays) > 0 {
		replay = c.ident("header", "replays", rep.Replays[0], false)
	}
	p.Batch.Results = []store.ResultRow{{Suite: StressSuite, Case: name, DeviceClass: class, Determinism: harness.DeterminismUnknown,
		Backend: "stress", Device: rep.Device, Verdict: run, Reason: reason, ErrorCode: code, Seed: rep.Seed, Replay: replay,
		TotalMS: rep.DurationS * 1000}}
	p.Batch.Suites = resultSuites(p.Batch.Results)
	return p, c.err
}

// stressMonitors adds, per monitor, the worst slope and growth over its sources: one job
// process that leaks is the run's leak, whatever the others do.
func stressMonitors(c *Checker, rep *StressReport, m func(metric, unit string, v float64, verdict, note string), run string) error {
	type worst struct {
		slope, growth       float64
		slopeSrc, growthSrc string
		allowance           float64
		sources, leaks      int
	}
	by := map[string]*worst{}
	var names []string
	for i, mo := range rep.Monitors {
		where := "monitor " + strconv.Itoa(i)
		c.ident(where, "monitor", mo.Monitor, true)
		c.ident(where, "source", mo.Source, false)
		signed(c, where, "slope_per_min", mo.Slope)
		signed(c, where, "growth", mo.Growth)
		c.num(where, "allowance", mo.Allowance)
		if mo.Samples < 0 {
			c.failf("%s: negative samples", where)
		}
		if c.err != nil {
			return c.err
		}
		w := by[mo.Monitor]
		if w == nil {
			w = &worst{slope: math.Inf(-1), growth: math.Inf(-1)}
			by[mo.Monitor] = w
			names = append(names, mo.Monitor)
		}
		if mo.Slope > w.slope {
			w.slope, w.slopeSrc = mo.Slope, mo.Source
		}
		if mo.Growth > w.growth {
			w.growth, w.growthSrc = mo.Growth, mo.Source
		}
		w.allowance = mo.Allowance
		w.sources++
		if mo.Leak {
			w.leaks++
		}
	}
	sort.Strings(names)
	for _, n := range names {
		w := by[n]
		unit := "count"
		if strings.HasSuffix(n, "_bytes") {
			unit = "bytes"
		}
		verdict := run
		if w.leaks > 0 {
			verdict = harness.VerdictFail
		}
		of := fmt.Sprintf("%d sources, %d leaking", w.sources, w.leaks)
		// Slopes and growth may be negative (memory handed back): kept as they are.
		m(n+" slope", unit+"/min", w.slope, verdict, "worst: "+text(w.slopeSrc)+"; "+of)
		m(n+" growth", unit, w.growth, verdict, fmt.Sprintf("worst: %s; allowance %s; %s", text(w.growthSrc), strconv.FormatFloat(w.allowance, 'g', -1, 64), of))
	}
	return nil
}

// stressLatency adds the latency of the job slowest under load (by its loaded p99), alone and
// loaded side by side, so the two lines of one job are compared, not the extremes of two.
func stressLatency(c *Checker, rep *StressReport, m func(metric, unit string, v float64, verdict, note string), run string) error {
	worst := -1
	for i, l := range rep.Latency {
		where := "latency " + strconv.Itoa(i)
		for _, v := range []float64{l.AloneP50, l.AloneP99, l.LoadedP50, l.LoadedP99} {
			c.num(where, "latency", v)
		}
		if l.Job < 0 || l.Job >= maxJobs {
			c.failf("%s: job %d out of range", where, l.Job)
		}
		if c.err != nil {
			return c.err
		}
		if worst < 0 || l.LoadedP99 > rep.Latency[worst].LoadedP99 {
			worst = i
		}
	}
	if worst < 0 {
		return nil
	}
	l := rep.Latency[worst]
	note := fmt.Sprintf("job %d of %d, the slowest under load", l.Job, len(rep.Latency))
	m("latency p50 alone", "ms", l.AloneP50, run, note)
	m("latency p50 loaded", "ms", l.LoadedP50, run, note)
	m("latency p99 alone", "ms", l.AloneP99, run, note)
	m("latency p99 loaded", "ms", l.LoadedP99, run, note)
	return nil
}

// signed checks a measurement that may be negative (a slope): finite and not absurd.
func signed(c *Checker, where, field string, v float64) float64 {
	if math.IsNaN(v) || math.Abs(v) > maxNumber {
		c.failf("%s: %s = %g out of range [-%g, %g]", where, field, v, maxNumber, maxNumber)
	}
	return v
}
