package dashboard

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tessera-qa/tessera-qa/harness"
	"github.com/tessera-qa/tessera-qa/report"
)

// The speed target: a page renders in under 200 ms from a store of 1,000 series x 200
// runs. TESSERA_BENCH_SERIES and TESSERA_BENCH_RUNS shrink the store for a quick look.
var big struct {
	once sync.Once
	dir  string
	dsn  string
	slow report.SeriesKey
	err  error
	took time.Duration
}

func envInt(k string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(k)); err == nil && v > 0 {
		return v
	}
	return def
}

func bigStore(b *testing.B) (string, report.SeriesKey) {
	b.Helper()
	big.once.Do(func() {
		ctx := context.Background()
		// TESSERA_BENCH_DB=FILE keeps the store between runs (writing it takes minutes).
		if big.dsn = os.Getenv("TESSERA_BENCH_DB"); big.dsn != "" {
			if _, err := os.Stat(big.dsn); err == nil {
				big.slow = bigSlowKey
				return
			}
		} else {
			dir, err := os.MkdirTemp("", "dashboard-bench-")
			if err != nil {
				big.err = err
				return
			}
			big.dir = dir // removed by TestMain
			big.dsn = filepath.Join(dir, "big.db")
		}
		db, err := report.Open(ctx, big.dsn, report.Config{})
		if err != nil {
			big.err = err
			return
		}
		defer db.Close()
		start := time.Now()
		big.slow, big.err = writeBig(ctx, db, envInt("TESSERA_BENCH_SERIES", 1000), envInt("TESSERA_BENCH_RUNS", 200))
		big.took = time.Since(start)
	})
	if big.err != nil {
		b.Fatal(big.err)
	}
	return big.dsn, big.slow
}

// bigSlowKey is the series writeBig slows down: its first.
var bigSlowKey = report.SeriesKey{Benchmark: "matmul", Device: "cuda/sm_90", DType: "f16", Shape: "128x64x1"}

// writeBig ingests runs nightly bench reports of series rows each (5 repetitions per row, 2%
// noise), with a 25% slowdown in the last 5 runs of the first series, and a results file of
// 200 cases per run whose first case changes digest in the last run. synth's generator keeps
// to a handful of series; this is its large-store sibling for the speed target.
func writeBig(ctx context.Context, db *report.DB, series, runs int) (report.SeriesKey, error) {
	rng := rand.New(rand.NewPCG(1, 2))
	keys := make([]report.SeriesKey, series)
	shapes := make([][]int, series)
	ops := []string{bigSlowKey.Benchmark, "softmax", "layernorm", "flash_attention", "conv2d", "rmsnorm", "gelu", "reduce_sum"}
	for i := range keys {
		shapes[i] = []int{128 * (1 + i%16), 64 * (1 + i/16%16), 1 + i/256}
		keys[i] = report.SeriesKey{Benchmark: ops[i%len(ops)], Device: "cuda/sm_90", DType: "f16", Shape: report.ShapeString(shapes[i])}
	}
	start := time.Date(2026, 1, 1, 2, 0, 0, 0, time.UTC)
	for r := 0; r < runs; r++ {
		at := start.Add(time.Duration(r) * 24 * time.Hour)
		meta := report.IngestOptions{Override: report.Meta{Commit: fmt.Sprintf("%07x", 0xa00000+r), Branch: "main", Event: "nightly",
			Machine: "gpu-1", DeviceClass: "cuda/sm_90", Time: at}}
		rep := report.BenchReport{Schema: report.BenchSchema, Kind: report.BenchKind, Started: at, Rows: make([]report.BenchRow, series)}
		for i, k := range keys {
			level := 1 + float64(i%7)/10
			if i == 0 && r >= runs-5 {
				level *= 1.25
			}
			samples := make([]float64, 5)
			for j := range samples {
				samples[j] = level * (1 + 0.02*rng.NormFloat64())
			}
			rep.Rows[i] = report.BenchRow{Op: k.Benchmark, DType: k.DType, Shape: shapes[i], Device: k.Device,
				EngineMS: samples[2], RefMS: 1, Ratio: samples[2], SamplesMS: samples, Ref: "torch"}
		}
		if err := ingestJSON(ctx, db, fmt.Sprintf("run%03d/bench.json", r), rep, meta); err != nil {
			return report.SeriesKey{}, err
		}
		meta.Override.DeviceClass = "cpu/amd64"
		env := harness.Env{EngineVersion: "0.1.0", Commit: meta.Override.Commit, OS: "linux", Arch: "amd64", Backend: "cpu",
			Device: "cpu", DeviceClass: "cpu/amd64", Determinism: harness.DeterminismBitwise}
		res := make([]harness.Result, 200)
		for c := range res {
			d := fmt.Sprintf("%064x", c+1)
			if c == 0 && r == runs-1 {
				d = fmt.Sprintf("%064x", 0xbad)
			}
			res[c] = harness.Result{Schema: harness.ResultSchema, Suite: "golden", Case: fmt.Sprintf("op%03d/f32/%d", c, 16+c),
				Backend: "cpu", Device: "cpu", DeviceClass: "cpu/amd64", Verdict: harness.VerdictPass,
				Outputs: []harness.OutputResult{}, Digest: d, Env: env, Timing: harness.Timing{TotalMS: 1}}
		}
		if err := ingestJSON(ctx, db, fmt.Sprintf("run%03d/results.json", r), res, meta); err != nil {
			return report.SeriesKey{}, err
		}
	}
	return keys[0], nil
}

