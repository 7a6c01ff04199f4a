package bench

import (
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/compiler"
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/ref"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
	"github.com/tessera-qa/tessera-qa/harness"
	"github.com/tessera-qa/tessera-qa/harness/accum"
)

// Options control a bench run.
type Options struct {
	Reps   int    // timed repetitions on each side (median taken); design.md §8 asks >= 20
	Warmup int    // untimed runs before them
	Seed   uint64 // inputs of case c are drawn from SubSeed(Seed, c.String()+"/"+input)
	// RefRows is how many rows (queries, rows of A) the small engine/ref check keeps
	// (0: DefaultRefRows); the CPU golden model cannot afford the full shapes.
	RefRows int
	Log     io.Writer // one progress line per case; nil: none
	// Rounds splits the reps into rounds that alternate which side goes first (torch in
	// round 0, the engine in round 1, ...), so neither side always runs after the other
	// (0: DefaultRounds).
	Rounds int
}

// DefaultRounds is the number of alternating timing rounds per case.
const DefaultRounds = 4

// DefaultRefRows keeps the golden-model check of an 8192^3 matmul under a second.
const DefaultRefRows = 4

// Row is one case's outcome.
type Row struct {
	Case
	Path          string  // code path(s) of the engine's kernels
	EngineMS      float64 // medians
	TorchMS       float64
	EngineSamples []float64 // per-rep milliseconds
	TorchSamples  []float64
	Flops, Bytes  float64             // work per run: floating-point operations, fewest bytes moved
	Check         harness.CheckResult // engine vs torch, whole output
	RefCheck      harness.CheckResult // engine vs engine/ref on the first RefRows rows
	Err           string              // what stopped the case before its checks or timing
}

// Passed: both checks passed and both sides were timed.
func (r Row) Passed() bool { return r.Err == "" && r.Check.Pass && r.RefCheck.Pass && r.Timed() }

// Timed: both sides have times.
func (r Row) Timed() bool { return r.EngineMS > 0 && r.TorchMS > 0 }

// Speedup is torch ms / engine ms: above 1 the engine is faster.
func (r Row) Speedup() float64 { return ratio(r.TorchMS, r.EngineMS) }

// TFLOPS and GBps are the engine's rates (0 where the op has no flop count).
func (r Row) TFLOPS() float64 { return ratio(r.Flops, r.EngineMS*1e9) }
func (r Row) GBps() float64   { return ratio(r.Bytes, r.EngineMS*1e6) }

// TorchGBps is torch's rate over the same bytes.
func (r Row) TorchGBps() float64 { return ratio(r.Bytes, r.TorchMS*1e6) }

func ratio(a, b float64) float64 {
	if b <= 0 {
		return 0
	}
	return a / b
}

// Verdict is "pass", "FAIL: ..." or "ERROR: ...", for the table.
func (r Row) Verdict() string {
	switch {
	case r.Err != "":
		return "ERROR: " + r.Err
	case !r.Check.Pass:
		return "FAIL vs torch: " + r.Check.Reason
	case !r.RefCheck.Pass:
		return "FAIL vs engine/ref: " + r.RefCheck.Reason
	}
	return "pass"
}

// Run runs every case on the engine and the oracle, in order: inputs drawn fresh for the case,
// correctness first (the engine's whole output against torch's, and its first rows against
// engine/ref), then timing on both sides, each with warm-up and the L2 flushed before every
// rep. A case that fails its checks is not timed. Cases fail alone; Run itself fails only when
// the engine has no device.
func Run(e Engine, o Oracle, cases []Case, opt Options) ([]Row, Device, error) {
	dev, err := e.Device()
	if err != nil {
		return nil, Device{}, err
	}
	if opt.Reps < 1 || opt.Warmup < 0 {
		return nil, dev, errs.New(errs.Input, "bench: reps %d and warmup %d: need reps >= 1, warmup >= 0", opt.Reps, opt.Warmup)
	}
	if opt.RefRows <= 0 {
		opt.RefRows = DefaultRefRows
	}
	dir, err := scratchDir()
	if err != nil {
		return nil, dev, err
	}
	defer os.RemoveAll(dir)
	rows := make([]Row, 0, len(cases))
	for i, c := range cases {
		start := time.Now()
		r := runCase(e, o, c, opt, dev, dir)
		rows = append(rows, r)
		if opt.Log != nil {
			fmt.Fprintf(opt.Log, "[%d/%d] %s: %s (engine %.4g ms, torch %.4g ms; %.1fs)\n", i+1, len(cases), c, short(r.Verdict()), r.EngineMS, r.TorchMS, time.Since(start).Seconds())
		}
	}
	return rows, dev, nil
}

