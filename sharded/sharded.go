// Package sharded runs catalogue graphs over a device mesh and collects what the sharded
// execution specs compare: the whole outputs assembled from every rank's blocks, the same
// graph on one device, and the golden model of the rank program (ref.RunDist) per rank.
// suites/sharded holds the specs; this package holds the cases and the runner.
package sharded

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime"
	"sync"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/backend"
	"github.com/tessera-qa/tessera-qa/engine/compiler"
	"github.com/tessera-qa/tessera-qa/engine/dist"
	"github.com/tessera-qa/tessera-qa/engine/dist/mesh"
	"github.com/tessera-qa/tessera-qa/engine/dist/rdzv"
	"github.com/tessera-qa/tessera-qa/engine/dist/run"
	"github.com/tessera-qa/tessera-qa/engine/dist/tcp"
	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/engine/ref"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
	"github.com/tessera-qa/tessera-qa/harness"
)

// Case is one graph under one sharding: a mesh and the layouts of some inputs (the rest are
// replicated). K is the longest sum an output element depends on, which scales the tolerance.
type Case struct {
	Name    string // graph/strategy/mesh, e.g. "mlp/tp/tp=4"
	Graph   *graph.Graph
	Mesh    string
	Layouts map[string]string
	K       int
	Seed    uint64
	// Inputs, when set, are the whole inputs to shard (`tessera-qa check --in`); else Run
	// draws them from Seed.
	Inputs map[string]*tensor.Tensor
}

// Strategy is a way to shard a graph over one or two axes: the layouts name the axes.
type Strategy struct {
	Name    string
	Axes    []string // mesh axes, in order
	Layouts map[string]string
}

// Model is a catalogue graph with the strategies it is run under.
type Model struct {
	Name       string
	Graph      func() (*graph.Graph, error)
	K          int
	Strategies []Strategy
}

// Models is the catalogue: matmul, the MLP of docs/examples/mlp.tg, attention and layernorm,
// each data-parallel (dp) and tensor-parallel (tp), the MLP also dp x tp.
func Models() []Model {
	return []Model{
		{Name: "matmul", K: 16, Graph: matmulGraph, Strategies: []Strategy{
			{"dp", []string{"dp"}, map[string]string{"x": "[S(dp),R]"}},
			{"tp-col", []string{"tp"}, map[string]string{"w": "col:tp"}},
			{"tp-row", []string{"tp"}, map[string]string{"x": "col:tp", "w": "row:tp"}},
		}},
		{Name: "mlp", K: 16, Graph: mlpGraph, Strategies: []Strategy{
			{"dp", []string{"dp"}, map[string]string{"x": "[S(dp),R]"}},
			{"tp", []string{"tp"}, map[string]string{"w1": "col:tp", "b1": "col:tp", "w2": "row:tp"}},
			{"dp-tp", []string{"dp", "tp"}, map[string]string{"x": "[S(dp),R]", "w1": "col:tp", "w2": "row:tp"}},
		}},
		{Name: "attention", K: 16, Graph: attentionGraph, Strategies: []Strategy{
			{"dp", []string{"dp"}, map[string]string{"q": "[S(dp),R,R,R]", "k": "[S(dp),R,R,R]", "v": "[S(dp),R,R,R]"}},
			{"tp-heads", []string{"tp"}, map[string]string{"q": "[R,S(tp),R,R]", "k": "[R,S(tp),R,R]", "v": "[R,S(tp),R,R]"}},
			{"sp-queries", []string{"sp"}, map[string]string{"q": "[R,R,S(sp),R]"}},
		}},
		{Name: "layernorm", K: 32, Graph: layernormGraph, Strategies: []Strategy{
			{"dp", []string{"dp"}, map[string]string{"x": "[S(dp),R]"}},
			{"tp-hidden", []string{"tp"}, map[string]string{"x": "col:tp", "gamma": "col:tp"}},
		}},
	}
}

// Cases expands the catalogue over world sizes: one-axis strategies on 1, 2 and 4 ranks,
// two-axis ones on 2x2.
func Cases() ([]Case, error) {
	var out []Case
	for _, m := range Models() {
		g, err := m.Graph()
		if err != nil {
			return nil, fmt.Errorf("model %s: %w", m.Name, err)
		}
		for _, s := range m.Strategies {
			var meshes []string
			if len(s.Axes) == 1 {
				for _, n := range []int{1, 2, 4} {
					meshes = append(meshes, fmt.Sprintf("%s=%d", s.Axes[0], n))
				}
			} else {
				meshes = []string{s.Axes[0] + "=2," + s.Axes[1] + "=2"}
			}
			for i, ms := range meshes {
				out = append(out, Case{Name: m.Name + "/" + s.Name + "/" + ms, Graph: g, Mesh: ms, Layouts: s.Layouts, K: m.K, Seed: uint64(1000*len(out) + i + 1)})
			}
		}
	}
	return out, nil
}

// Outcome is everything one sharded run produced.
type Outcome struct {
	Program *compiler.DistProgram
	Inputs  map[string]*tensor.Tensor   // whole inputs
	Blocks  []map[string]*tensor.Tensor // per rank
	Ranks   [][]*tensor.Tensor          // per rank outputs
	Whole   []*tensor.Tensor            // assembled outputs
	Single  []*tensor.Tensor            // the graph on one device, same backend
	Ref     [][]*tensor.Tensor          // ref.RunDist of the rank program, per rank
}

// Compile compiles the case for its mesh.
func (c Case) Compile() (*compiler.DistProgram, error) {
	m, err := mesh.ParseMesh(c.Mesh)
	if err != nil {
		return nil, err
	}
	ls := map[string]mesh.Layout{}
	for name, text := range c.Layouts {
		v := c.Graph.Value(name)
		if v == nil {
			return nil, fmt.Errorf("case %s: no input %s", c.Name, name)
		}
		if ls[name], err = mesh.ParseLayout(text, v.Type.Rank()); err != nil {
			return nil, err
		}
	}
	return compiler.CompileDist(c.Graph, compiler.Options{Mesh: m, Layouts: ls})
}