func ingestJSON(ctx context.Context, db *report.DB, name string, v any, o report.IngestOptions) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = db.IngestBytes(ctx, name, data, o)
	return err
}

func openBig(b *testing.B, dsn string) *Site {
	b.Helper()
	db, err := report.OpenReadOnly(context.Background(), dsn, report.Config{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	s, err := New(db)
	if err != nil {
		b.Fatal(err)
	}
	return s
}

// BenchmarkRenderPage renders each page from the store through a Site that stays open, as
// the server's does: the whole-store analyses are computed once per store generation (the
// first request after an ingest) and the page then reads from them.
func BenchmarkRenderPage(b *testing.B) {
	dsn, slow := bigStore(b)
	b.Logf("store: %d series x %d runs, written in %v", envInt("TESSERA_BENCH_SERIES", 1000), envInt("TESSERA_BENCH_RUNS", 200), big.took.Round(time.Second))
	s := openBig(b, dsn)
	ctx := context.Background()
	start := time.Now()
	if err := s.Render(ctx, io.Discard, PageOverview); err != nil {
		b.Fatal(err)
	}
	b.Logf("first page after opening (computes the analyses): %v", time.Since(start).Round(time.Millisecond))
	for _, p := range []struct{ name, page string }{
		{"overview", PageOverview}, {"series-index", PageSeries}, {"series", seriesPage(slow.ID())},
		{"repro", PageRepro}, {"flaky", PageFlaky}, {"metrics", PageMetrics},
	} {
		b.Run(p.name, func(b *testing.B) {
			var n countWriter
			cpu0 := cpuTime()
			for b.Loop() {
				if err := s.Render(ctx, &n, p.page); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(n)/float64(b.N), "bytes/page")
			// CPU time next to wall time: on a shared 2-core machine the wall clock also
			// counts the time other processes held the cores.
			b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N)/1e6, "cpu-ms/op")
		})
	}
}

// BenchmarkRenderCold opens the store and renders the overview each time: the first request
// of a fresh server, or one right after an ingest, with every analysis redone.
func BenchmarkRenderCold(b *testing.B) {
	dsn, _ := bigStore(b)
	ctx := context.Background()
	cpu0 := cpuTime()
	for b.Loop() {
		s := openBig(b, dsn)
		if err := s.Render(ctx, io.Discard, PageOverview); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N)/1e6, "cpu-ms/op")
}

// cpuTime is the CPU time this process has used (user + system), in nanoseconds.
func cpuTime() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

type countWriter int64

func (c *countWriter) Write(p []byte) (int, error) {
	*c += countWriter(len(p))
	return len(p), nil
}
