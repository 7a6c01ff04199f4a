package differential

import (
	"fmt"
	"strings"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/backend"
	"github.com/tessera-qa/tessera-qa/engine/compiler"
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/engine/ref"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
	"github.com/tessera-qa/tessera-qa/golden"
	"github.com/tessera-qa/tessera-qa/harness"
	"github.com/tessera-qa/tessera-qa/harness/accum"
)

// DefaultBatch is the number of cases sent to the oracle in one request: enough that the
// round trip and Python's per-request work vanish, small enough that a timeout names few ops.
const DefaultBatch = 64

// Case is one golden catalogue spec with one draw of its inputs.
type Case struct {
	Spec golden.Spec
	// Draw is 0 for the spec's own inputs (those of its golden file) and k for the k-th extra
	// draw, seeded harness.SubSeed(spec seed, "differential/k/attempt") (see Cases).
	Draw   int
	Seed   uint64
	Inputs map[string]*tensor.Tensor
}

// Name is the spec's name, with "#k" for the k-th extra draw.
func (c Case) Name() string {
	if c.Draw == 0 {
		return c.Spec.Name
	}
	return fmt.Sprintf("%s#%d", c.Spec.Name, c.Draw)
}

// maxRedraws bounds the attempts at a meaningful extra draw of one spec.
const maxRedraws = 16

// Cases expands specs into seeds draws each (seeds >= 1), in spec order. The first draw is the
// spec's own inputs. An extra draw is redrawn (up to maxRedraws times) until the golden
// model's outputs make a meaningful check under the spec's tolerance: the catalogue tuned its
// tolerances to its own inputs, and another draw of, say, a one-element fp8 log can round to
// zero, where any output would pass and harness.Check rightly calls the check meaningless.
func Cases(specs []golden.Spec, seeds int) ([]Case, error) {
	if seeds < 1 {
		return nil, errs.New(errs.Input, "seeds must be >= 1, got %d", seeds)
	}
	out := make([]Case, 0, len(specs)*seeds)
	for _, s := range specs {
		for k := range seeds {
			c := Case{Spec: s, Draw: k, Seed: s.Seed}
			for attempt := range maxRedraws {
				if k > 0 {
					c.Seed = harness.SubSeed(s.Seed, fmt.Sprintf("differential/%d/%d", k, attempt))
				}
				in, err := harness.RandomInputs(s.Graph, c.Seed, s.Dists)
				if err != nil {
					return nil, errs.Wrap(errs.Input, err, "spec %s", s.Name)
				}
				c.Inputs = in
				if k == 0 || meaningful(s, in) {
					break
				}
			}
			out = append(out, c)
		}
	}
	return out, nil
}

// meaningful reports whether the golden model's outputs on inputs pass a self-check under the
// spec's tolerances (the magnitude guard and the constant-output rule).
func meaningful(s golden.Spec, inputs map[string]*tensor.Tensor) bool {
	want, err := ref.Run(s.Graph, inputs)
	if err != nil {
		return true // the run reports it
	}
	for i, w := range want {
		if !harness.Check(w, w, s.Tolerances[i]).Pass {
			return false
		}
	}
	return true
}

// Outcome is the verdict of one case: the engine's outputs against the oracle's.
type Outcome struct {
	Op    string
	DType numerics.DType
	// Mode says how the oracle computed the case: "native", or the reason it did otherwise
	// ("f32, rounded once (...)", "emulated: ...", the fp8 transport).
	Mode   string
	Result harness.Result
}

// Runner runs cases on an engine backend and on the oracle and compares them.
type Runner struct {
	Oracle *Oracle
	// Target is the oracle's device and kernel policy.
	Target  Target
	Backend backend.Backend
	// Suite names the results (default "differential/<framework>").
	Suite string
	// Batch is the number of cases per oracle request (0: DefaultBatch).
	Batch int
	// ArtifactsDir, when set, receives a replay manifest for every failing case. The replay
	// re-runs the case against the golden model (engine/ref), not the oracle.
	ArtifactsDir string
	// Progress, when set, is called after each batch with the cases done so far.
	Progress func(done, total int)
}

// Run checks every case and returns one outcome per case, in order. It never panics and
// never stops early: a case that cannot run gets an error verdict, an op the oracle cannot
// compute a skip verdict saying "unsupported by oracle: ...".
func (rn Runner) Run(cases []Case) []Outcome {
	batch := rn.Batch
	if batch <= 0 {
		batch = DefaultBatch
	}
	out := make([]Outcome, 0, len(cases))
	for start := 0; start < len(cases); start += batch {
		end := min(start+batch, len(cases))
		out = append(out, rn.runBatch(cases[start:end])...)
		if rn.Progress != nil {
			rn.Progress(end, len(cases))
		}
	}
	return out
}

// engineRun is the engine's side of one case.
type engineRun struct {
	outs     []*tensor.Tensor
	err      error
	schedule string
	compile  time.Duration
	run      time.Duration
}

