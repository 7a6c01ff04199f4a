package training

import (
	"slices"

	"github.com/tessera-qa/tessera-qa/engine/autodiff"
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/graph"
)

// Pipeline stages. The forward graph of a model (built for one micro-batch) is cut into S
// contiguous runs of its nodes, in the graph's topological order, as evenly as their count
// allows. A stage's inputs are the boundary values it receives (every value defined by an
// earlier stage and used by this one or a later one: values a stage does not use pass through
// it), the parameters its nodes use and the data (x, target) they use; its outputs are the
// boundary values the next stage receives, or the loss on the last stage. Every parameter
// belongs to the one stage that uses it.

// stageGraph is one stage of a cut model.
type stageGraph struct {
	index  int
	ins    []string // boundary inputs, in the previous stage's output order
	outs   []string // boundary outputs ("loss" on the last stage)
	params []string // in the model's parameter order
	data   []string // x and/or target
	fwd    *graph.Graph
	// bwd is fwd extended by its gradient: on the last stage autodiff.Grad of the loss, on the
	// others autodiff.VJP with one cotangent input d_<out> per output; its outputs are fwd's
	// followed by grad_<in> for every boundary input, then grad_<param> for every parameter.
	bwd *graph.Graph
}

// cutModel cuts m's forward graph into S stages.
func cutModel(m *Model, S int) ([]*stageGraph, error) {
	g := m.Graph
	N := len(g.Nodes)
	if S < 1 || S > N {
		return nil, errs.New(errs.Input, "train: model %s has %d nodes, which do not cut into %d pipeline stages", m.Name, N, S)
	}
	stageOf := map[string]int{} // value defined by a node -> its stage
	bounds := make([]int, S+1)
	for k := range S + 1 {
		bounds[k] = k * N / S
	}
	for k := range S {
		for _, n := range g.Nodes[bounds[k]:bounds[k+1]] {
			stageOf[n.Output.Name] = k
		}
	}
	isParam := map[string]bool{}
	for _, p := range m.Params {
		isParam[p] = true
	}
	// lastUse[v]: the last stage that uses value v.
	lastUse := map[string]int{}
	for k := range S {
		for _, n := range g.Nodes[bounds[k]:bounds[k+1]] {
			for _, in := range n.Inputs {
				lastUse[in.Name] = max(lastUse[in.Name], k)
			}
		}
	}
	owner := map[string]int{}
	stages := make([]*stageGraph, S)
	var carried []string // boundary values entering stage k, in order
	for k := range S {
		st := &stageGraph{index: k, ins: slices.Clone(carried)}
		nodes := g.Nodes[bounds[k]:bounds[k+1]]
		used := map[string]bool{}
		for _, n := range nodes {
			for _, in := range n.Inputs {
				used[in.Name] = true
			}
		}
		for _, p := range m.Params {
			if used[p] {
				if o, ok := owner[p]; ok {
					return nil, errs.New(errs.Unsupported, "train: parameter %s of model %s is used by pipeline stages %d and %d; a parameter must live on one stage", p, m.Name, o, k)
				}
				owner[p] = k
				st.params = append(st.params, p)
			}
		}
		for _, d := range []string{"x", "target"} {
			if used[d] {
				st.data = append(st.data, d)
			}
		}
		if k == S-1 {
			st.outs = []string{"loss"}
		} else {
			for _, v := range carried {
				if lastUse[v] > k {
					st.outs = append(st.outs, v)
				}
			}
			for _, n := range nodes {
				if lastUse[n.Output.Name] > k {
					st.outs = append(st.outs, n.Output.Name)
				}
			}
		}
		if err := st.build(m, nodes); err != nil {
			return nil, err
		}
		stages[k] = st
		carried = st.outs
	}
	for _, p := range m.Params {
		if _, ok := owner[p]; !ok {
			return nil, errs.New(errs.Internal, "train: parameter %s of model %s is used by no node", p, m.Name)
		}
	}
	return stages, nil
}

func (st *stageGraph) build(m *Model, nodes []*graph.Node) error {
	g := m.Graph
	b := graph.NewBuilder(g.Name + "_stage" + itoa(st.index))
	vals := map[string]*graph.Value{}
	input := func(name string) {
		t := g.Value(name).Type
		vals[name] = b.Input(name, t.DType, t.Shape...)
	}
	for _, n := range st.ins {
		input(n)
	}
	for _, n := range st.params {
		input(n)
	}
	for _, n := range st.data {
		input(n)
	}
	for _, n := range nodes {
		ins := make([]*graph.Value, len(n.Inputs))
		for i, in := range n.Inputs {
			v, ok := vals[in.Name]
			if !ok {
				return errs.New(errs.Internal, "train: stage %d of model %s: node %s reads %s, which reaches it from no earlier stage", st.index, m.Name, n.Output.Name, in.Name)
			}
			ins[i] = v
		}
		vals[n.Output.Name] = b.Named(n.Output.Name, n.Op, n.Attrs, ins...)
	}
	for _, o := range st.outs {
		b.Output(vals[o])
	}
	fwd, err := b.Build()
	if err != nil {
		return errs.Wrap(errs.Internal, err, "train: stage %d of model %s", st.index, m.Name)
	}
	st.fwd = fwd
	wrt := append(slices.Clone(st.ins), st.params...)
	if st.outs[0] == "loss" {
		st.bwd, err = autodiff.Grad(fwd, "loss", wrt...)
	} else {
		st.bwd, err = autodiff.VJP(fwd, wrt...)
	}
	if err != nil {
		return errs.Wrap(errs.CodeOf(err), err, "train: gradient of stage %d of model %s", st.index, m.Name)
	}
	return nil
}

func itoa(i int) string { return string(rune('0'+i/10%10)) + string(rune('0'+i%10)) }
