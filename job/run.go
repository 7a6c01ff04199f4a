// Package job holds the logic of the tessera-qa verbs that do more than call one package:
// the `run` main job (golden checks, in-process determinism, randomized smoke test, short
// in-process collectives, training, chaos and stress checks, CPU benchmarks; results, JUnit,
// replay manifests and measurement files in a folder of its own per run: rundir.go,
// measure.go), backend choice, and `exec`'s input and output handling.
//
// It sits beside the CLI, above the checks it orchestrates (golden, harness, collectives),
// not inside harness/: harness holds only what every check shares (issue 13).
package job

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/atomicfile"
	"github.com/tessera-qa/tessera-qa/engine/backend"
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/harness"
	"github.com/tessera-qa/tessera-qa/harness/junit"
)

// Suite names, in the order Run runs them.
const (
	SuiteGolden      = "golden"
	SuiteDeterminism = "determinism"
	SuiteSmoke       = "smoke"
	// SuiteCheck: `tessera-qa check` on docs/examples/mlp.tg (check.go).
	SuiteCheck = "check"
	// SuiteCollectives: a short in-process collectives check (collectives.go).
	SuiteCollectives = "collectives"
	// SuiteTraining: short runs of the reference training workload (training.go).
	SuiteTraining = "training"
	// SuiteChaos: short in-process fault scenarios with the recovery checker (chaos.go).
	SuiteChaos = "chaos"
	// SuiteStress: a short goroutine soak with digest checks and leak monitors (stress.go).
	SuiteStress = "stress"
	// SuiteBench: CPU-backend timings side by side with the golden model (bench.go).
	SuiteBench = "bench"
	// SuiteDoctor: `tessera-qa doctor --level 1` on this node (doctor.go).
	SuiteDoctor = "doctor"
)

// Suites lists every suite Run knows.
var Suites = []string{SuiteDoctor, SuiteGolden, SuiteDeterminism, SuiteSmoke, SuiteCheck, SuiteCollectives, SuiteTraining, SuiteChaos, SuiteStress, SuiteBench}

// DefaultSmoke is the number of random smoke graphs a run draws by default.
const DefaultSmoke = 200

// Options configure Run. The zero value (plus a seed) runs every suite on the best backend.
type Options struct {
	// Backend names the backend; "" picks the best available (ChooseBackend).
	Backend string
	// Chosen, when set, is a choice already made (and printed) by the caller; Backend is
	// then ignored.
	Chosen *Choice
	// Seed seeds the smoke generator.
	Seed uint64
	// Smoke is the number of random smoke graphs; negative means none.
	Smoke int
	// OutDir receives results.json and junit.xml of this run (the latest) and, under
	// runs/TIME-PID/, the run's own folder: its results.json, junit.xml, replay/, chaos/,
	// stress/ and the measurement files (measure.go). Created if needed.
	OutDir string
	// Keep is how many run folders OutDir/runs keeps (this one included): the oldest ones
	// beyond it are removed after the run. 0 keeps every run.
	Keep int
	// Command is the command line recorded in the measurement files ("" : "tessera-qa run").
	Command string
	// Suites selects suites by name; empty means all.
	Suites []string
	// Workers runs cases concurrently; 0 means GOMAXPROCS.
	Workers int
	// Progress, if set, hears about every case; its methods are never called concurrently.
	Progress Progress
	// Self is the program the check suite starts as its second process (`Self exec`); ""
	// skips that row.
	Self string
}

// Progress follows a run. Calls are serialized by Run.
type Progress interface {
	// SuiteStart is called before a suite's first case, with the number of cases.
	SuiteStart(suite string, total int)
	// CaseDone is called as each case finishes, in completion order.
	CaseDone(suite string, r harness.Result)
	// SuiteEnd is called after a suite's last case.
	SuiteEnd(s SuiteSummary)
}

// SuiteSummary counts one suite's verdicts.
type SuiteSummary struct {
	Suite    string        `json:"suite"`
	Passed   int           `json:"passed"`
	Failed   int           `json:"failed"`
	Errors   int           `json:"errors"`
	Skipped  int           `json:"skipped"`
	Duration time.Duration `json:"-"`
	Seconds  float64       `json:"seconds"`
}

// OK reports whether the suite had no failure and no error.
func (s SuiteSummary) OK() bool { return s.Failed == 0 && s.Errors == 0 }

