package autotune

import (
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/backend/cpu"
	"github.com/tessera-qa/tessera-qa/engine/compiler"
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
)

func mustParse(t testing.TB, src string) *graph.Graph {
	t.Helper()
	g, err := graph.Parse(src, t.Name()+".tg")
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func mustCompile(t testing.TB, g *graph.Graph, configs map[string]compiler.Schedule) *compiler.Program {
	t.Helper()
	p, err := compiler.Compile(g, compiler.Options{Configs: configs})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// randomInputs draws N(0,1)-ish values (never all zeros) for every graph input; positive ones
// for inputs named pos* so that log/sqrt stay finite.
func randomInputs(t testing.TB, g *graph.Graph, seed uint64) map[string]*tensor.Tensor {
	t.Helper()
	r := rand.New(rand.NewPCG(seed, 7))
	out := map[string]*tensor.Tensor{}
	for _, v := range g.Inputs {
		vals := make([]float64, v.Type.NumElems())
		for i := range vals {
			vals[i] = r.NormFloat64()
			if v.Type.DType.IsInt() {
				vals[i] = float64(r.IntN(17) - 8)
			}
		}
		out[v.Name] = tensor.FromFloat64(v.Type.DType, v.Type.Shape, vals)
	}
	return out
}

// matmulSrc is a matmul whose dims are not tile multiples, followed by a fused epilogue.
const matmulSrc = `graph mm {
  input %a: f32[48,40]
  input %b: f32[40,72]
  %c: f32[48,72] = matmul(%a, %b)
  %d = relu(%c)
  output %d
}`

// mixedSrc has one kernel of most kinds.
const mixedSrc = `graph mixed {
  input %x: f32[24,40]
  input %w: f32[40,36]
  input %q: f32[2,72,16]
  input %k: f32[2,100,16]
  input %v: f32[2,100,8]
  %h: f32[24,36] = matmul(%x, %w)
  %s = softmax(%h) {axis=-1}
  %r = reduce_sum(%h) {axes=[0]}
  %g = gelu(%x) {approx="tanh"}
  %o = attention(%q, %k, %v) {causal=true}
  %m = mse_loss(%s, %s)
  %t = transpose(%h) {perm=[1,0]}
  output %s, %r, %g, %o, %m, %t
}`

var (
	hostCPU = Device{Arch: "cpu/test", SMCount: 2, Name: "test cpu"}
	h100    = Device{Arch: "sm_90", SMCount: 132, SharedPerBlock: 232448, Name: "NVIDIA H100 80GB HBM3"}
	h100nvl = Device{Arch: "sm_90", SMCount: 114, SharedPerBlock: 232448, Name: "NVIDIA H100 PCIe"}
)

// fakeTimer makes up times from the timed kernel's schedule and records what it timed.
type fakeTimer struct {
	mu    sync.Mutex
	ms    func(s compiler.Schedule) float64
	calls int
	timed []Config
	fail  func(s compiler.Schedule) error
}

func (f *fakeTimer) Clock() string { return "fake clock" }

func (f *fakeTimer) Time(p *compiler.Program, kernel int, _ map[string]*tensor.Tensor, reps int) ([]float64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	s := p.Schedules[kernel]
	f.timed = append(f.timed, configOf(s))
	if f.fail != nil {
		if err := f.fail(s); err != nil {
			return nil, err
		}
	}
	out := make([]float64, reps)
	for i := range out {
		// Spread around the median so that only the median can pick the winner.
		out[i] = f.ms(s) * (1 + 0.5*float64(i%3-1))
	}
	return out, nil
}

func (f *fakeTimer) timedConfig(c Config) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Contains(f.timed, c)
}

// wrongRunner is the CPU backend, except that programs whose kernel of kind `kind` has config
// `bad` get a wrong output: what a fast kernel with a dropped boundary mask would produce.
type wrongRunner struct {
	kind string
	bad  Config
}

func (w wrongRunner) Run(p *compiler.Program, in map[string]*tensor.Tensor) ([]*tensor.Tensor, error) {
	outs, err := (&cpu.Backend{}).Run(p, in)
	if err != nil {
		return nil, err
	}
	for _, s := range p.Schedules {
		if s.Kind == w.kind && configOf(s) == w.bad {
			o := outs[0].Clone()
			o.SetFloat64(o.Len()-1, o.Float64(o.Len()-1)+1)
			outs[0] = o
		}
	}
	return outs, nil
}

// failingRunner fails every run: the default schedule itself cannot run.
type failingRunner struct{}

func (failingRunner) Run(*compiler.Program, map[string]*tensor.Tensor) ([]*tensor.Tensor, error) {
	return nil, errs.New(errs.IllegalAddress, "fake device fault")
}

func cpuTuner(timer Timer, cache *Cache, dev Device) *Tuner {
	return &Tuner{Cache: cache, Timer: timer, Runner: &cpu.Backend{}, Device: dev, Reps: 5}
}

func kernelReport(t testing.TB, r Report, kind string) KernelReport {
	t.Helper()
	for _, k := range r.Kernels {
		if k.Kind == kind {
			return k
		}
	}
	t.Fatalf("report has no %s kernel: %+v", kind, r.Kernels)
	return KernelReport{}
}

func f32(vals ...float64) *tensor.Tensor {
	return tensor.FromFloat64(numerics.F32, []int{len(vals)}, vals)
}

func cfg(bm, bn, bk, st int) Config { return Config{BM: bm, BN: bn, BK: bk, Stages: st} }
