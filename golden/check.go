package golden

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/backend"
	"github.com/tessera-qa/tessera-qa/engine/compiler"
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
	"github.com/tessera-qa/tessera-qa/harness"
	"github.com/tessera-qa/tessera-qa/harness/accum"
)

// Suite is the suite name golden results carry.
const Suite = "golden"

// CheckSpec compiles the case's graph, runs it on b and compares every output with the stored
// expected output under the stored tolerance (harness.Check). The result carries input and
// output digests, the schedule hash, timings and env; a backend that is not available gives a
// skip verdict with its reason. It never panics.
func CheckSpec(c GoldenCase, b backend.Backend) harness.Result {
	r := newResult(c, b)
	if r.Verdict != "" {
		return r
	}
	start := time.Now()
	var prog *compiler.Program
	err := protect("compile", func() (err error) { prog, err = compiler.Compile(c.Graph, compiler.Options{}); return })
	r.Timing.CompileMS = msSince(start)
	if err == nil && prog == nil {
		err = errs.New(errs.Internal, "compile: no program and no error")
	}
	if err != nil {
		return errored(r, err)
	}
	r = finishRun(r, c, prog, b)
	r.Timing.TotalMS = msSince(start)
	return r
}

// CheckProgram is CheckSpec with an already compiled (possibly hand-modified) program: the
// planted-bug tests mutate a program's Tile IR and prove this comparison catches it.
func CheckProgram(c GoldenCase, prog *compiler.Program, b backend.Backend) harness.Result {
	r := newResult(c, b)
	if r.Verdict != "" {
		return r
	}
	if prog == nil {
		return errored(r, errs.New(errs.Input, "golden case %s: nil program", c.Name))
	}
	start := time.Now()
	r = finishRun(r, c, prog, b)
	r.Timing.TotalMS = msSince(start)
	return r
}

// newResult fills what is known before running; a non-empty verdict means stop there.
func newResult(c GoldenCase, b backend.Backend) harness.Result {
	r := harness.Result{Schema: harness.ResultSchema, Suite: Suite, Case: c.Name, Seed: c.Seed,
		Outputs: []harness.OutputResult{}, Env: harness.CaptureEnv(b)}
	if b == nil {
		return errored(r, errs.New(errs.Input, "golden case %s: no backend", c.Name))
	}
	r.Backend, r.Device, r.DeviceClass = r.Env.Backend, r.Env.Device, r.Env.DeviceClass
	r.InputDigests = map[string]string{}
	for name, t := range c.Inputs {
		r.InputDigests[name] = t.Digest()
	}
	if c.Graph == nil || len(c.Want) != len(c.Graph.Outputs) || len(c.Tolerances) != len(c.Graph.Outputs) {
		return errored(r, errs.New(errs.Input, "golden case %s: malformed (graph, expected outputs and tolerances do not match)", c.Name))
	}
	if err := b.Available(); err != nil {
		r.Verdict, r.Reason, r.ErrorCode = harness.VerdictSkip, err.Error(), string(errs.CodeOf(err))
	}
	return r
}

func finishRun(r harness.Result, c GoldenCase, prog *compiler.Program, b backend.Backend) harness.Result {
	r.ScheduleHash = prog.ScheduleHash
	var got []*tensor.Tensor
	t0 := time.Now()
	err := protect("run", func() (err error) { got, err = b.Run(prog, c.Inputs); return })
	r.Timing.RunMS = msSince(t0)
	if err != nil {
		return errored(r, err)
	}
	r.Digest = harness.CombinedDigest(got)
	var problems []string
	for name, t := range c.Inputs {
		if t.Digest() != r.InputDigests[name] {
			problems = append(problems, fmt.Sprintf("backend modified input %%%s", name))
		}
	}
	slices.Sort(problems)
	if len(got) != len(c.Want) {
		problems = append(problems, fmt.Sprintf("backend returned %d outputs, want %d", len(got), len(c.Want)))
	}
	t0 = time.Now()
	bound, err := accumBound(c, b)
	if err != nil {
		return errored(r, err)
	}
	for i, v := range c.Graph.Outputs {
		var g *tensor.Tensor
		if i < len(got) {
			g = got[i]
		}
		chk := harness.Check(g, c.Want[i], c.Tolerances[i])
		if bound != nil {
			chk = harness.CheckBound(g, c.Want[i], c.Tolerances[i], bound)
		}
		o := harness.OutputResult{Name: v.Name, DType: v.Type.DType.String(), Shape: slices.Clone(v.Type.Shape),
			Digest: harness.Digests([]*tensor.Tensor{g})[0], Check: chk}
		if !o.Check.Pass {
			problems = append(problems, fmt.Sprintf("output %%%s vs %s: %s", v.Name, c.File, o.Check.Reason))
		}
		r.Outputs = append(r.Outputs, o)
	}
	r.Timing.CheckMS = msSince(t0)
	r.Verdict = harness.VerdictPass
	if len(problems) > 0 {
		r.Verdict, r.Reason = harness.VerdictFail, strings.Join(problems, "; ")
	}
	return r
}

// accumBound is the per-element error bound of a case whose only op is a K-reduction on a
// narrow tensor-core accumulator of backend b (scaled_matmul on cuda: harness/accum), added to
// the stored tolerance; nil for every other case and for the CPU backend, which must match the
// golden file as strictly as before.
func accumBound(c GoldenCase, b backend.Backend) ([]float64, error) {
	m, ok := accum.ForBackend(b.Name())
	if !ok {
		return nil, nil
	}
	bound, _, err := accum.ForGraph(m, c.Graph, c.Inputs)
	return bound, err
}

func errored(r harness.Result, err error) harness.Result {
	r.Verdict, r.Reason, r.ErrorCode = harness.VerdictError, err.Error(), string(errs.CodeOf(err))
	return r
}

// protect turns a panic in the compiler or a backend into a coded error naming the stage.
func protect(stage string, f func() error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = errs.New(errs.Internal, "panic during %s: %v", stage, p)
		}
	}()
	return f()
}

func msSince(t time.Time) float64 { return float64(time.Since(t).Nanoseconds()) / 1e6 }

// RunDigests compiles the spec, runs it on b with the spec's inputs and returns the bitwise
// digest of each output (harness.Digests): what determinism checks compare across runs,
// processes and GOMAXPROCS settings.
func RunDigests(s Spec, b backend.Backend) ([]string, error) {
	in, err := s.Inputs()
	if err != nil {
		return nil, err
	}
	var prog *compiler.Program
	if err := protect("compile", func() (err error) { prog, err = compiler.Compile(s.Graph, compiler.Options{}); return }); err != nil {
		return nil, errs.Wrap(errs.Internal, err, "spec %s", s.Name)
	}
	var got []*tensor.Tensor
	if err := protect("run", func() (err error) { got, err = b.Run(prog, in); return }); err != nil {
		return nil, errs.Wrap(errs.Internal, err, "spec %s on %s", s.Name, b.Name())
	}
	return harness.Digests(got), nil
}
