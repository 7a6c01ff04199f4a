package report

// This file is the read side of the results store: the view models the dashboard, the gate and
// `tessera-qa report` print, and the methods on *DB that build them.
//
// STABLE CONTRACT. The dashboard (cmd/tessera-qa dashboard, report/dashboard) is built
// on these types. Fields are only ever added, never renamed, removed or changed in meaning.
// Every method here only reads: a DB opened with OpenReadOnly serves all of them.
//
// Strings in these types come from test names, logs and JSON files that anybody can write:
// whoever renders them must escape them.

import (
	"context"
	"time"
)

// RunRef names one ingested run, enough to link to it and to say where it came from.
type RunRef struct {
	ID          int64     `json:"id"`
	Commit      string    `json:"commit"`
	Branch      string    `json:"branch"`
	Event       string    `json:"event"` // "nightly", "pr", "push", "manual", ...
	Machine     string    `json:"machine"`
	DeviceClass string    `json:"device_class"`
	Time        time.Time `json:"time"` // when the run started (ingest time when the input did not say)
}

// Overview is the front page: how the last nightly of each suite went and what needs a person.
type Overview struct {
	Generated time.Time `json:"generated"`
	// Suites: per suite, its last nightly run (or its last run of any event when no nightly
	// was ever ingested; SuiteStatus.Run.Event says which).
	Suites []SuiteStatus `json:"suites"`
	// OpenPerf: performance regressions of the latest run of each series against its
	// baseline window, warn and block levels, not acknowledged. Most severe first.
	OpenPerf []PerfRegression `json:"open_perf"`
	// AckedPerf: regressions a person acknowledged, shown with the reason.
	AckedPerf []PerfRegression `json:"acked_perf"`
	// OpenRepro: reproducibility regressions (a new, unacknowledged digest).
	OpenRepro []ReproRegression `json:"open_repro"`
	// Flaky: specs and cases that both passed and failed on one commit.
	Flaky []FlakySpec `json:"flaky"`
	// Counts of everything in the store, for the page header.
	Runs    int `json:"runs"`
	Results int `json:"results"` // results and specs
	Series  int `json:"series"`
}

// SuiteStatus is one suite's latest run.
type SuiteStatus struct {
	Suite  string  `json:"suite"`
	Run    RunRef  `json:"run"`
	Pass   int     `json:"pass"`
	Fail   int     `json:"fail"`
	Error  int     `json:"error"`
	Skip   int     `json:"skip"`
	Total  int     `json:"total"`
	WallMS float64 `json:"wall_ms"` // sum of result/spec times in the run for this suite
	// Failing lists the first few failing cases or specs (name: reason).
	Failing []string `json:"failing,omitempty"`
}

// SeriesKey identifies one performance series: one benchmark on one device class, dtype and
// shape. Fields are compared exactly.
type SeriesKey struct {
	Benchmark string `json:"benchmark"` // the bench row's op ("matmul", "flash_attention")
	Device    string `json:"device"`    // device class ("cuda/sm_90", "cpu/amd64")
	DType     string `json:"dtype"`
	Shape     string `json:"shape"` // "1024x1024x1024"
}

// Levels of a performance comparison, least to most severe.
const (
	LevelOK    = "ok"    // no significant change, or one below the warn threshold
	LevelWarn  = "warn"  // significant slowdown >= warn threshold
	LevelBlock = "block" // significant slowdown >= block threshold: the gate fails
	// LevelImproved: a significant speed-up of at least the minimum effect size.
	LevelImproved = "improved"
	// LevelNoBaseline: too few baseline runs to compare with.
	LevelNoBaseline = "no-baseline"
)

// SeriesSummary is one row of the series index.
type SeriesSummary struct {
	Key    SeriesKey `json:"key"`
	ID     string    `json:"id"` // SeriesKey.ID(): stable, URL-safe
	Unit   string    `json:"unit"`
	Points int       `json:"points"`
	Last   float64   `json:"last"`
	// Level of the latest run against its baseline window (Level* constants).
	Level string  `json:"level"`
	Delta float64 `json:"delta"` // relative change of the latest run's median vs the baseline's
}