// runBatch sends the batch to the oracle and, while the oracle computes, runs the engine.
func (rn Runner) runBatch(cases []Case) []Outcome {
	prepared := make([]*Prepared, len(cases))
	prepErr := make([]error, len(cases))
	var wire []WireCase
	var slot []int
	for i, c := range cases {
		prepared[i], prepErr[i] = Prepare(c.Name(), c.Spec.Graph, c.Inputs)
		if prepErr[i] == nil {
			wire = append(wire, prepared[i].Case)
			slot = append(slot, i)
		}
	}
	type answer struct {
		results []WireResult
		err     error
		took    time.Duration
	}
	done := make(chan answer, 1)
	go func() {
		t0 := time.Now()
		var a answer
		if rn.Oracle == nil {
			a.err = errs.New(errs.Input, "differential run without an oracle")
		} else {
			a.results, a.err = rn.Oracle.Eval(rn.Target, wire)
		}
		a.took = time.Since(t0)
		done <- a
	}()
	engine := make([]engineRun, len(cases))
	for i, c := range cases {
		if prepErr[i] == nil {
			engine[i] = rn.runEngine(c)
		}
	}
	ans := <-done
	results := make([]*WireResult, len(cases))
	for k, i := range slot {
		if ans.err == nil {
			results[i] = &ans.results[k]
		}
	}
	out := make([]Outcome, len(cases))
	for i, c := range cases {
		switch {
		case prepErr[i] != nil:
			out[i] = rn.judge(c, nil, engineRun{}, nil, prepErr[i])
		case ans.err != nil:
			out[i] = rn.judge(c, prepared[i], engine[i], nil, ans.err)
		default:
			out[i] = rn.judge(c, prepared[i], engine[i], results[i], nil)
		}
		// The oracle is this result's reference: RefMS holds its time per case (the request's
		// time divided evenly among the request's cases).
		out[i].Result.Timing.RefMS = float64(ans.took.Microseconds()) / 1e3 / float64(max(1, len(wire)))
	}
	return out
}

func (rn Runner) runEngine(c Case) (e engineRun) {
	var prog *compiler.Program
	t0 := time.Now()
	e.err = protect("compile", func() (err error) { prog, err = compiler.Compile(c.Spec.Graph, compiler.Options{}); return })
	e.compile = time.Since(t0)
	if e.err != nil {
		return e
	}
	e.schedule = prog.ScheduleHash
	in := make(map[string]*tensor.Tensor, len(c.Inputs))
	for k, t := range c.Inputs {
		in[k] = t.Clone()
	}
	t0 = time.Now()
	e.err = protect("run", func() (err error) { e.outs, err = rn.Backend.Run(prog, in); return })
	e.run = time.Since(t0)
	if e.err == nil && len(e.outs) != len(c.Spec.Graph.Outputs) {
		e.err = errs.New(errs.Internal, "backend %s returned %d outputs for %d", rn.Backend.Name(), len(e.outs), len(c.Spec.Graph.Outputs))
	}
	return e
}

// protect turns a panic in the engine into a coded error naming the stage.
func protect(stage string, f func() error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = errs.New(errs.Internal, "panic during %s: %v", stage, p)
		}
	}()
	return f()
}

// judge builds the outcome of one case from whatever got that far.
func (rn Runner) judge(c Case, p *Prepared, e engineRun, w *WireResult, failure error) (o Outcome) {
	o = Outcome{Op: c.Spec.Op, DType: c.Spec.DType}
	r := harness.Result{Schema: harness.ResultSchema, Suite: rn.suite(), Case: c.Name(), Seed: c.Seed,
		Labels: []string{"differential", rn.framework(), rn.Target.Device}, Outputs: []harness.OutputResult{},
		Env: harness.CaptureEnv(rn.Backend), InputDigests: map[string]string{}}
	r.Backend, r.Device, r.DeviceClass = r.Env.Backend, r.Env.Device, r.Env.DeviceClass
	for name, t := range c.Inputs {
		r.InputDigests[name] = t.Digest()
	}
	r.ScheduleHash = e.schedule
	r.Timing.CompileMS, r.Timing.RunMS = msOf(e.compile), msOf(e.run)
	if p != nil {
		o.Mode = p.Transport.Note()
	}
	defer func() { o.Result = r }()
	switch {
	case failure != nil && errs.CodeOf(failure) == errs.Unsupported:
		r.Verdict, r.Reason, r.ErrorCode = harness.VerdictSkip, "unsupported by oracle: "+failure.Error(), string(errs.Unsupported)
		return o
	case failure != nil:
		r.Verdict, r.Reason, r.ErrorCode = harness.VerdictError, failure.Error(), string(errs.CodeOf(failure))
		return o
	case w.Unsupported:
		r.Verdict, r.Reason, r.ErrorCode = harness.VerdictSkip, "unsupported by oracle: "+w.Error, string(errs.Unsupported)
		return o
	case w.Error != "":
		r.Verdict, r.Reason, r.ErrorCode = harness.VerdictError,
			fmt.Sprintf("oracle %s failed on %s (op %s): %s", rn.framework(), c.Name(), c.Spec.Op, w.Error), string(errs.Input)
		return o
	}
	o.Mode = joinMode(w.Mode, o.Mode)
	if e.err != nil {
		r.Verdict, r.Reason, r.ErrorCode = harness.VerdictError, "engine: "+e.err.Error(), string(errs.CodeOf(e.err))
		return o
	}
	want, err := p.Decode(*w)
	if err != nil {
		r.Verdict, r.Reason, r.ErrorCode = harness.VerdictError, err.Error(), string(errs.CodeOf(err))
		return o
	}
	r.Digest = harness.CombinedDigest(e.outs)
	var problems []string
	bound, err := rn.accumBound(c)
	if err != nil {
		r.Verdict, r.Reason, r.ErrorCode = harness.VerdictError, err.Error(), string(errs.CodeOf(err))
		return o
	}
	for i, v := range c.Spec.Graph.Outputs {
		check := harness.Check(e.outs[i], want[i], c.Spec.Tolerances[i])
		if bound != nil {
			check = harness.CheckBound(e.outs[i], want[i], c.Spec.Tolerances[i], bound)
		}
		r.Outputs = append(r.Outputs, harness.OutputResult{Name: v.Name, DType: v.Type.DType.String(),
			Shape: v.Type.Shape, Digest: e.outs[i].Digest(), Check: check})
		if !check.Pass {
			problems = append(problems, fmt.Sprintf("output %%%s vs %s: %s", v.Name, rn.framework(), check.Reason))
		}
	}
	r.Verdict = harness.VerdictPass
	if len(problems) > 0 {
		r.Verdict, r.Reason = harness.VerdictFail, strings.Join(problems, "; ")+"; "+rn.blame(c, want)
		rn.writeReplay(c, &r)
	}
	return o
}

