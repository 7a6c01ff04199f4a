package mutate

import (
	"context"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/errs"
	fp "github.com/tessera-qa/tessera-qa/engine/failpoint"
	"github.com/tessera-qa/tessera-qa/job"
)

// DefaultTimeout bounds one suite binary's run under one fault. A fault that makes a suite
// hang counts as caught: CI would time out.
const DefaultTimeout = 10 * time.Minute

// DefaultSeed seeds the smoke job and Ginkgo's randomness (and with it every rapid property
// of the property suite), so that every run judges the same cases.
const DefaultSeed = 1

// Options configure Run. The zero value checks every fault against every suite in the tree.
type Options struct {
	// Root is the module's source tree; "" finds it from the working directory.
	Root string
	// Faults selects faults by name or by prefix ending in '/'; empty means all.
	Faults []string
	// Suites selects suites by name, in the order given; empty means all (Suites order).
	Suites []string
	// StopAtFirstCatch runs each fault's suites in order only until one catches it: enough
	// to prove every fault is caught, much cheaper than the full table.
	StopAtFirstCatch bool
	// FocusOps runs, under each fault, only the specs of suites that label specs by op
	// (golden, determinism) whose op the fault can change (Fault.Ops). The baseline still runs
	// everything. Cheaper; the full table is the authority.
	FocusOps bool
	// Jobs is the number of suite runs at once; 0 means 1 (each suite uses every core).
	Jobs int
	// Timeout bounds each suite binary's run; 0 means DefaultTimeout.
	Timeout time.Duration
	// Seed seeds the smoke job and the Ginkgo suites (-ginkgo.seed); 0 means DefaultSeed.
	Seed uint64
	// SmokeCount is the number of smoke graphs; 0 means job.DefaultSmoke.
	SmokeCount int
	// WorkDir receives the binaries; "" means a temporary directory removed afterwards.
	WorkDir string
	// Progress, if set, hears about each step; calls never overlap.
	Progress func(Event)
}

// Event is one step of a run, for progress output.
type Event struct {
	Phase   string   `json:"phase"` // build, bits, baseline, fault
	Fault   string   `json:"fault,omitempty"`
	Suite   string   `json:"suite,omitempty"`
	Outcome *Outcome `json:"outcome,omitempty"`
	Msg     string   `json:"msg,omitempty"`
}

// SuiteReport is a selected suite and, when it could not take part, why.
type SuiteReport struct {
	Suite
	// Missing: the suite is not in the tree. Unusable: it failed or skipped with no fault
	// on, so its verdicts under a fault would mean nothing.
	Missing  string `json:"missing,omitempty"`
	Unusable string `json:"unusable,omitempty"`
	// skips: unusable because nothing ran (no oracle ...), not because it failed.
	skips bool
}

func (s SuiteReport) usable() bool { return s.Missing == "" && s.Unusable == "" }

// FaultReport is one fault and what each suite did with it.
type FaultReport struct {
	Fault
	Outcomes []Outcome `json:"outcomes"`
	CaughtBy []string  `json:"caught_by"`
}

// Report is what a run found.
type Report struct {
	Root     string        `json:"root"`
	Suites   []SuiteReport `json:"suites"`
	Baseline []Outcome     `json:"baseline"`
	Bits     BitsCheck     `json:"bits"`
	Faults   []FaultReport `json:"faults"`
	Seconds  float64       `json:"seconds"`
}

// Uncaught lists the faults no suite caught.
func (r *Report) Uncaught() []string {
	var out []string
	for _, f := range r.Faults {
		if len(f.CaughtBy) == 0 {
			out = append(out, f.Name)
		}
	}
	return out
}

// BaselineFailures lists the suites that failed with no fault on.
func (r *Report) BaselineFailures() []Outcome {
	var out []Outcome
	for _, o := range r.Baseline {
		if o.Verdict == Failed || o.Verdict == Errored {
			out = append(out, o)
		}
	}
	return out
}

// OK reports whether the baseline passed, the bits matched and every fault was caught.
func (r *Report) OK() bool {
	return len(r.BaselineFailures()) == 0 && r.Bits.OK() && len(r.Uncaught()) == 0 && len(r.Faults) > 0
}

