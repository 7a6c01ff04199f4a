package harness

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/backend"
	"github.com/tessera-qa/tessera-qa/engine/compiler"
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/profile"
	"github.com/tessera-qa/tessera-qa/engine/ref"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
)

// ModeDigest is the CheckResult.Mode of an output compared by digest only (determinism
// cases: Case.ExpectDigests).
const ModeDigest = "digest"

// Case is one graph with concrete inputs and how to judge its outputs.
type Case struct {
	Suite, Name string
	Graph       *graph.Graph
	Inputs      map[string]*tensor.Tensor
	// Seed is the seed the inputs were drawn from (recorded; RunCase does not draw).
	Seed uint64
	// Tolerances holds one tolerance per graph output; nil means DefaultTolerance of each
	// output's dtype.
	Tolerances []Tolerance
	Labels     []string
	// ExpectDigests, when non-nil, turns the case into a determinism check: each output's
	// digest must equal the one given (one per output) and the golden model is not run.
	ExpectDigests []string
}

// Runner runs cases on one backend.
type Runner struct {
	Backend backend.Backend
	// ArtifactsDir, when set, receives a replay manifest for every failing case; its path is
	// recorded in Result.Replay.
	ArtifactsDir string
	// Compile is passed to compiler.Compile.
	Compile compiler.Options
	// Profile, when set, receives the run's kernel launches and copies (the backend's
	// profiling hook; the bits do not change).
	Profile profile.Sink
}

// RunCase runs c on b with no artifacts directory: Runner{Backend: b}.Run(c).
func RunCase(c Case, b backend.Backend) Result { return Runner{Backend: b}.Run(c) }

// Run compiles c's graph, runs it on the backend, compares every output with the golden
// model (engine/ref) under the case's tolerances and returns the verdict with digests,
// schedule hash, timings and env. It never panics: a panic in the compiler, backend or golden
// model becomes an error verdict naming the stage.
func (rn Runner) Run(c Case) (r Result) {
	start := time.Now()
	r = Result{Schema: ResultSchema, Suite: c.Suite, Case: c.Name, Labels: c.Labels, Seed: c.Seed,
		Outputs: []OutputResult{}, Env: CaptureEnv(rn.Backend)}
	defer func() { r.Timing.TotalMS = ms(time.Since(start)) }()
	if rn.Backend == nil {
		return r.errored(errs.New(errs.Input, "case %s/%s: no backend", c.Suite, c.Name))
	}
	r.Backend, r.Device, r.DeviceClass = r.Env.Backend, r.Env.Device, r.Env.DeviceClass
	tols, err := c.resolve()
	if err != nil {
		return r.errored(err)
	}
	r.InputDigests = inputDigests(c.Inputs)
	if err := rn.Backend.Available(); err != nil {
		r.Verdict, r.Reason, r.ErrorCode = VerdictSkip, err.Error(), string(errs.CodeOf(err))
		return r
	}
	rn.execute(c, tols, &r)
	if r.Failed() && rn.ArtifactsDir != "" {
		rn.writeReplay(c, &r)
	}
	return r
}

// execute runs the stages after the case is known to be well formed and fills r.
func (rn Runner) execute(c Case, tols []Tolerance, r *Result) {
	var prog *compiler.Program
	t0 := time.Now()
	err := protect("compile", func() (err error) { prog, err = compiler.Compile(c.Graph, rn.Compile); return })
	r.Timing.CompileMS = ms(time.Since(t0))
	if err == nil && prog == nil {
		err = errs.New(errs.Internal, "compile: no program and no error")
	}
	if err != nil {
		*r = r.errored(err)
		return
	}
	r.ScheduleHash = prog.ScheduleHash
	r.Computation = ComputationKey(c.Graph, r.InputDigests, prog.ScheduleHash)

	// The backend gets copies, so that one writing into its inputs is caught below and cannot
	// change what the golden model and the replay manifest see.
	runIn := make(map[string]*tensor.Tensor, len(c.Inputs))
	for name, t := range c.Inputs {
		runIn[name] = t.Clone()
	}
	var got []*tensor.Tensor
	t0 = time.Now()
	err = protect("run", func() (err error) {
		if rn.Profile != nil {
			got, err = backend.RunProfiled(rn.Backend, prog, runIn, rn.Profile)
		} else {
			got, err = rn.Backend.Run(prog, runIn)
		}
		return
	})
	r.Timing.RunMS = ms(time.Since(t0))
	if err != nil {
		*r = r.errored(err)
		return
	}
	r.Digest = CombinedDigest(got)
	var problems []string
	if name := mutatedInput(runIn, r.InputDigests); name != "" {
		problems = append(problems, fmt.Sprintf("backend modified input %%%s", name))
	}
	if len(got) != len(c.Graph.Outputs) {
		problems = append(problems, fmt.Sprintf("backend returned %d outputs, graph %s has %d", len(got), c.Graph.Name, len(c.Graph.Outputs)))
	}

	var want []*tensor.Tensor
	if c.ExpectDigests == nil {
		t0 = time.Now()
		err = protect("golden model", func() (err error) { want, err = ref.Run(c.Graph, c.Inputs); return })
		r.Timing.RefMS = ms(time.Since(t0))
		if err != nil {
			*r = r.errored(errs.Wrap(errs.Internal, err, "golden model"))
			return
		}
	}

	t0 = time.Now()
	for i, v := range c.Graph.Outputs {
		var g *tensor.Tensor
		if i < len(got) {
			g = got[i]
		}
		o := OutputResult{Name: v.Name, DType: v.Type.DType.String(), Shape: slices.Clone(v.Type.Shape), Digest: Digests([]*tensor.Tensor{g})[0]}
		if c.ExpectDigests != nil {
			o.Check = digestCheck(o.Digest, c.ExpectDigests[i], v.Type.NumElems())
		} else {
			o.Check = Check(g, want[i], tols[i])
		}
		if !o.Check.Pass {
			problems = append(problems, fmt.Sprintf("output %%%s: %s", v.Name, o.Check.Reason))
		}
		r.Outputs = append(r.Outputs, o)
	}
	r.Timing.CheckMS = ms(time.Since(t0))

	r.Verdict = VerdictPass
	if len(problems) > 0 {
		r.Verdict, r.Reason = VerdictFail, strings.Join(problems, "; ")
		if c.ExpectDigests != nil {
			r.ErrorCode = string(errs.Nondeterministic)
		}
	}
}