// accumBound is the per-element error bound of a case whose only op is a K-reduction on a
// narrow tensor-core accumulator (scaled_matmul on cuda: harness/accum), nil otherwise. Each
// side that runs on the GPU adds one bound: the engine's cuda backend, and the oracle on cuda
// (torch._scaled_mm is cuBLAS's fp8 GEMM, on the same hardware). Two GPU sides may truncate in
// different orders, each within its own bound of the exact result; the CPU backend is exact.
func (rn Runner) accumBound(c Case) ([]float64, error) {
	sides, m := 0, accum.Model{}
	if rn.Backend != nil {
		if bm, ok := accum.ForBackend(rn.Backend.Name()); ok {
			sides, m = sides+1, bm
		}
	}
	if om, ok := accum.ForBackend(rn.Target.Device); ok {
		sides, m = sides+1, om
	}
	if sides == 0 {
		return nil, nil
	}
	bound, _, err := accum.ForGraph(m, c.Spec.Graph, c.Inputs)
	for i := range bound {
		bound[i] *= float64(sides)
	}
	return bound, err
}

// blame says which side a failure is on: whether the golden model agrees with the oracle.
func (rn Runner) blame(c Case, want []*tensor.Tensor) string {
	var refOut []*tensor.Tensor
	err := protect("golden model", func() (err error) { refOut, err = ref.Run(c.Spec.Graph, c.Inputs); return })
	if err != nil {
		return "golden model failed too: " + err.Error()
	}
	bound, _ := rn.accumBound(c) // the oracle's own accumulation error (within the engine's doubled bound)
	for i := range want {
		chk := harness.Check(refOut[i], want[i], c.Spec.Tolerances[i])
		if bound != nil {
			chk = harness.CheckBound(refOut[i], want[i], c.Spec.Tolerances[i], bound)
		}
		if !chk.Pass {
			return fmt.Sprintf("the golden model disagrees with %s as well (the oracle mapping or a semantic difference is the suspect): %s", rn.framework(), chk.Reason)
		}
	}
	return fmt.Sprintf("the golden model agrees with %s (the engine is the suspect)", rn.framework())
}

func (rn Runner) writeReplay(c Case, r *harness.Result) {
	if rn.ArtifactsDir == "" {
		return
	}
	hc := harness.Case{Suite: r.Suite, Name: r.Case, Graph: c.Spec.Graph, Inputs: c.Inputs, Seed: c.Seed,
		Tolerances: c.Spec.Tolerances, Labels: r.Labels}
	m, err := harness.ManifestFor(hc, *r)
	if err == nil {
		r.Replay, err = harness.WriteManifest(rn.ArtifactsDir, m)
	}
	if err != nil {
		r.Reason += " (replay manifest not written: " + err.Error() + ")"
	}
}

func (rn Runner) framework() string {
	if rn.Oracle == nil {
		return "oracle"
	}
	return rn.Oracle.hello.Framework
}

func (rn Runner) suite() string {
	if rn.Suite != "" {
		return rn.Suite
	}
	return "differential/" + rn.framework()
}

func joinMode(a, b string) string {
	switch {
	case a == "" || a == "native":
		if b == "" {
			return "native"
		}
		return b
	case b == "":
		return a
	}
	return a + "; " + b
}

func msOf(d time.Duration) float64 { return float64(d.Microseconds()) / 1e3 }