// Run builds the selected suites with -tags failpoints, checks that with no fault on they pass
// and give the normal build's bits, then runs them under each selected fault. The error is
// for runs that could not happen (bad names, no toolchain, a build failure); what the suites
// did is in the report.
func Run(ctx context.Context, opts Options) (*Report, error) {
	start := time.Now()
	if v, ok := os.LookupEnv(fp.EnvVar); ok {
		return nil, errs.New(errs.Input, "%s=%q is set in this environment: unset it, mutate sets it for each run itself", fp.EnvVar, v)
	}
	if fp.Compiled {
		return nil, errs.New(errs.Input, "this binary is a failpoints build: run the mutation check from a normal build, whose bits it compares against")
	}
	faults, err := SelectFaults(opts.Faults)
	if err != nil {
		return nil, err
	}
	selected, err := SelectSuites(opts.Suites)
	if err != nil {
		return nil, err
	}
	o := opts.withDefaults()
	if o.Root == "" {
		if o.Root, err = FindRoot("."); err != nil {
			return nil, err
		}
	}
	goTool, err := GoTool()
	if err != nil {
		return nil, err
	}
	cleanup, err := o.makeWorkDir()
	if err != nil {
		return nil, err
	}
	defer cleanup()
	r := &runner{opts: o, rep: &Report{Root: o.Root}, bins: map[string]string{}}
	for _, s := range selected {
		r.rep.Suites = append(r.rep.Suites, SuiteReport{Suite: s, Missing: s.missing(o.Root)})
	}
	if !slices.ContainsFunc(r.rep.Suites, SuiteReport.usable) {
		return nil, errs.New(errs.Input, "none of the selected suites is in the tree at %s", o.Root)
	}
	if err := r.build(ctx, builder{goTool: goTool, root: o.Root, dir: o.WorkDir}); err != nil {
		return nil, err
	}
	r.event(Event{Phase: "bits", Msg: "comparing a failpoints build with no fault on against this build"})
	r.rep.Bits = checkBits(r.bins[determinismPkg], o.Timeout)
	r.event(Event{Phase: "bits", Msg: r.rep.Bits.String()})
	r.baseline(ctx)
	r.faults(ctx, faults)
	r.rep.Seconds = time.Since(start).Seconds()
	return r.rep, ctx.Err()
}

// determinismPkg is built in every run: the bits check runs its digest child.
const determinismPkg = "suites/determinism"

