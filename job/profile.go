package job

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/backend"
	cpubackend "github.com/tessera-qa/tessera-qa/engine/backend/cpu"
	"github.com/tessera-qa/tessera-qa/engine/compiler"
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/harness"
	"github.com/tessera-qa/tessera-qa/profiling"
)

// profileGraph is the graph the bench suite profiles (docs/examples/mlp.tg's head, without
// the bf16 copy): a short profile of one graph per run, so the reporter gets a per-kernel
// breakdown with every run and the run's folder a trace (profile/mlp.trace.json).
const profileGraph = `graph mlp {
  input %x: f32[64,128]
  input %w1: f32[128,128]
  input %b1: f32[128]
  input %w2: f32[128,64]
  %h = matmul(%x, %w1)
  %hb = add(%h, %b1)
  %a = gelu(%hb) {approx="tanh"}
  %logits = matmul(%a, %w2)
  %p = softmax(%logits) {axis=-1}
  output %p
}
`

// profileReps: profiled runs of the graph (after one warm-up), each beside a calibration.
const profileReps = 11

// profileResult profiles profileGraph on one CPU worker: it passes when profiling kept the
// outputs' bits, every kernel ran its grid once per launch and the trace is valid; its bench
// row (the step against the calibration workload, with the per-kernel breakdown) goes to
// bench.json.
func (r *runner) profileResult() harness.Result {
	start := time.Now()
	cpu := &cpubackend.Backend{Workers: 1}
	res := harness.Result{Schema: harness.ResultSchema, Suite: SuiteBench, Case: "profile/mlp", Backend: cpu.Name(), Device: cpu.Device(),
		DeviceClass: cpu.DeviceClass(), Seed: 1, Outputs: []harness.OutputResult{}, Env: harness.CaptureEnv(cpu)}
	fail := func(code errs.Code, format string, args ...any) harness.Result {
		res.Verdict, res.ErrorCode, res.Reason = harness.VerdictFail, string(code), fmt.Sprintf(format, args...)
		if code != "" {
			res.Verdict = harness.VerdictError
		}
		res.Timing.TotalMS = float64(time.Since(start).Microseconds()) / 1000
		return res
	}
	g, err := graph.Parse(profileGraph, "profile")
	if err != nil {
		return fail(errs.CodeOf(err), "profile: %v", err)
	}
	in, err := harness.RandomInputs(g, 1, nil)
	if err != nil {
		return fail(errs.CodeOf(err), "profile: %v", err)
	}
	p, err := compiler.Compile(g, compiler.Options{})
	if err != nil {
		return fail(errs.CodeOf(err), "profile: %v", err)
	}
	plain, err := cpu.Run(p, in)
	if err != nil {
		return fail(errs.CodeOf(err), "profile: %v", err)
	}
	prof, err := backend.RunProfiled(cpu, p, in, &profiling.Recorder{})
	if err != nil {
		return fail(errs.CodeOf(err), "profile: %v", err)
	}
	for i := range plain {
		if plain[i].Digest() != prof[i].Digest() {
			return fail("", "output %d: digest %s plain, %s with profiling on", i, plain[i].Digest(), prof[i].Digest())
		}
	}
	rep, err := profiling.Profile(g, in, cpu, profiling.Options{Reps: profileReps})
	if err != nil {
		return fail(errs.CodeOf(err), "profile: %v", err)
	}
	for _, k := range rep.Kernels {
		if k.Points != k.GridPoints {
			return fail("", "kernel %s %s ran %d grid points per launch, its grid has %d", k.Name, k.Label, k.Points, k.GridPoints)
		}
	}
	dir := filepath.Join(r.runDir, "profile")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fail(errs.Input, "profile: %v", err)
	}
	trace := filepath.Join(dir, "mlp.trace.json")
	if err := rep.Trace().WriteFile(trace); err != nil {
		return fail(errs.CodeOf(err), "profile: %v", err)
	}
	if _, err := profiling.ValidateFile(trace); err != nil {
		return fail("", "profile: %v", err)
	}
	doc := rep.BenchDoc()
	r.measured.addBench(doc.Rows[0])
	top := rep.Top(1)[0]
	res.Verdict = harness.VerdictPass
	res.Timing.TotalMS = float64(time.Since(start).Microseconds()) / 1000
	res.Labels = []string{fmt.Sprintf("step %.3g ms (%.3g x the calibration), slowest kernel %s %s, trace %s",
		doc.Rows[0].EngineMS, doc.Rows[0].EngineMS/doc.Rows[0].RefMS, top.Name, top.Line(), trace)}
	return res
}