func short(s string) string {
	if len(s) > 160 {
		return s[:160] + "..."
	}
	return s
}

func runCase(e Engine, o Oracle, c Case, opt Options, dev Device, dir string) (r Row) {
	r = Row{Case: c}
	defer func() {
		if p := recover(); p != nil {
			r.Err = fmt.Sprintf("E_INTERNAL: panic: %v", p)
		}
	}()
	def, ok := opByName(c.Op)
	if !ok {
		r.Err = "unknown op " + c.Op
		return r
	}
	ins := def.inputs(c.Shape)
	g, err := buildGraph(def, c, shapesOf(ins))
	if err != nil {
		r.Err = err.Error()
		return r
	}
	p, err := compiler.Compile(g, compiler.Options{})
	if err != nil {
		r.Err = err.Error()
		return r
	}
	r.Path = e.Path(p)
	inputs := map[string]*tensor.Tensor{}
	var files []FileTensor
	for _, in := range ins {
		t := randomTensor(def.inputDType(in, c.DType), in.shape, harness.SubSeed(opt.Seed, c.String()+"/"+in.name), in.dist)
		inputs[in.name] = t
		f, err := writeTensor(dir, in.name, t)
		if err != nil {
			r.Err = err.Error()
			return r
		}
		files = append(files, f)
	}
	defer func() {
		for _, f := range files {
			os.Remove(f.File)
		}
	}()
	outs, err := e.Run(p, inputs)
	if err != nil {
		r.Err = "engine: " + err.Error()
		return r
	}
	got := outs[0]
	r.Flops, r.Bytes = def.flops(c.Shape), bytesMoved(def, c.DType, c.Shape, got)

	outFile := dir + "/out.bin"
	defer os.Remove(outFile)
	rounds := opt.Rounds
	if rounds <= 0 {
		rounds = DefaultRounds
	}
	rounds = max(min(rounds, opt.Reps), 1)
	per := (opt.Reps + rounds - 1) / rounds
	torchReq := Request{Op: c.Op, Inputs: files, Output: outFile, Warmup: opt.Warmup, Reps: per, FlushBytes: 2 * max(dev.L2Bytes, 1<<20)}
	// Round 0: torch first (its first reply also carries the output the check needs).
	reply, err := o.Run(torchReq)
	switch {
	case err != nil:
		r.Err = "torch: " + err.Error()
		return r
	case reply.Type == "error":
		r.Err = "torch: " + reply.Error
		return r
	case reply.DType != got.DType.String() || !slices.Equal(reply.Shape, got.Shape):
		r.Err = fmt.Sprintf("torch output is %s%v, the engine's %s", reply.DType, reply.Shape, got.TypeString())
		return r
	}
	want, err := readTensor(outFile, got.DType, got.Shape)
	if err != nil {
		r.Err = err.Error()
		return r
	}
	tol := def.tol(c.DType, def.reduce(c.Shape))
	model, bounded := accumModel(def, dev)
	var bound []float64
	if bounded {
		// Twice the bound: torch's fp8 GEMM accumulates on the same tensor cores and may
		// truncate in another order, each within the bound of the exact result.
		tol = harness.DefaultTolerance(got.DType)
		if bound, err = def.accumBound(model, inputs); err != nil {
			r.Err = "error bound: " + err.Error()
			return r
		}
		for i := range bound {
			bound[i] *= 2
		}
	}
	r.Check = checkParallel(got, want, tol, bound)
	bound = nil // 512 MiB at 8192^2: free it before the reference check
	var refModel *accum.Model
	if bounded {
		refModel = &model
	}
	r.RefCheck, err = refCheck(def, c, inputs, got, tol, opt.RefRows, refModel)
	if err != nil {
		r.Err = "engine/ref: " + err.Error()
		return r
	}
	if !r.Check.Pass || !r.RefCheck.Pass {
		return r
	}
	torchTimes := slices.Clone(reply.TimesMS)
	var engineTimes []float64
	engine := func() error {
		ts, err := e.Time(p, inputs, opt.Warmup, per)
		engineTimes = append(engineTimes, ts...)
		return err
	}
	torch := func() error {
		rep, err := o.Run(torchReq)
		switch {
		case err != nil:
			return err
		case rep.Type == "error":
			return fmt.Errorf("%s", rep.Error)
		}
		torchTimes = append(torchTimes, rep.TimesMS...)
		return nil
	}
	for round := range rounds {
		order := []func() error{engine} // round 0: torch already ran first
		if round > 0 && round%2 == 0 {
			order = []func() error{torch, engine}
		} else if round > 0 {
			order = []func() error{engine, torch}
		}
		for _, f := range order {
			if err := f(); err != nil {
				r.Err = "timing: " + err.Error()
				return r
			}
		}
	}
	r.EngineSamples, r.TorchSamples = engineTimes, torchTimes
	r.EngineMS, r.TorchMS = median(engineTimes), median(torchTimes)
	return r
}