// Series is one benchmark series with its history, change points and baseline window.
type Series struct {
	Key  SeriesKey `json:"key"`
	ID   string    `json:"id"`
	Unit string    `json:"unit"` // "ratio" (engine_ms / ref_ms, lower is better) or "ms"
	// Points in run order (oldest first), one per run.
	Points []SeriesPoint `json:"points"`
	// ChangePoints: indexes into Points where a new level starts (method: docs/reporter.md).
	ChangePoints []int `json:"change_points"`
	// Segments: the fitted level of each stretch between change points.
	Segments []Segment `json:"segments"`
	// Baseline window the latest point is compared with: Points[BaselineFrom:BaselineTo].
	// Both are 0 when there is no baseline.
	BaselineFrom int `json:"baseline_from"`
	BaselineTo   int `json:"baseline_to"`
	// Latest is the comparison of the last point with the baseline window.
	Latest PerfRegression `json:"latest"`
	// Resets and Acks recorded for this series, oldest first.
	Resets []Ack `json:"resets"`
	Acks   []Ack `json:"acks"`
	// Thresholds in force for this series (defaults or the config file's).
	Thresholds Thresholds `json:"thresholds"`
}

// SeriesPoint is one run's value of a series.
type SeriesPoint struct {
	Run     RunRef    `json:"run"`
	Value   float64   `json:"value"`             // the run's median
	Samples []float64 `json:"samples,omitempty"` // per-repetition values, when the bench recorded them
	Unit    string    `json:"unit"`
	// ChangePoint: a new level starts at this point.
	ChangePoint bool `json:"change_point"`
	// InBaseline: the point is in the baseline window of the latest comparison.
	InBaseline bool `json:"in_baseline"`
}

// Segment is a stretch of points [From, To) with one fitted level (their mean).
type Segment struct {
	From  int     `json:"from"`
	To    int     `json:"to"`
	Level float64 `json:"level"`
}

// Thresholds for one benchmark (defaults: docs/reporter.md; overridable in the config file).
type Thresholds struct {
	Warn      float64 `json:"warn"`       // relative slowdown that warns (0.05)
	Block     float64 `json:"block"`      // relative slowdown that blocks (0.20)
	MinEffect float64 `json:"min_effect"` // smallest relative change reported at all (0.02)
	Alpha     float64 `json:"alpha"`      // Mann-Whitney U significance level (0.05)
	Window    int     `json:"window"`     // baseline runs compared with (20)
	MinRuns   int     `json:"min_runs"`   // fewer baseline runs than this: no-baseline (3)
}

// PerfRegression is the comparison of one run of a series with its baseline window.
type PerfRegression struct {
	Key   SeriesKey `json:"key"`
	ID    string    `json:"id"`
	Run   RunRef    `json:"run"`
	Level string    `json:"level"` // Level* constants
	// Delta is candidate median / baseline median - 1: +0.25 is 25% slower.
	Delta          float64 `json:"delta"`
	P              float64 `json:"p"` // Mann-Whitney U two-sided p-value
	BaselineMedian float64 `json:"baseline_median"`
	Median         float64 `json:"median"`
	BaselineRuns   int     `json:"baseline_runs"`
	Unit           string  `json:"unit"`
	// Ack is set when a person acknowledged this regression; it then never blocks.
	Ack *Ack `json:"ack,omitempty"`
}

// Ack is a recorded human decision: an accepted digest, an accepted perf regression or a
// baseline reset. Reason is mandatory.
type Ack struct {
	ID     int64     `json:"id"`
	Kind   string    `json:"kind"`   // AckRepro, AckPerf, AckBaseline
	Target string    `json:"target"` // repro key or series ID
	Digest string    `json:"digest,omitempty"`
	RunID  int64     `json:"run_id,omitempty"`
	Reason string    `json:"reason"`
	By     string    `json:"by"`
	Time   time.Time `json:"time"`
}

// Ack kinds.
const (
	AckRepro    = "repro"    // a new digest is expected
	AckPerf     = "perf"     // a slowdown is accepted
	AckBaseline = "baseline" // the series' baseline restarts at a run
)

// ReproKey is what must give the same bits: one case on one device class in one determinism
// mode.
type ReproKey struct {
	Suite       string `json:"suite"`
	Case        string `json:"case"`
	DeviceClass string `json:"device_class"`
	Determinism string `json:"determinism"`
	// Computation is harness.Result.Computation: results of one case name that computed
	// different things (another seed's smoke graph) are different keys. "" for results
	// that name none (older results, suites outside harness.Runner).
	Computation string `json:"computation,omitempty"`
}