func (o Options) withDefaults() Options {
	if o.Jobs <= 0 {
		o.Jobs = 1
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.Seed == 0 {
		o.Seed = DefaultSeed
	}
	if o.SmokeCount <= 0 {
		o.SmokeCount = job.DefaultSmoke
	}
	return o
}

func (o *Options) makeWorkDir() (func(), error) {
	if o.WorkDir != "" {
		if err := os.MkdirAll(o.WorkDir, 0o755); err != nil {
			return nil, errs.New(errs.Input, "work directory %s: %v", o.WorkDir, err)
		}
		return func() {}, nil
	}
	d, err := os.MkdirTemp("", "tessera-mutate-")
	if err != nil {
		return nil, errs.New(errs.Input, "work directory: %v", err)
	}
	o.WorkDir = d
	return func() { os.RemoveAll(d) }, nil
}

type runner struct {
	opts Options
	rep  *Report
	bins map[string]string
	mu   sync.Mutex // serializes Progress
}

func (r *runner) event(e Event) {
	if r.opts.Progress == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.opts.Progress(e)
}

func (r *runner) build(ctx context.Context, b builder) error {
	type unit struct {
		kind Kind
		pkg  string
	}
	units := []unit{{KindGinkgo, determinismPkg}}
	for _, s := range r.rep.Suites {
		if s.Missing != "" {
			continue
		}
		for _, p := range s.Packages {
			if !slices.Contains(units, unit{s.Kind, p}) {
				units = append(units, unit{s.Kind, p})
			}
		}
	}
	var tests []string
	for _, u := range units {
		if u.kind == KindSmoke {
			r.event(Event{Phase: "build", Msg: "go build -tags failpoints ./" + u.pkg})
			bin, err := b.buildCommand(ctx, u.pkg)
			if err != nil {
				return err
			}
			r.bins[u.pkg] = bin
			continue
		}
		tests = append(tests, u.pkg)
	}
	if len(tests) == 0 {
		return nil
	}
	r.event(Event{Phase: "build", Msg: "go test -c -tags failpoints " + strings.Join(tests, " ")})
	bins, err := b.buildTests(ctx, tests)
	if err != nil {
		return err
	}
	maps.Copy(r.bins, bins)
	return nil
}

func (r *runner) suiteRun(s Suite, f *Fault) suiteRun {
	var name string
	var ops []string
	if f != nil {
		name = f.Name
		if r.opts.FocusOps && s.OpLabels {
			ops = f.Ops
		}
	}
	return suiteRun{suite: s, bins: r.bins, fault: name, ops: ops, root: r.opts.Root, workDir: r.opts.WorkDir, timeout: r.opts.Timeout,
		seed: r.opts.Seed, smokeCount: r.opts.SmokeCount}
}

// baseline runs every present suite with no fault. One that fails or skips everything
// cannot judge a fault and sits out the rest of the run.
func (r *runner) baseline(ctx context.Context) {
	for i, s := range r.rep.Suites {
		if s.Missing != "" {
			continue
		}
		o := r.suiteRun(s.Suite, nil).run(ctx)
		switch o.Verdict {
		case Missed:
			o.Verdict = Passed
		case Caught:
			o.Verdict = Failed
			r.rep.Suites[i].Unusable = "fails with no fault on: " + o.Detail
		case Errored:
			r.rep.Suites[i].Unusable = "cannot run: " + o.Detail
		case Skipped:
			r.rep.Suites[i].Unusable, r.rep.Suites[i].skips = "skips with no fault on: "+o.Detail, true
		}
		r.rep.Baseline = append(r.rep.Baseline, o)
		r.event(Event{Phase: "baseline", Suite: s.Name, Outcome: &o})
	}
}

// faults runs the fault x suite table on opts.Jobs workers. With StopAtFirstCatch one task
// is a fault's whole column of suites, run in order; otherwise one task is one cell.
func (r *runner) faults(ctx context.Context, faults []Fault) {
	r.rep.Faults = make([]FaultReport, len(faults))
	var tasks []func()
	for i, f := range faults {
		fr := &r.rep.Faults[i]
		fr.Fault, fr.Outcomes, fr.CaughtBy = f, make([]Outcome, len(r.rep.Suites)), []string{}
		for j, s := range r.rep.Suites {
			switch {
			case !s.applies(f):
				fr.Outcomes[j] = Outcome{Suite: s.Name, Verdict: Skipped, Detail: "not run against the " + string(f.Layer) + " layer"}
			case s.Missing != "" || s.skips:
				fr.Outcomes[j] = Outcome{Suite: s.Name, Verdict: Skipped, Detail: s.Missing + s.Unusable}
			case s.Unusable != "":
				fr.Outcomes[j] = Outcome{Suite: s.Name, Verdict: NotRun, Detail: s.Unusable}
			default:
				fr.Outcomes[j] = Outcome{Suite: s.Name, Verdict: NotRun}
			}
		}
		cell := func(j int) bool {
			if !r.rep.Suites[j].usable() || !r.rep.Suites[j].applies(f) || ctx.Err() != nil {
				return false
			}
			o := r.suiteRun(r.rep.Suites[j].Suite, &f).run(ctx)
			fr.Outcomes[j] = o
			r.event(Event{Phase: "fault", Fault: f.Name, Suite: o.Suite, Outcome: &o})
			return o.Verdict == Caught
		}
		if r.opts.StopAtFirstCatch {
			tasks = append(tasks, func() {
				for _, j := range firstSuitesFirst(r.rep.Suites, f.First) {
					if cell(j) {
						return
					}
				}
			})
			continue
		}
		for j := range r.rep.Suites {
			tasks = append(tasks, func() { cell(j) })
		}
	}
	runTasks(tasks, r.opts.Jobs)
	for i := range r.rep.Faults {
		fr := &r.rep.Faults[i]
		for _, o := range fr.Outcomes {
			if o.Verdict == Caught {
				fr.CaughtBy = append(fr.CaughtBy, o.Suite)
			}
		}
	}
}

func runTasks(tasks []func(), n int) {
	next := make(chan func())
	var wg sync.WaitGroup
	for range min(n, max(len(tasks), 1)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for t := range next {
				t()
			}
		}()
	}
	for _, t := range tasks {
		next <- t
	}
	close(next)
	wg.Wait()
}

// firstSuitesFirst is the order a fault meets the suites in a run that stops at its first
// catch: the suites it names in First, then the others, each group in the run's order.
func firstSuitesFirst(suites []SuiteReport, first []string) []int {
	var head, tail []int
	for j, s := range suites {
		if slices.Contains(first, s.Name) {
			head = append(head, j)
		} else {
			tail = append(tail, j)
		}
	}
	return append(head, tail...)
}