// Run compiles and runs the case on in-process ranks in the given mode, and computes the
// one-device result and the golden model of the rank program.
func (c Case) Run(be backend.Backend, mode dist.Mode) (*Outcome, error) {
	dp, err := c.Compile()
	if err != nil {
		return nil, err
	}
	o := &Outcome{Program: dp}
	if o.Inputs = c.Inputs; o.Inputs == nil {
		if o.Inputs, err = harness.RandomInputs(c.Graph, c.Seed, nil); err != nil {
			return nil, err
		}
	}
	if o.Blocks, err = run.ShardInputs(dp.Plan, o.Inputs); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if o.Ranks, err = run.Inproc(ctx, dp, be, dist.Options{Mode: mode, Timeout: 30 * time.Second}, o.Blocks); err != nil {
		return nil, err
	}
	if o.Whole, err = run.AssembleOutputs(dp.Plan, o.Ranks); err != nil {
		return nil, err
	}
	p, err := compiler.Compile(c.Graph, compiler.Options{})
	if err != nil {
		return nil, err
	}
	if o.Single, err = be.Run(p, o.Inputs); err != nil {
		return nil, err
	}
	if o.Ref, err = ref.RunDist(dp.Graph, o.Blocks); err != nil {
		return nil, err
	}
	return o, nil
}

// Tolerance is the allowance for output i of the case: the dtype's default with RTol scaled
// for a K-term sum (sharding changes the order of the additions, never their number), ATol
// left at the default so that small outputs (probabilities) keep a meaningful guard.
func (c Case) Tolerance(dt numerics.DType) harness.Tolerance {
	t := harness.DefaultTolerance(dt)
	t.RTol = t.ForReduction(c.K).RTol
	return t
}

// Collectives lists the rank program's collective ops with their axes ("all_reduce:tp").
func Collectives(dp *compiler.DistProgram) []string {
	var out []string
	for _, n := range dp.Graph.Nodes {
		if graph.IsCollective(n.Op) {
			out = append(out, n.Op+":"+n.StringAttr("axis"))
		}
	}
	return out
}

func matmulGraph() (*graph.Graph, error) {
	b := graph.NewBuilder("matmul")
	x := b.Input("x", numerics.F32, 8, 16)
	w := b.Input("w", numerics.F32, 16, 12)
	b.Output(b.Op("matmul", nil, x, w))
	return b.Build()
}

// mlpGraph reads docs/examples/mlp.tg from the repository root.
func mlpGraph() (*graph.Graph, error) {
	_, file, _, _ := runtime.Caller(0)
	return graph.ParseFile(filepath.Join(filepath.Dir(file), "..", "docs", "examples", "mlp.tg"))
}

func attentionGraph() (*graph.Graph, error) {
	b := graph.NewBuilder("attention")
	q := b.Input("q", numerics.F32, 4, 4, 8, 16)
	k := b.Input("k", numerics.F32, 4, 4, 8, 16)
	v := b.Input("v", numerics.F32, 4, 4, 8, 16)
	b.Output(b.Op("attention", nil, q, k, v))
	return b.Build()
}

func layernormGraph() (*graph.Graph, error) {
	b := graph.NewBuilder("layernorm")
	x := b.Input("x", numerics.F32, 8, 32)
	g := b.Input("gamma", numerics.F32, 32)
	bt := b.Input("beta", numerics.F32, 32)
	b.Output(b.Op("relu", nil, b.Op("layernorm", nil, x, g, bt)))
	return b.Build()
}

// TCPWorld connects world tcp endpoints on loopback through a rendezvous store served here,
// for running a program's ranks as goroutines over real sockets. close releases the store.
func TCPWorld(ctx context.Context, world int, job string) (ts []dist.Transport, closeStore func(), err error) {
	srv, err := rdzv.Serve(ctx, "127.0.0.1:0")
	if err != nil {
		return nil, nil, err
	}
	ts = make([]dist.Transport, world)
	errsOf := make([]error, world)
	var wg sync.WaitGroup
	for r := range world {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, err := rdzv.Dial(ctx, srv.Addr())
			if err == nil {
				var t *tcp.Transport
				if t, err = tcp.Connect(ctx, tcp.Config{Rank: r, World: world, Store: st, JobID: job, ListenHost: "127.0.0.1", Timeout: 20 * time.Second}); err == nil {
					ts[r] = t // only a connected endpoint enters the interface (never a typed nil)
				}
			}
			errsOf[r] = err
		}()
	}
	wg.Wait()
	for _, err := range errsOf {
		if err != nil {
			for _, t := range ts {
				if t != nil {
					t.Close()
				}
			}
			srv.Close()
			return nil, nil, err
		}
	}
	return ts, func() { srv.Close() }, nil
}

// RunOver runs the case's compiled program on the given endpoints and returns every rank's
// outputs (the inputs are the case's, as in Run).
func (c Case) RunOver(be backend.Backend, mode dist.Mode, ts []dist.Transport) ([][]*tensor.Tensor, error) {
	dp, err := c.Compile()
	if err != nil {
		return nil, err
	}
	in := c.Inputs
	if in == nil {
		if in, err = harness.RandomInputs(c.Graph, c.Seed, nil); err != nil {
			return nil, err
		}
	}
	blocks, err := run.ShardInputs(dp.Plan, in)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return run.Goroutines(ctx, dp, be, dist.Options{Mode: mode, Timeout: 30 * time.Second}, ts, blocks)
}