// Repro cell statuses.
const (
	ReproStable    = "stable"     // one digest ever (or only acknowledged changes and never a new one)
	ReproNewDigest = "new-digest" // a digest appeared that is not acknowledged: a regression
	ReproAcked     = "acked"      // the digest changed, and every change was acknowledged
	// ReproUntracked: the determinism mode makes no bitwise promise; digests are listed only.
	ReproUntracked = "untracked"
)

// ReproMatrix is case x device class.
type ReproMatrix struct {
	Cases         []string          `json:"cases"` // "suite/case", sorted
	DeviceClasses []string          `json:"device_classes"`
	Cells         []ReproCell       `json:"cells"` // sparse: only pairs that have results
	Regressions   []ReproRegression `json:"regressions"`
}

// ReproCell is one (case, device class) pair; with several determinism modes, the worst.
type ReproCell struct {
	Key     ReproKey     `json:"key"`
	Case    string       `json:"case"` // "suite/case", as in ReproMatrix.Cases
	Status  string       `json:"status"`
	Digests []DigestSeen `json:"digests"` // in order of first appearance
	Runs    int          `json:"runs"`
	// FirstBad / LastGood: for new-digest, the first run with the new digest and the last
	// run before it with an accepted digest.
	FirstBad *RunRef `json:"first_bad,omitempty"`
	LastGood *RunRef `json:"last_good,omitempty"`
}

// DigestSeen is one digest of a repro key and when it was seen.
type DigestSeen struct {
	Digest string `json:"digest"`
	First  RunRef `json:"first"`
	Last   RunRef `json:"last"`
	Count  int    `json:"count"`
	Acked  *Ack   `json:"acked,omitempty"` // the acknowledgement that accepted it
	// Accepted: the first digest of the key, or an acknowledged one.
	Accepted bool `json:"accepted"`
}

// ReproRegression is a new, unacknowledged digest.
type ReproRegression struct {
	Key      ReproKey `json:"key"`
	Digest   string   `json:"digest"`
	Previous string   `json:"previous"` // the accepted digest it replaced
	FirstBad RunRef   `json:"first_bad"`
	LastGood RunRef   `json:"last_good"`
}

// FlakySpec is a spec (Ginkgo) or case (harness result) that passed and failed on one commit.
type FlakySpec struct {
	Suite  string `json:"suite"`
	Spec   string `json:"spec"`
	Kind   string `json:"kind"` // "spec" (Ginkgo) or "case" (harness result)
	Commit string `json:"commit"`
	Passes int    `json:"passes"`
	Fails  int    `json:"fails"`
	// LastFailure is the reason of the latest failure.
	LastFailure string   `json:"last_failure"`
	Runs        []RunRef `json:"runs"`
}

// MetricSection is room for chaos and stress metrics that later issues ingest: a named list
// of scalar measurements per run. The store keeps them in a generic metrics table.
type MetricSection struct {
	Kind string      `json:"kind"` // "chaos", "stress"
	Name string      `json:"name"` // scenario or workload
	Rows []MetricRow `json:"rows"`
}

// MetricRow is one measurement.
type MetricRow struct {
	Run     RunRef  `json:"run"`
	Metric  string  `json:"metric"` // "recovery_s", "leaked_bytes", ...
	Value   float64 `json:"value"`
	Unit    string  `json:"unit"`
	Verdict string  `json:"verdict"` // "pass", "fail", ""
	Note    string  `json:"note,omitempty"`
}

// The read API. Signatures are part of the contract above.
var (
	_ func(*DB, context.Context) (Overview, error)                = (*DB).Overview
	_ func(*DB, context.Context) ([]SeriesSummary, error)         = (*DB).SeriesIndex
	_ func(*DB, context.Context, SeriesKey) (Series, error)       = (*DB).Series
	_ func(*DB, context.Context, string) (SeriesKey, bool, error) = (*DB).SeriesByID
	_ func(*DB, context.Context) (ReproMatrix, error)             = (*DB).ReproMatrix
	_ func(*DB, context.Context) ([]FlakySpec, error)             = (*DB).Flaky
	_ func(*DB, context.Context, string) ([]MetricSection, error) = (*DB).Metrics
	_ func(*DB, context.Context, int) ([]RunRef, error)           = (*DB).Runs
)
