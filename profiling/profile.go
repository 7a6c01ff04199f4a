// Package profiling is the harness side of the profiler: it runs a compiled program with a
// recorder attached to the backend's profile.Sink (engine/profile), counts each kernel's work
// from its Tile IR, and turns the records into a per-kernel summary, a Chrome Trace Event
// JSON for Perfetto (with a validator, since no viewer runs offline), a bench JSON document
// that `tessera-qa report ingest` reads, and, for distributed runs, an HTA-style summary per
// rank with a straggler ranking.
package profiling

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/backend"
	"github.com/tessera-qa/tessera-qa/engine/compiler"
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/profile"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
)

// Recorder is a profile.Sink that keeps every record; safe for concurrent runs.
type Recorder struct {
	mu       sync.Mutex
	launches []profile.Launch
	copies   []profile.Copy
	colls    []profile.Collective
}

var _ profile.Sink = (*Recorder)(nil)

// Launch records one launch.
func (r *Recorder) Launch(l profile.Launch) {
	r.mu.Lock()
	r.launches = append(r.launches, l)
	r.mu.Unlock()
}

// Copy records one transfer.
func (r *Recorder) Copy(c profile.Copy) {
	r.mu.Lock()
	r.copies = append(r.copies, c)
	r.mu.Unlock()
}

// Collective records one collective.
func (r *Recorder) Collective(c profile.Collective) {
	r.mu.Lock()
	r.colls = append(r.colls, c)
	r.mu.Unlock()
}

// Collectives returns the collectives so far and forgets them.
func (r *Recorder) Collectives() []profile.Collective {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.colls
	r.colls = nil
	return c
}

// Take returns the records so far and forgets them.
func (r *Recorder) Take() ([]profile.Launch, []profile.Copy) {
	r.mu.Lock()
	defer r.mu.Unlock()
	l, c := r.launches, r.copies
	r.launches, r.copies = nil, nil
	return l, c
}

// Options control one profile.
type Options struct {
	// Reps is the number of profiled runs after one unprofiled warm-up (default 5).
	Reps int
}

// Run is one profiled execution of the program.
type Run struct {
	Start    time.Time
	Dur      time.Duration
	Launches []profile.Launch
	Copies   []profile.Copy
}

// Kernel is one kernel's profile over the runs.
type Kernel struct {
	Name string `json:"name"`
	// Label names the work the way a reader thinks of it: MatMul[MxNxK], Add+Gelu[4x16].
	Label    string   `json:"label"`
	Nodes    []string `json:"nodes"` // %name=op of the Graph IR nodes it computes
	Kind     string   `json:"kind"`  // the schedule's kind: matmul, elementwise, rowwise ...
	Schedule string   `json:"schedule"`
	Grid     []int    `json:"grid"`
	Block    []int    `json:"block"`
	// GridPoints is prod(Grid); Points the grid points the backend said it ran per launch
	// (0 where it cannot count them).
	GridPoints int64 `json:"grid_points"`
	Points     int64 `json:"points"`
	Launches   int   `json:"launches"`
	// MedianUS over the runs; SamplesUS one per run.
	MedianUS  float64   `json:"median_us"`
	SamplesUS []float64 `json:"samples_us"`
	Cost
	GFLOPs float64          `json:"gflops"` // achieved, at the median
	GBps   float64          `json:"gbps"`
	Attrs  map[string]int64 `json:"attrs,omitempty"`
	// Fusion: the rewrites that touched this kernel's nodes (pass kind nodes).
	Fusion []string `json:"fusion,omitempty"`
}

// Report is a whole profile.
type Report struct {
	Graph       string              `json:"graph"`
	Backend     string              `json:"backend"`
	Device      string              `json:"device"`
	DeviceClass string              `json:"device_class"`
	Started     time.Time           `json:"started"`
	CompileDur  time.Duration       `json:"compile_ns"`
	Passes      []compiler.PassTime `json:"passes"`
	Rewrites    []compiler.Rewrite  `json:"rewrites"`
	Kernels     []Kernel            `json:"kernels"`
	// StepUS: each run's wall time; RunBytes the buffers one run holds (the CPU backend's
	// allocation for a run, its high-water mark).
	StepUS []float64 `json:"step_us"`
	// RefUS: the calibration workload (calibrate.go) timed just before each step.
	RefUS    []float64 `json:"ref_us"`
	RunBytes int64     `json:"run_bytes"`
	Runs     []Run     `json:"-"`
}

// Profile compiles g with the compiler's log on and runs it reps times on b with a recorder.
func Profile(g *graph.Graph, inputs map[string]*tensor.Tensor, b backend.Backend, o Options) (*Report, error) {
	if o.Reps <= 0 {
		o.Reps = 5
	}
	if err := b.Available(); err != nil {
		return nil, err
	}
	start := time.Now()
	p, err := compiler.Compile(g, compiler.Options{Profile: true})
	if err != nil {
		return nil, err
	}
	rep := &Report{Graph: g.Name, Backend: b.Name(), Device: b.Device(), DeviceClass: b.DeviceClass(), Started: start,
		CompileDur: time.Since(start)}
	if p.Log != nil {
		rep.Passes, rep.Rewrites = p.Log.Passes, p.Log.Rewrites
	}
	if _, err := backend.RunProfiled(b, p, inputs, nil); err != nil { // warm-up
		return nil, err
	}
	rec := &Recorder{}
	for range o.Reps {
		rep.RefUS = append(rep.RefUS, us(calibrate()))
		t0 := time.Now()
		if _, err := backend.RunProfiled(b, p, inputs, rec); err != nil {
			return nil, err
		}
		d := time.Since(t0)
		l, c := rec.Take()
		rep.Runs = append(rep.Runs, Run{Start: t0, Dur: d, Launches: l, Copies: c})
		rep.StepUS = append(rep.StepUS, us(d))
	}
	for _, bf := range p.Buffers {
		rep.RunBytes += int64(bf.Type.NumElems() * bf.Type.DType.Size())
	}
	rep.Kernels, err = kernels(p, rep.Runs, rep.Rewrites)
	if err != nil {
		return nil, err
	}
	return rep, nil
}

