package autotune

import (
	"slices"

	"github.com/tessera-qa/tessera-qa/engine/compiler"
	"github.com/tessera-qa/tessera-qa/engine/compiler/tile"
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/graph"
)

// problem is what a kernel's config space depends on: its kind and extents.
//
//	matmul     m, n, k (per batch)
//	attention  m = query rows, n = key rows, k = head dim, dv = value dim
//	reduce, rowwise   m = rows, n = row length
//	elementwise, copy, loss   n = elements a block walks over
type problem struct {
	kind     string
	m, n, k  int
	dv       int
	elemSize int // bytes per element of the first input: what a shared-memory stage holds
}

// problemOf reads kernel i's extents from the program's graph: the kernel's output buffer is
// the output of its root node.
func problemOf(p *compiler.Program, i int) (problem, error) {
	if i < 0 || i >= len(p.Kernels) || i >= len(p.Schedules) {
		return problem{}, errs.New(errs.Internal, "autotune: kernel %d out of range (program has %d)", i, len(p.Kernels))
	}
	sc, k := p.Schedules[i], p.Kernels[i]
	pi := slices.IndexFunc(k.Params, func(pa tile.Param) bool { return pa.Output })
	if pi < 0 {
		return problem{}, errs.New(errs.Internal, "autotune: kernel %s (%s) has no output parameter", sc.Kernel, sc.Key)
	}
	name := p.Buffers[k.Params[pi].Buffer].Name
	var n *graph.Node
	for _, nd := range p.Graph.Nodes {
		if nd.Output.Name == name {
			n = nd
		}
	}
	if n == nil {
		return problem{}, errs.New(errs.Internal, "autotune: kernel %s: no node defines its output %%%s", sc.Kernel, name)
	}
	pr := problem{kind: sc.Kind, elemSize: max(n.Inputs[0].Type.DType.Size(), 1)}
	in := n.Inputs
	switch sc.Kind {
	case "matmul":
		_, m, nn, kk, err := graph.MatmulDims(n, in[0].Type, in[1].Type)
		if err != nil {
			return problem{}, errs.Wrap(errs.Internal, err, "autotune: kernel %s", sc.Kernel)
		}
		pr.m, pr.n, pr.k = m, nn, kk
	case "attention":
		r := in[0].Type.Rank()
		pr.m, pr.k, pr.n, pr.dv = in[0].Type.Shape[r-2], in[0].Type.Shape[r-1], in[1].Type.Shape[r-2], in[2].Type.Shape[r-1]
	case "reduce":
		shape := in[0].Type.Shape
		axes, err := graph.ReduceAxes(n, len(shape))
		if err != nil {
			return problem{}, errs.Wrap(errs.Internal, err, "autotune: kernel %s", sc.Kernel)
		}
		pr.m, pr.n = 1, 1
		for ax, d := range shape {
			if slices.Contains(axes, ax) {
				pr.n *= d
			} else {
				pr.m *= d
			}
		}
	case "rowwise":
		shape := in[0].Type.Shape
		if len(shape) == 0 {
			shape = []int{1} // softmax of a scalar: one row of one element
		}
		ax := len(shape) - 1
		if n.Op == "softmax" || n.Op == "log_softmax" {
			a, err := graph.NormDim(int(n.IntAttr("axis")), in[0].Type.Rank())
			if err != nil {
				return problem{}, errs.Wrap(errs.Internal, err, "autotune: kernel %s", sc.Kernel)
			}
			ax = a
		}
		pr.m, pr.n = in[0].Type.NumElems()/max(shape[ax], 1), shape[ax]
	case "loss":
		pr.m, pr.n = 1, in[0].Type.NumElems()
	default: // elementwise, copy: one flat block index over the output
		pr.m, pr.n = 1, n.Output.Type.NumElems()
	}
	return pr, nil
}