// Spread is (p90 - p10) / median of samples: how much a side's reps disagree.
func Spread(samples []float64) float64 {
	if len(samples) == 0 {
		return 0
	}
	s := slices.Clone(samples)
	slices.Sort(s)
	at := func(q float64) float64 { return s[min(int(q*float64(len(s)-1)+0.5), len(s)-1)] }
	return ratio(at(0.9)-at(0.1), median(s))
}

func shapesOf(ins []input) [][]int {
	s := make([][]int, len(ins))
	for i, in := range ins {
		s[i] = in.shape
	}
	return s
}

// buildGraph is the case's engine graph with the given input shapes (the full ones, or the
// reference slice's).
func buildGraph(def opDef, c Case, shapes [][]int) (*graph.Graph, error) {
	b := graph.NewBuilder("bench_" + c.Op)
	ins := def.inputs(c.Shape)
	vals := make([]*graph.Value, len(ins))
	for i, in := range ins {
		vals[i] = b.Input(in.name, def.inputDType(in, c.DType), shapes[i]...)
	}
	b.Output(def.build(b, vals))
	g, err := b.Build()
	if err != nil {
		return nil, errs.Wrap(errs.Shape, err, "bench %s", c)
	}
	return g, nil
}

// refCheck runs engine/ref on the first rows of the case (each sliced input is a prefix of
// the full input, the slice's output a prefix of the full output) and compares the engine's
// output prefix with it.
//
// With an accumulator model m (non-nil), the check adds m's per-element bound of the sliced
// case (harness/accum.ForGraph: the exact sum of |a||b|) to tol.
func refCheck(def opDef, c Case, inputs map[string]*tensor.Tensor, got *tensor.Tensor, tol harness.Tolerance, rows int, m *accum.Model) (harness.CheckResult, error) {
	rows = min(rows, rowCount(def, c.Shape))
	shapes := def.slice(c.Shape, rows)
	g, err := buildGraph(def, c, shapes)
	if err != nil {
		return harness.CheckResult{}, err
	}
	sliced := map[string]*tensor.Tensor{}
	for i, in := range def.inputs(c.Shape) {
		sliced[in.name] = prefix(inputs[in.name], shapes[i])
	}
	outs, err := ref.Run(g, sliced)
	if err != nil {
		return harness.CheckResult{}, err
	}
	if m != nil {
		bound, ok, err := accum.ForGraph(*m, g, sliced)
		if err != nil {
			return harness.CheckResult{}, err
		}
		if ok {
			return harness.CheckBound(prefix(got, outs[0].Shape), outs[0], tol, bound), nil
		}
	}
	return harness.Check(prefix(got, outs[0].Shape), outs[0], tol), nil
}

// accumModel is the accumulator model of def's op on the bench's device (the backend named by
// the first part of its class, "cuda/sm_90"); ok is false where the op has no bound or the
// device accumulates exactly enough for the plain tolerance (the CPU, the fake engine).
func accumModel(def opDef, dev Device) (accum.Model, bool) {
	if def.accumBound == nil {
		return accum.Model{}, false
	}
	backend, _, _ := strings.Cut(dev.Class, "/")
	return accum.ForBackend(backend)
}

// rowCount is the extent of the dim the reference slice cuts (rowsDim, else R, M or S).
func rowCount(def opDef, shape []int) int {
	for i, d := range def.dims {
		if d == def.rowsDim || def.rowsDim == "" && (d == "R" || d == "M" || d == "S") {
			return shape[i]
		}
	}
	return 1
}

// prefix is a view of t's first elements as a tensor of the given shape.
func prefix(t *tensor.Tensor, shape []int) *tensor.Tensor {
	n := elems(shape) * t.DType.Size()
	return &tensor.Tensor{DType: t.DType, Shape: slices.Clone(shape), Data: t.Data[:n]}
}

// median of the samples (the mean of the middle two for an even count).
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
