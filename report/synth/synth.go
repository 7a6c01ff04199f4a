// Package synth writes a synthetic history into a results store: nightly runs on main with
// harness results, a Ginkgo report and bench rows, and three planted problems the reporter
// must tell apart: a 25% slowdown in one series, a series with 3% noise and no change, and
// one case whose digest changes in the last run. Tests of the gate and of the dashboard use
// it as their fixture; `tessera-qa report synth` (tests only) does not exist on purpose.
package synth

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sort"
	"time"

	"github.com/tessera-qa/tessera-qa/harness"
	"github.com/tessera-qa/tessera-qa/report"
)

// Options shape the history; zero fields take the defaults in parentheses.
type Options struct {
	Runs     int     // nightly runs (30)
	Cases    int     // harness cases per run (8)
	Series   int     // stable bench series besides the two planted ones (4)
	Samples  int     // repetitions per bench row (10)
	Slowdown float64 // planted slowdown (0.25)
	Noise    float64 // relative noise of the noisy series (0.03)
	// SlowFrom: the slowdown starts this many runs before the end (3), so the change point
	// fit has a segment to find.
	SlowFrom int
	Seed     uint64
	Start    time.Time // first run (2026-01-01)
}

// Plan says where the problems were planted.
type Plan struct {
	Slow, Noisy     report.SeriesKey
	Stable          []report.SeriesKey
	ChangedCase     report.ReproKey
	OldDigest       string
	NewDigest       string
	FlakySpec       string // Ginkgo spec that passed and failed on FlakyCommit
	FlakyCommit     string
	Commits         []string // one per run, oldest first
	LastRunIDs      []int64  // the runs of the last commit
	SlowStartCommit string
}

func (o *Options) defaults() {
	def := func(p *int, v int) {
		if *p <= 0 {
			*p = v
		}
	}
	def(&o.Runs, 30)
	def(&o.Cases, 8)
	def(&o.Series, 4)
	def(&o.Samples, 10)
	def(&o.SlowFrom, 3)
	if o.Slowdown == 0 {
		o.Slowdown = 0.25
	}
	if o.Noise == 0 {
		o.Noise = 0.03
	}
	if o.Start.IsZero() {
		o.Start = time.Date(2026, 1, 1, 2, 0, 0, 0, time.UTC)
	}
}

// Write ingests the history into db and returns the plan.
func Write(ctx context.Context, db *report.DB, o Options) (Plan, error) {
	o.defaults()
	rng := rand.New(rand.NewPCG(o.Seed, 0x5eed))
	p := Plan{
		Slow:        report.SeriesKey{Benchmark: "matmul", Device: "cuda/sm_90", DType: "f16", Shape: "4096x4096x4096"},
		Noisy:       report.SeriesKey{Benchmark: "softmax", Device: "cuda/sm_90", DType: "f32", Shape: "8192x8192"},
		ChangedCase: report.ReproKey{Suite: "golden", Case: "matmul/f32/64x64x64", DeviceClass: "cpu/amd64", Determinism: harness.DeterminismBitwise},
		FlakySpec:   "collectives all-reduce is bitwise stable",
	}
	for i := 0; i < o.Series; i++ {
		p.Stable = append(p.Stable, report.SeriesKey{Benchmark: "layernorm", Device: "cuda/sm_90", DType: "bf16", Shape: fmt.Sprintf("%dx4096", 1024<<i)})
	}
	p.OldDigest, p.NewDigest = digest("old"), digest("new")
	flakyRun := o.Runs / 2
	for r := 0; r < o.Runs; r++ {
		commit := fmt.Sprintf("%07x", 0xc0000+r*0x1111)
		p.Commits = append(p.Commits, commit)
		if r == o.Runs-o.SlowFrom {
			p.SlowStartCommit = commit
		}
		at := o.Start.Add(time.Duration(r) * 24 * time.Hour)
		meta := report.IngestOptions{Override: report.Meta{Commit: commit, Branch: "main", Event: "nightly", Machine: "gpu-1", Time: at}}
		last := r == o.Runs-1

		results := resultsRun(p, o, r, last)
		ginkgoRun := ginkgoReport(p, at, r == flakyRun)
		files := []struct {
			name string
			v    any
			dc   string
		}{
			{fmt.Sprintf("run%03d/results.json", r), results, "cpu/amd64"},
			{fmt.Sprintf("run%03d/ginkgo.json", r), ginkgoRun, "cpu/amd64"},
			{fmt.Sprintf("run%03d/bench.json", r), benchRun(p, o, rng, r, at), "cuda/sm_90"},
		}
		if r == flakyRun {
			// A rerun of the same commit where the flaky spec passed.
			files = append(files, struct {
				name string
				v    any
				dc   string
			}{fmt.Sprintf("run%03d/ginkgo-rerun.json", r), ginkgoReport(p, at.Add(time.Hour), false), "cpu/amd64"})
			p.FlakyCommit = commit
		}
		for _, f := range files {
			data, err := json.Marshal(f.v)
			if err != nil {
				return Plan{}, err
			}
			m := meta
			m.Override.DeviceClass = f.dc
			res, err := db.IngestBytes(ctx, f.name, data, m)
			if err != nil {
				return Plan{}, err
			}
			if last {
				p.LastRunIDs = append(p.LastRunIDs, res.RunID)
			}
		}
	}
	sort.Slice(p.LastRunIDs, func(i, j int) bool { return p.LastRunIDs[i] < p.LastRunIDs[j] })
	return p, nil
}