// Report is what a run did.
type Report struct {
	Backend     string         `json:"backend"`
	Device      string         `json:"device"`
	DeviceClass string         `json:"device_class"`
	BackendWhy  string         `json:"backend_reason"`
	Seed        uint64         `json:"seed,string"`
	Smoke       int            `json:"smoke"`
	Suites      []SuiteSummary `json:"suites"`
	ResultsPath string         `json:"results"`
	JUnitPath   string         `json:"junit"`
	// RunDir is this run's own folder (OutDir/runs/TIME-PID): everything the run wrote,
	// which later runs leave alone.
	RunDir string `json:"run_dir"`
	// Measurements are the measurement files in RunDir (chaos.json, stress.json,
	// collectives.json, bench.json: what ran), which `run` stores with results.json.
	Measurements []string `json:"measurements"`
	// Pruned lists the oldest run folders removed after this run (Options.Keep).
	Pruned      []string         `json:"pruned,omitempty"`
	ReplayDir   string           `json:"replay_dir"`
	ReplayFiles []string         `json:"replay_files"`
	Seconds     float64          `json:"seconds"`
	Results     []harness.Result `json:"-"`
}

// OK reports whether every suite passed.
func (r *Report) OK() bool {
	for _, s := range r.Suites {
		if !s.OK() {
			return false
		}
	}
	return true
}

// Failures returns the results that failed or errored, in run order.
func (r *Report) Failures() []harness.Result {
	var out []harness.Result
	for _, x := range r.Results {
		if x.Failed() {
			out = append(out, x)
		}
	}
	return out
}

// Run chooses a backend, runs the selected suites, and writes into a new folder of its own,
// opts.OutDir/runs/TIME-PID: results.json, junit.xml, a replay manifest per failing case
// under replay/, the chaos and stress artifacts and the measurement files; results.json and
// junit.xml are also copied to opts.OutDir (the latest run's, where CI reads them). The error is for runs that could not
// happen (no usable backend, an unwritable output directory, an unknown suite); failing checks
// are in the report.
func Run(opts Options) (*Report, error) {
	start := time.Now()
	suites, err := selectSuites(opts.Suites)
	if err != nil {
		return nil, err
	}
	var choice Choice
	if opts.Chosen != nil && opts.Chosen.Backend != nil {
		choice = *opts.Chosen
	} else if choice, err = ChooseBackend(opts.Backend); err != nil {
		return nil, err
	}
	if opts.OutDir == "" {
		opts.OutDir = "tessera-qa-out"
	}
	if opts.Command == "" {
		opts.Command = "tessera-qa run"
	}
	runDir, err := newRunDir(opts.OutDir, start)
	if err != nil {
		return nil, err
	}
	replayDir := filepath.Join(runDir, "replay")
	if err := os.MkdirAll(replayDir, 0o755); err != nil {
		return nil, errs.New(errs.Input, "run folder %s: %v", runDir, err)
	}
	b := choice.Backend
	rep := &Report{
		Backend: b.Name(), Device: b.Device(), DeviceClass: b.DeviceClass(), BackendWhy: choice.Reason,
		Seed: opts.Seed, Smoke: max(opts.Smoke, 0), ReplayDir: replayDir, ReplayFiles: []string{},
		ResultsPath: filepath.Join(opts.OutDir, "results.json"), JUnitPath: filepath.Join(opts.OutDir, "junit.xml"),
		RunDir: runDir, Measurements: []string{},
	}
	r := &runner{opts: opts, b: b, runDir: runDir, harness: harness.Runner{Backend: b, ArtifactsDir: replayDir}}
	if r.opts.Workers <= 0 {
		r.opts.Workers = runtime.GOMAXPROCS(0)
	}
	for _, s := range suites {
		tasks, err := r.tasks(s)
		if err != nil {
			return nil, err
		}
		sum, results := r.runSuite(s, tasks)
		rep.Suites = append(rep.Suites, sum)
		rep.Results = append(rep.Results, results...)
	}
	for _, x := range rep.Results {
		if x.Replay != "" {
			rep.ReplayFiles = append(rep.ReplayFiles, x.Replay)
		}
	}
	if rep.Measurements, err = r.measured.write(runDir, start, opts.Command); err != nil {
		return nil, err
	}
	own := func(p string) string { return filepath.Join(runDir, filepath.Base(p)) }
	if err := harness.WriteResults(own(rep.ResultsPath), rep.Results); err != nil {
		return nil, err
	}
	if err := writeJUnit(own(rep.JUnitPath), rep.Results); err != nil {
		return nil, err
	}
	for _, p := range []string{rep.ResultsPath, rep.JUnitPath} {
		if err := copyFile(own(p), p); err != nil {
			return nil, err
		}
	}
	if rep.Pruned, err = pruneRuns(opts.OutDir, opts.Keep, runDir); err != nil {
		return nil, err
	}
	rep.Seconds = time.Since(start).Seconds()
	return rep, nil
}

// RunResults is the path of the run's own results.json (the one the results store records:
// OutDir/results.json is replaced by the next run).
func (r *Report) RunResults() string { return filepath.Join(r.RunDir, "results.json") }

