package report_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/tessera-qa/tessera-qa/harness"
	"github.com/tessera-qa/tessera-qa/report"
	"github.com/tessera-qa/tessera-qa/report/store/storetest"
)

// nightly is a results file of n results shaped like a real nightly: one output each, full
// env, a few failures.
func nightly(n int, commit string) []byte {
	env := harness.Env{EngineVersion: "0.1.0", Commit: commit, GoVersion: "go1.26", OS: "linux", Arch: "amd64", Backend: "cuda",
		Device: "NVIDIA H100 80GB HBM3 sm_90", DeviceClass: "cuda/sm_90", Driver: "580.65", GOMAXPROCS: 16, NumCPU: 16,
		Determinism: harness.DeterminismBitwise, Hostname: "gpu-1"}
	rs := make([]harness.Result, n)
	for i := range rs {
		v := harness.VerdictPass
		if i%500 == 0 {
			v = harness.VerdictFail
		}
		d := fmt.Sprintf("%064x", i*7919)
		rs[i] = harness.Result{Schema: 1, Suite: []string{"golden", "determinism", "property", "differential"}[i%4],
			Case: fmt.Sprintf("op%03d/f32/%dx%d", i%300, 16+i%64, 32+i%128), Labels: []string{"matmul"}, Backend: "cuda",
			Device: env.Device, DeviceClass: env.DeviceClass, Verdict: v, Seed: uint64(i),
			InputDigests: map[string]string{"x": d}, Digest: d, ScheduleHash: "e9607e7951a7ef9b", Env: env,
			Outputs: []harness.OutputResult{{Name: "y", DType: "f32", Shape: []int{16, 32}, Digest: d,
				Check: harness.CheckResult{Pass: v == harness.VerdictPass, Mode: "allclose", Elements: 512, Worst: -1}}},
			Timing: harness.Timing{CompileMS: 0.1, RunMS: 0.2, RefMS: 0.1, CheckMS: 0.05, TotalMS: 0.5}}
		if v == harness.VerdictFail {
			rs[i].Reason = "output %y: 1 of 512 elements out of tolerance"
		}
	}
	data, _ := json.Marshal(rs)
	return data
}

// BenchmarkIngest10k: one nightly of 10,000 results into a store that already holds one
// (issue 5: under 5 s). Each iteration a fresh store per backend.
func BenchmarkIngest10k(b *testing.B) {
	first, second := nightly(10_000, "c1"), nightly(10_000, "c2")
	for _, be := range storetest.Backends() {
		b.Run(be.Name, func(b *testing.B) {
			ctx := context.Background()
			for b.Loop() {
				b.StopTimer()
				db, err := report.Open(ctx, be.DSN(b), report.Config{})
				if err != nil {
					b.Fatal(err)
				}
				if _, err := db.IngestBytes(ctx, "first.json", first, report.IngestOptions{}); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				if _, err := db.IngestBytes(ctx, "second.json", second, report.IngestOptions{}); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				db.Close()
				b.StartTimer()
			}
			b.ReportMetric(float64(len(second))/1e6, "MB/file")
		})
	}
}

// analysisStore builds (once, cached under the system temp folder) a SQLite store with
// `series` benchmark series over `runs` runs, 10 samples per point.
func analysisStore(b *testing.B, series, runs int) string {
	path := filepath.Join(os.TempDir(), fmt.Sprintf("tessera-report-analysis-%dx%d.db", series, runs))
	if _, err := os.Stat(path + ".done"); err == nil {
		return path
	}
	os.Remove(path)
	ctx := context.Background()
	db, err := report.Open(ctx, path, report.Config{})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	rng := rand.New(rand.NewPCG(1, 2))
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for r := 0; r < runs; r++ {
		rep := report.BenchReport{Schema: report.BenchSchema, Kind: report.BenchKind, Commit: fmt.Sprintf("c%04d", r),
			Branch: "main", Started: t0.Add(time.Duration(r) * 24 * time.Hour)}
		for s := 0; s < series; s++ {
			level := 1.0
			if s%10 == 0 && r > runs/2 {
				level = 1.2 // some series change half way
			}
			samples := make([]float64, 10)
			for i := range samples {
				samples[i] = 2 * level * (1 + 0.02*rng.NormFloat64())
			}
			rep.Rows = append(rep.Rows, report.BenchRow{Op: fmt.Sprintf("op%d", s/10), DType: "f16", Shape: []int{1024, 64 << (s % 10)},
				Device: "cuda/sm_90", EngineMS: samples[0], RefMS: 2, SamplesMS: samples})
		}
		data, _ := json.Marshal(rep)
		if _, err := db.IngestBytes(ctx, fmt.Sprintf("bench-%d.json", r), data, report.IngestOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	os.WriteFile(path+".done", nil, 0o644)
	return path
}

// BenchmarkAnalysis1000x200: the whole regression analysis of 1,000 series x 200 runs
// (issue 5: under 10 s): every series' change points and latest comparison (AllSeries), the
// overview's regressions, and the gate, each from a fresh handle so nothing is cached.
func BenchmarkAnalysis1000x200(b *testing.B) {
	path := analysisStore(b, 1000, 200)
	ctx := context.Background()
	for b.Loop() {
		db, err := report.OpenReadOnly(ctx, path, report.Config{})
		if err != nil {
			b.Fatal(err)
		}
		all, err := db.AllSeries(ctx)
		if err != nil || len(all) != 1000 || len(all[0].Points) != 200 {
			b.Fatalf("%d series, %v", len(all), err)
		}
		if _, err := db.Overview(ctx); err != nil {
			b.Fatal(err)
		}
		g, err := db.Gate(ctx, report.GateOptions{})
		if err != nil || g.Series != 1000 {
			b.Fatalf("gate judged %d series, %v", g.Series, err)
		}
		db.Close()
	}
}