func digestCheck(got, want string, n int) CheckResult {
	c := CheckResult{Mode: ModeDigest, Elements: n, Worst: -1, Pass: got == want}
	if !c.Pass {
		c.Reason = fmt.Sprintf("digest %s, expected %s", short(got), short(want))
	}
	return c
}

func short(d string) string {
	if len(d) > 16 {
		return d[:16]
	}
	return d
}

// resolve checks that the case can run at all and returns one tolerance per output.
func (c Case) resolve() ([]Tolerance, error) {
	id := c.Suite + "/" + c.Name
	if c.Graph == nil {
		return nil, errs.New(errs.Input, "case %s: nil graph", id)
	}
	if err := graph.Verify(c.Graph); err != nil {
		return nil, errs.Wrap(errs.Input, err, "case %s", id)
	}
	if err := graph.CheckInputs(c.Graph, c.Inputs); err != nil {
		return nil, errs.Wrap(errs.Input, err, "case %s", id)
	}
	outs := c.Graph.Outputs
	if c.ExpectDigests != nil && len(c.ExpectDigests) != len(outs) {
		return nil, errs.New(errs.Input, "case %s: %d expected digests for %d outputs", id, len(c.ExpectDigests), len(outs))
	}
	if c.Tolerances == nil {
		tols := make([]Tolerance, len(outs))
		for i, v := range outs {
			tols[i] = DefaultTolerance(v.Type.DType)
		}
		return tols, nil
	}
	if len(c.Tolerances) != len(outs) {
		return nil, errs.New(errs.Input, "case %s: %d tolerances for %d outputs", id, len(c.Tolerances), len(outs))
	}
	for i, t := range c.Tolerances {
		if err := t.Validate(); err != nil {
			return nil, errs.Wrap(errs.Input, err, "case %s output %%%s", id, outs[i].Name)
		}
	}
	return slices.Clone(c.Tolerances), nil
}

func (r Result) errored(err error) Result {
	r.Verdict, r.Reason, r.ErrorCode = VerdictError, err.Error(), string(errs.CodeOf(err))
	return r
}

func (rn Runner) writeReplay(c Case, r *Result) {
	m, err := ManifestFor(c, *r)
	if err == nil {
		r.Replay, err = WriteManifest(rn.ArtifactsDir, m)
	}
	if err != nil {
		r.Reason += " (replay manifest not written: " + err.Error() + ")"
	}
}

// protect runs f, turning a panic into a coded error naming the stage.
func protect(stage string, f func() error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = errs.New(errs.Internal, "panic during %s: %v", stage, p)
		}
	}()
	return f()
}

func inputDigests(in map[string]*tensor.Tensor) map[string]string {
	out := make(map[string]string, len(in))
	for name, t := range in {
		out[name] = Digests([]*tensor.Tensor{t})[0]
	}
	return out
}

// mutatedInput returns the first input (by name) whose bits changed since digests were taken.
func mutatedInput(in map[string]*tensor.Tensor, digests map[string]string) string {
	for _, name := range slices.Sorted(maps.Keys(in)) {
		if Digests([]*tensor.Tensor{in[name]})[0] != digests[name] {
			return name
		}
	}
	return ""
}

func ms(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e6 }
