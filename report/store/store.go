// Package store keeps the reporter's history in SQL: SQLite (modernc.org/sqlite, the embedded
// default) or PostgreSQL (pgx). Both sit behind one Store interface with one SQL
// implementation; the differences are a Dialect (types, placeholders, locking).
//
// Writes are transactional: Ingest writes a whole run, its rows and the derived tables
// (digests, outcomes, run_suites) in one transaction, so a reader or a process that survives a
// crash sees a run entirely or not at all. Schema changes are versioned migrations
// (migrate.go), applied on Open.
package store

import (
	"context"
	"time"
)

// Store is the results history. Every method is safe for concurrent use.
type Store interface {
	// Dialect names the database: "sqlite" or "postgres".
	Dialect() string
	// SchemaVersion is the highest applied migration.
	SchemaVersion(ctx context.Context) (int, error)

	// Ingest writes one run with all its rows in one transaction and returns its id. progress,
	// when not nil, is called inside the transaction after each batch with the rows written so
	// far (tests use it to kill a process mid-ingest). A run whose ContentSHA is already
	// stored is not written again: Ingest returns the stored id and ErrDuplicate.
	Ingest(ctx context.Context, b *Batch, progress func(rows int)) (int64, error)
	// AddAck records a human decision and returns its id.
	AddAck(ctx context.Context, a AckRow) (int64, error)

	Runs(ctx context.Context) ([]RunRow, error)
	RunSuites(ctx context.Context) ([]SuiteRow, error)
	// Bench returns bench rows in no particular order; key filters to one series when not nil.
	Bench(ctx context.Context, key *SeriesKey) ([]BenchRow, error)
	// BenchKernels returns the per-kernel breakdowns of one series in the given runs.
	BenchKernels(ctx context.Context, key SeriesKey, runIDs []int64) ([]KernelRow, error)
	Digests(ctx context.Context) ([]DigestRow, error)
	// CaseHistory returns (run id, digest) of every result of one repro key.
	CaseHistory(ctx context.Context, k ReproKey) ([]RunDigest, error)
	// Outcomes returns per-commit pass/fail tallies; flakyOnly keeps those with both.
	Outcomes(ctx context.Context, flakyOnly bool) ([]OutcomeRow, error)
	// OutcomeRuns lists the runs of one commit that ran the outcome's test.
	OutcomeRuns(ctx context.Context, o OutcomeRow) ([]int64, error)
	// Results returns the result rows of the given runs.
	Results(ctx context.Context, runIDs []int64) ([]RunResult, error)
	// Failures returns the failing results and specs of the given runs.
	Failures(ctx context.Context, runIDs []int64) ([]FailureRow, error)
	Acks(ctx context.Context) ([]AckRow, error)
	Metrics(ctx context.Context, kind string) ([]MetricRow, error)
	// Counts: runs, results + specs, distinct series.
	Counts(ctx context.Context) (runs, results, series int, err error)
	// Generation changes whenever anything is written (it is the largest run and ack id), so
	// that readers can cache analyses.
	Generation(ctx context.Context) (string, error)

	Close() error
}

// Batch is one run and everything in it.
type Batch struct {
	Run     RunRow
	Results []ResultRow
	Specs   []SpecRow
	Bench   []BenchRow
	Metrics []MetricRow
	Suites  []SuiteRow
}

// Rows is how many data rows the batch holds.
func (b *Batch) Rows() int {
	return len(b.Results) + len(b.Specs) + len(b.Bench) + len(b.Metrics)
}

// RunRow is one ingested file.
type RunRow struct {
	ID          int64
	Kind        string // "results", "ginkgo", "bench"
	Source      string // the file it came from
	ContentSHA  string // of the file's bytes; a file is ingested once
	Commit      string
	Branch      string
	Event       string
	Machine     string
	DeviceClass string
	Env         string // JSON object
	Started     time.Time
	Ingested    time.Time
	Rows        int
}

// ResultRow is one harness Result.
type ResultRow struct {
	Suite, Case, DeviceClass, Determinism string
	Backend, Device                       string
	Verdict, Reason, ErrorCode            string
	Digest, ScheduleHash, Seed, Replay    string
	TotalMS                               float64
	// Computation is harness.Result.Computation ("" for results that do not name one): part
	// of the reproducibility key.
	Computation string
}

// SpecRow is one Ginkgo spec report.
type SpecRow struct {
	Suite, Name, State string
	Attempts           int
	DurationMS         float64
	Failure, Location  string
}

// SeriesKey identifies one performance series.
type SeriesKey struct{ Benchmark, Device, DType, Shape string }

// BenchRow is one benchmark measurement.
type BenchRow struct {
	RunID                                int64
	Key                                  SeriesKey
	Unit                                 string
	Value                                float64
	Samples                              []float64
	EngineMS, RefMS, Ratio, TFLOPS, GBps float64
	// Kernels is the point's per-kernel breakdown when it was profiled (table bench_kernels).
	Kernels []KernelRow
}

// KernelRow is one kernel of a profiled benchmark point.
type KernelRow struct {
	RunID         int64
	Key           SeriesKey
	Kernel, Label string
	MedianMS      float64
	Grid, Block   string // "1x2x1"
	FLOPs, Bytes  int64
	Regs          int64
	Fusion        string
}

// MetricRow is one chaos/stress measurement.
type MetricRow struct {
	RunID                    int64
	Kind, Name, Metric, Unit string
	Value                    float64
	Verdict, Note            string
}

// SuiteRow summarizes one suite within one run.
type SuiteRow struct {
	RunID                   int64
	Suite                   string
	Pass, Fail, Error, Skip int
	WallMS                  float64
	Failing                 []string
}

// ReproKey is (suite, case, device class, determinism mode).
type ReproKey struct{ Suite, Case, DeviceClass, Determinism, Computation string }

// DigestRow is one digest of one repro key with where it was first and last seen.
type DigestRow struct {
	Key               ReproKey
	Digest            string
	FirstRun, LastRun int64
	Count             int
}

// RunDigest is one result's digest.
type RunDigest struct {
	RunID  int64
	Digest string
}

// OutcomeRow tallies one test on one commit and device class.
type OutcomeRow struct {
	Commit, Kind, Suite, Name, DeviceClass string
	Passes, Fails                          int
	LastFailure                            string
	LastRun                                int64
}

// FailureRow is one failing result or spec.
type FailureRow struct {
	RunID                    int64
	Kind                     string // "case" or "spec"
	Suite, Name, DeviceClass string
	Verdict, Reason, Code    string
}

// AckRow is a recorded human decision.
type AckRow struct {
	ID                   int64
	Kind, Target, Digest string
	RunID                int64
	Reason, By           string
	Created              time.Time
}

// RunResult is a result row with its run.
type RunResult struct {
	RunID int64
	ResultRow
}
