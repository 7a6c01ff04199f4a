package job

import (
	"fmt"
	"math"
	"runtime"
	"slices"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/autodiff"
	"github.com/tessera-qa/tessera-qa/engine/backend"
	cpubackend "github.com/tessera-qa/tessera-qa/engine/backend/cpu"
	"github.com/tessera-qa/tessera-qa/engine/compiler"
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/engine/ref"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
	"github.com/tessera-qa/tessera-qa/harness"
	"github.com/tessera-qa/tessera-qa/report/parse"
	"github.com/tessera-qa/tessera-qa/training"
)

// The bench suite of the main job: CPU-backend timings the regression machinery can watch on a
// machine without a GPU (design.md §8: ratios measured side by side in one run, never absolute
// times across runs). Each case runs a graph on the cpu backend and on the golden model
// (engine/ref, the float64 interpreter) over the same inputs: correctness first (the engine's
// outputs against the model's under the case's tolerances; a wrong case is not timed), then
// benchReps (21: design.md §8 asks >= 20 of GPU timings) rounds alternating the two sides, so
// load from other processes hits both alike; each sample lasts at least benchSampleMS, the
// engine runs on one worker goroutine as the model does, and a collection runs between rounds.
// The bench row's value is engine median / ref median (lower is better) with the
// engine's repetitions as samples. A slower cpu backend or compiler raises the ratio; a slower
// golden model lowers it (it would read as a speed-up). The cases run one at a time (a
// concurrent neighbour would time the pool, not the kernel); about a second in all on an idle
// 2-core machine.
const (
	benchReps   = 21
	benchWarmup = 1
	// benchRef names the reference side in the bench JSON.
	benchRef = "engine/ref"
)

// benchCase is one timed graph: its series (op, dtype, shape) and how to build it.
type benchCase struct {
	op    string
	dtype numerics.DType
	shape []int
	build func() (*graph.Graph, map[string]*tensor.Tensor, []harness.Tolerance, error)
}

func benchCases() []benchCase {
	f32 := numerics.F32
	tol := harness.DefaultTolerance(f32)
	text := func(src string, k int) func() (*graph.Graph, map[string]*tensor.Tensor, []harness.Tolerance, error) {
		return func() (*graph.Graph, map[string]*tensor.Tensor, []harness.Tolerance, error) {
			g, err := graph.Parse(src, "bench")
			if err != nil {
				return nil, nil, nil, err
			}
			in, err := harness.RandomInputs(g, 1, nil)
			return g, in, []harness.Tolerance{tol.ForReduction(k)}, err
		}
	}
	cs := []benchCase{
		{"cpu/matmul", f32, []int{128, 128, 128}, text("graph mm {\n input %a: f32[128,128]\n input %b: f32[128,128]\n %c = matmul(%a, %b)\n output %c\n}\n", 128)},
		{"cpu/softmax", f32, []int{256, 256}, text("graph sm {\n input %x: f32[256,256]\n %y = softmax(%x)\n output %y\n}\n", 256)},
		{"cpu/layernorm", f32, []int{256, 256}, text("graph ln {\n input %x: f32[256,256]\n input %g: f32[256]\n input %b: f32[256]\n %y = layernorm(%x, %g, %b)\n output %y\n}\n", 256)},
	}
	for _, model := range training.Models {
		d := training.DefaultDims(model)
		shape := []int{d.Batch, d.In, d.Hidden, d.Out}
		switch model {
		case "transformer-block":
			shape = []int{d.Batch, d.Seq, d.Width, d.Heads, d.FFN}
		case training.FNOModel:
			shape = []int{d.Batch, d.In, d.Hidden, d.Out, d.GridH, d.GridW, d.Modes1, d.Modes2}
		}
		cs = append(cs, benchCase{"train-step/" + model + "/fwd+bwd", f32, shape, func() (*graph.Graph, map[string]*tensor.Tensor, []harness.Tolerance, error) {
			return trainStepGraph(model, d)
		}})
	}
	return cs
}

// trainStepGraph is one training step's forward and backward program of the reference
// workload (the loss and every parameter's gradient), with its first batch and parameters.
func trainStepGraph(model string, d training.Dims) (*graph.Graph, map[string]*tensor.Tensor, []harness.Tolerance, error) {
	m, err := training.Build(model, numerics.F32, d, d.Batch)
	if err != nil {
		return nil, nil, nil, err
	}
	gg, err := autodiff.Grad(m.Graph, "loss", m.Params...)
	if err != nil {
		return nil, nil, nil, err
	}
	feed := m.Init(1)
	feed["x"], feed["target"] = m.Batch(1, 1, 0, 1)
	// Gradients sum over the batch and the widest layer; the loss and the gradients near a
	// minimum may be small, so the magnitude guard is off and the budget scales instead.
	k := max(d.Batch*max(d.Seq, 1), d.Hidden, d.Width, d.FFN)
	tols := make([]harness.Tolerance, len(gg.Outputs))
	for i := range tols {
		tols[i] = harness.DefaultTolerance(numerics.F32).ForReduction(k).NoGuard()
	}
	return gg, feed, tols, nil
}

func (r *runner) benchTasks() []task {
	var ts []task
	for _, c := range benchCases() {
		ts = append(ts, func() harness.Result { return r.benchResult(c) })
	}
	return append(ts, r.profileResult)
}