func digest(s string) string {
	h := make([]byte, 0, 64)
	for len(h) < 64 {
		h = fmt.Appendf(h, "%x", []byte(s))
	}
	return string(h[:64])
}

func resultsRun(p Plan, o Options, r int, last bool) []harness.Result {
	env := harness.Env{EngineVersion: "0.1.0", Commit: p.Commits[r], OS: "linux", Arch: "amd64", Backend: "cpu",
		Device: "cpu amd64 x2", DeviceClass: "cpu/amd64", Determinism: harness.DeterminismBitwise, Hostname: "gpu-1"}
	var out []harness.Result
	for c := 0; c < o.Cases; c++ {
		name := fmt.Sprintf("add/f32/%d", 16<<c)
		d := digest(name)
		if c == 0 {
			name, d = p.ChangedCase.Case, p.OldDigest
			if last {
				d = p.NewDigest
			}
		}
		out = append(out, harness.Result{Schema: harness.ResultSchema, Suite: "golden", Case: name, Backend: "cpu",
			Device: env.Device, DeviceClass: env.DeviceClass, Verdict: harness.VerdictPass, Seed: uint64(c),
			Outputs: []harness.OutputResult{}, Digest: d, Env: env, Timing: harness.Timing{TotalMS: 1 + float64(c)}})
	}
	return out
}

// ginkgo JSON shape: only the fields the reporter reads.
type gReport struct {
	SuitePath        string
	SuiteDescription string
	SuiteSucceeded   bool
	StartTime        time.Time
	SpecReports      []gSpec
}

type gSpec struct {
	ContainerHierarchyTexts []string
	LeafNodeType            string
	LeafNodeText            string
	State                   string
	RunTime                 int64
	NumAttempts             int
	Failure                 struct{ Message string }
}

func ginkgoReport(p Plan, at time.Time, flakyFails bool) []gReport {
	rep := gReport{SuitePath: "/src/suites/collectives", SuiteDescription: "Collectives Suite", SuiteSucceeded: !flakyFails, StartTime: at}
	for i, name := range []string{"all-gather matches the reference", "broadcast reaches every rank", "all-reduce is bitwise stable"} {
		s := gSpec{ContainerHierarchyTexts: []string{"collectives"}, LeafNodeType: "It", LeafNodeText: name, State: "passed",
			RunTime: int64(1e6 * (i + 1)), NumAttempts: 1}
		if "collectives "+name == p.FlakySpec && flakyFails {
			s.State = "failed"
			s.Failure.Message = "rank 3 digest differs from rank 0"
		}
		rep.SpecReports = append(rep.SpecReports, s)
	}
	return []gReport{rep}
}

func benchRun(p Plan, o Options, rng *rand.Rand, r int, at time.Time) report.BenchReport {
	rep := report.BenchReport{Schema: report.BenchSchema, Kind: report.BenchKind, Started: at, Env: map[string]string{"gpu": "H100"}}
	add := func(k report.SeriesKey, level, noise float64) {
		const ref = 2.0
		samples := make([]float64, o.Samples)
		for i := range samples {
			samples[i] = ref * level * (1 + noise*rng.NormFloat64())
		}
		eng := median(samples)
		rep.Rows = append(rep.Rows, report.BenchRow{Op: k.Benchmark, DType: k.DType, Shape: dims(k.Shape), Device: k.Device,
			EngineMS: eng, RefMS: ref, Ratio: eng / ref, TFLOPS: 100 / level, SamplesMS: samples, Ref: "torch"})
	}
	slow := 1.0
	if r >= o.Runs-o.SlowFrom {
		slow = 1 + o.Slowdown
	}
	add(p.Slow, slow, 0.01)
	add(p.Noisy, 1.0, o.Noise)
	for _, k := range p.Stable {
		add(k, 0.8, 0.01)
	}
	return rep
}

func dims(shape string) []int {
	var out []int
	n := 0
	for i := 0; i <= len(shape); i++ {
		if i == len(shape) || shape[i] == 'x' {
			out = append(out, n)
			n = 0
			continue
		}
		n = n*10 + int(shape[i]-'0')
	}
	return out
}

func median(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