func us(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// kernels folds the runs' launches into one Kernel per program kernel.
func kernels(p *compiler.Program, runs []Run, rewrites []compiler.Rewrite) ([]Kernel, error) {
	var out []Kernel
	for i, k := range p.Kernels {
		cost, err := Count(k)
		if err != nil {
			return nil, err
		}
		kr := Kernel{Name: k.Name, Grid: slices.Clone(k.Grid), GridPoints: 1, Cost: cost}
		for _, gdim := range k.Grid {
			kr.GridPoints *= int64(gdim)
		}
		if i < len(p.Schedules) {
			kr.Kind, kr.Schedule = p.Schedules[i].Kind, p.Schedules[i].String()
		}
		var nodes []*graph.Node
		if i < len(p.KernelNodes) {
			nodes = nodesNamed(p.Graph, p.KernelNodes[i])
		}
		for _, n := range nodes {
			kr.Nodes = append(kr.Nodes, "%"+n.Output.Name+"="+n.Op)
		}
		kr.Label = Label(nodes)
		kr.Fusion = fusionOf(kr.Nodes, rewrites)
		for _, r := range runs {
			for _, l := range r.Launches {
				if l.Index != i {
					continue
				}
				kr.Launches++
				kr.SamplesUS = append(kr.SamplesUS, us(l.Dur))
				kr.Block, kr.Points, kr.Attrs = l.Block, l.Points, l.Attrs
			}
		}
		kr.MedianUS = median(kr.SamplesUS)
		if kr.MedianUS > 0 {
			kr.GFLOPs = float64(cost.FLOPs) / (kr.MedianUS * 1e3)
			kr.GBps = float64(cost.Bytes) / (kr.MedianUS * 1e3)
		}
		out = append(out, kr)
	}
	return out, nil
}

func nodesNamed(g *graph.Graph, names []string) []*graph.Node {
	var out []*graph.Node
	for _, n := range g.Nodes {
		if slices.Contains(names, n.Output.Name) {
			out = append(out, n)
		}
	}
	return out
}

// fusionOf lists the rewrites that name one of a kernel's nodes.
func fusionOf(nodes []string, rewrites []compiler.Rewrite) []string {
	var out []string
	for _, r := range rewrites {
		for _, rn := range r.Nodes {
			name, _, _ := strings.Cut(rn, "=")
			if slices.ContainsFunc(nodes, func(n string) bool { return strings.HasPrefix(n, name+"=") }) {
				out = append(out, r.String())
				break
			}
		}
	}
	return out
}

// Label names a kernel's work: the root op in CamelCase with its problem size (MatMul[MxNxK],
// Attention[BxSxD] ...), prefixed by the fused elementwise ops before it (Add+Gelu[4x16]).
func Label(nodes []*graph.Node) string {
	if len(nodes) == 0 {
		return "?"
	}
	var ops []string
	for _, n := range nodes {
		ops = append(ops, camel(n.Op))
	}
	root := nodes[len(nodes)-1]
	dims := dimsOf(root)
	return strings.Join(ops, "+") + "[" + dims + "]"
}

func dimsOf(n *graph.Node) string {
	join := func(ds []int) string {
		if len(ds) == 0 {
			return "scalar"
		}
		s := make([]string, len(ds))
		for i, d := range ds {
			s[i] = fmt.Sprint(d)
		}
		return strings.Join(s, "x")
	}
	if d := n.Def(); d != nil && d.Kind == graph.KindMatmul && len(n.Inputs) >= 2 {
		out := n.Output.Type.Shape
		a := n.Inputs[0].Type.Shape
		k := 0
		if len(a) >= 2 {
			k = a[len(a)-1]
			if n.BoolAttr("transpose_a") {
				k = a[len(a)-2]
			}
		}
		return join(append(slices.Clone(out), k))
	}
	if len(n.Inputs) > 0 && n.Def() != nil && n.Def().Kind != graph.KindUnary && n.Def().Kind != graph.KindBinary && n.Def().Kind != graph.KindCast {
		return join(n.Inputs[0].Type.Shape) // reductions and row ops: the shape they walk
	}
	return join(n.Output.Type.Shape)
}

var camelNames = map[string]string{"matmul": "MatMul", "batch_matmul": "BatchMatMul"}

func camel(op string) string {
	if c, ok := camelNames[op]; ok {
		return c
	}
	parts := strings.Split(op, "_")
	for i, p := range parts {
		if p != "" {
			parts[i] = strings.ToUpper(p[:1]) + p[1:]
		}
	}
	return strings.Join(parts, "")
}

// errNoKernels is returned by summaries of a report without kernels.
var errNoKernels = errs.New(errs.Input, "profiling: the program has no kernels")