func selectSuites(names []string) ([]string, error) {
	if len(names) == 0 {
		return Suites, nil
	}
	var out []string
	for _, s := range Suites {
		for _, n := range names {
			if n == s {
				out = append(out, s)
				break
			}
		}
	}
	for _, n := range names {
		known := false
		for _, s := range Suites {
			known = known || n == s
		}
		if !known {
			return nil, errs.New(errs.Input, "unknown suite %q (have %v)", n, Suites)
		}
	}
	return out, nil
}

func writeJUnit(path string, results []harness.Result) error {
	if err := atomicfile.WriteFunc(path, func(w io.Writer) error { return junit.Write(w, "tessera-qa", results) }); err != nil {
		return errs.New(errs.Input, "write %s: %v", path, err)
	}
	return nil
}

// task produces one result; it runs on a worker goroutine.
type task func() harness.Result

type runner struct {
	opts     Options
	b        backend.Backend
	runDir   string
	harness  harness.Runner
	measured measurements
	mu       sync.Mutex // serializes Progress calls
}

func (r *runner) tasks(suite string) ([]task, error) {
	switch suite {
	case SuiteGolden:
		return r.goldenTasks()
	case SuiteDeterminism:
		return r.determinismTasks()
	case SuiteSmoke:
		return r.smokeTasks(), nil
	case SuiteCheck:
		return r.checkTasks(), nil
	case SuiteCollectives:
		return r.collectivesTasks(), nil
	case SuiteTraining:
		return r.trainingTasks(), nil
	case SuiteChaos:
		return r.chaosTasks(), nil
	case SuiteStress:
		return r.stressTasks(), nil
	case SuiteBench:
		return r.benchTasks(), nil
	case SuiteDoctor:
		return r.doctorTasks(), nil
	}
	return nil, errs.New(errs.Internal, "no tasks for suite %q", suite)
}

// runSuite runs tasks on the worker pool and returns the results in task order, so that
// results.json does not depend on scheduling.
func (r *runner) runSuite(suite string, tasks []task) (SuiteSummary, []harness.Result) {
	start := time.Now()
	r.progress(func(p Progress) { p.SuiteStart(suite, len(tasks)) })
	results := make([]harness.Result, len(tasks))
	next := make(chan int)
	var wg sync.WaitGroup
	workers := r.opts.Workers
	if suite == SuiteBench {
		workers = 1 // timings: no neighbour on the other core
	}
	for range min(workers, max(len(tasks), 1)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				res := safely(suite, i, tasks[i])
				results[i] = res
				r.progress(func(p Progress) { p.CaseDone(suite, res) })
			}
		}()
	}
	for i := range tasks {
		next <- i
	}
	close(next)
	wg.Wait()
	sum := SuiteSummary{Suite: suite}
	for _, x := range results {
		switch x.Verdict {
		case harness.VerdictPass:
			sum.Passed++
		case harness.VerdictSkip:
			sum.Skipped++
		case harness.VerdictError:
			sum.Errors++
		default:
			sum.Failed++
		}
	}
	sum.Duration = time.Since(start)
	sum.Seconds = sum.Duration.Seconds()
	r.progress(func(p Progress) { p.SuiteEnd(sum) })
	return sum, results
}

func (r *runner) progress(f func(Progress)) {
	if r.opts.Progress == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	f(r.opts.Progress)
}

// safely runs t, turning a panic on the worker goroutine (which the CLI's top-level recover
// cannot see) into an errored result.
func safely(suite string, i int, t task) (res harness.Result) {
	defer func() {
		if p := recover(); p != nil {
			res = harness.Result{Schema: harness.ResultSchema, Suite: suite, Case: fmt.Sprintf("#%d", i),
				Verdict: harness.VerdictError, ErrorCode: string(errs.Internal),
				Reason: fmt.Sprintf("E_INTERNAL: panic in %s case %d: %v", suite, i, p), Outputs: []harness.OutputResult{}}
		}
	}()
	return t()
}

// errored is the result of a case that could not even be set up.
func (r *runner) errored(suite, name string, err error) harness.Result {
	return harness.Result{Schema: harness.ResultSchema, Suite: suite, Case: name, Backend: r.b.Name(),
		Device: r.b.Device(), DeviceClass: r.b.DeviceClass(), Verdict: harness.VerdictError,
		ErrorCode: string(errs.CodeOf(err)), Reason: err.Error(), Outputs: []harness.OutputResult{},
		Env: harness.CaptureEnv(r.b)}
}

func (r *runner) smokeTasks() []task {
	var ts []task
	for i := range max(r.opts.Smoke, 0) {
		ts = append(ts, func() harness.Result {
			c, err := SmokeCase(r.opts.Seed, i)
			if err != nil {
				return r.errored(SuiteSmoke, fmt.Sprintf("%03d", i), errs.Wrap(errs.Internal, err, "smoke generator (seed %d)", r.opts.Seed))
			}
			return r.harness.Run(c)
		})
	}
	return ts
}