// benchResult checks one case, times it and records its bench row.
func (r *runner) benchResult(c benchCase) harness.Result {
	start := time.Now()
	cpu, err := backend.Get("cpu")
	if err == nil {
		err = cpu.Available()
	}
	if err != nil {
		return r.errored(SuiteBench, c.op, err)
	}
	env := harness.CaptureEnv(cpu)
	res := harness.Result{Schema: harness.ResultSchema, Suite: SuiteBench, Case: c.op + "/" + c.dtype.String() + "/" + parse.ShapeString(c.shape),
		Backend: cpu.Name(), Device: cpu.Device(), DeviceClass: cpu.DeviceClass(), Seed: 1, Outputs: []harness.OutputResult{}, Env: env}
	fail := func(verdict, code, why string) harness.Result {
		res.Verdict, res.ErrorCode, res.Reason = verdict, code, why
		res.Timing.TotalMS = float64(time.Since(start).Microseconds()) / 1000
		return res
	}
	g, in, tols, err := c.build()
	if err != nil {
		return fail(harness.VerdictError, string(errs.CodeOf(err)), fmt.Sprintf("bench %s: %v", res.Case, err))
	}
	// Correctness first, through the same runner as every other suite: outputs, digests.
	checked := harness.RunCase(harness.Case{Suite: SuiteBench, Name: res.Case, Graph: g, Inputs: in, Seed: 1, Tolerances: tols}, cpu)
	res.Outputs, res.Digest, res.Computation, res.ScheduleHash = checked.Outputs, checked.Digest, checked.Computation, checked.ScheduleHash
	if checked.Verdict != harness.VerdictPass {
		return fail(checked.Verdict, checked.ErrorCode, checked.Reason+" (not timed)")
	}
	prog, err := compiler.Compile(g, compiler.Options{})
	if err != nil {
		return fail(harness.VerdictError, string(errs.CodeOf(err)), fmt.Sprintf("bench %s: compile: %v", res.Case, err))
	}
	// Timed on one worker goroutine: the golden model is serial, so a parallel engine would
	// make the ratio depend on the core count (the series key does not name it) and on how
	// many cores the neighbours leave free; serial against serial, load slows both alike.
	serial := &cpubackend.Backend{Workers: 1}
	eng, refs, err := timeSideBySide(func() error { _, err := serial.Run(prog, in); return err },
		func() error { _, err := ref.Run(g, in); return err })
	if err != nil {
		return fail(harness.VerdictError, string(errs.CodeOf(err)), fmt.Sprintf("bench %s: %v", res.Case, err))
	}
	em, rm := median(eng), median(refs)
	res.Verdict = harness.VerdictPass
	res.Timing.RunMS, res.Timing.RefMS = em, rm
	res.Timing.TotalMS = float64(time.Since(start).Microseconds()) / 1000
	res.Labels = []string{fmt.Sprintf("%.3g ms on cpu, %.3g ms on %s (ratio %.3g, median of %d alternating reps)", em, rm, benchRef, em/rm, benchReps)}
	r.measured.addBench(parse.BenchRow{Op: c.op, DType: c.dtype.String(), Shape: c.shape, Device: cpu.DeviceClass(),
		EngineMS: em, RefMS: rm, Ratio: em / rm, SamplesMS: eng, Ref: benchRef})
	return res
}

// benchSampleMS is how long one timed sample of a side lasts at least: a side faster than
// that is run several times in a row per sample (the count fixed in the warm-up) and the
// sample is the mean. A sample of 0.1 ms is a scheduler time slice's noise on a loaded
// machine; a few milliseconds average it out.
const benchSampleMS = 2.0

// timeSideBySide runs each side benchWarmup times untimed (and once more to fix how many runs
// make a sample), then benchReps rounds, each round timing both sides, the side that goes
// first alternating.
func timeSideBySide(engine, reference func() error) (eng, refs []float64, err error) {
	for range benchWarmup {
		if err := engine(); err != nil {
			return nil, nil, err
		}
		if err := reference(); err != nil {
			return nil, nil, err
		}
	}
	type side struct {
		run   func() error
		n     int
		times *[]float64
	}
	sides := [2]*side{{run: engine, times: &eng}, {run: reference, times: &refs}}
	for _, sd := range sides {
		t := time.Now()
		if err := sd.run(); err != nil {
			return nil, nil, err
		}
		one := max(float64(time.Since(t).Nanoseconds())/1e6, 1e-3)
		sd.n = max(1, min(1000, int(math.Ceil(benchSampleMS/one))))
	}
	sample := func(sd *side) error {
		t := time.Now()
		for range sd.n {
			if err := sd.run(); err != nil {
				return err
			}
		}
		*sd.times = append(*sd.times, float64(time.Since(t).Nanoseconds())/1e6/float64(sd.n))
		return nil
	}
	for i := range benchReps {
		// A collection between rounds, untimed, so one side's garbage is not the other's pause.
		runtime.GC()
		a, b := sides[i%2], sides[1-i%2]
		if err := sample(a); err != nil {
			return nil, nil, err
		}
		if err := sample(b); err != nil {
			return nil, nil, err
		}
	}
	return eng, refs, nil
}

func median(xs []float64) float64 {
	s := slices.Sorted(slices.Values(xs))
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
