package dtensor

import (
	"context"
	"slices"

	"github.com/tessera-qa/tessera-qa/engine/dist/mesh"
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
)

// DTensor is one rank's handle on a distributed tensor: the whole tensor's shape, how it is
// laid out over the mesh, and the block this rank holds.
type DTensor struct {
	Name   string
	Mesh   *mesh.Mesh
	Layout mesh.Layout
	Global []int
	Local  *tensor.Tensor
}

// New wraps a rank's block, checking it is the layout's block shape of global.
func New(m *mesh.Mesh, name string, l mesh.Layout, global []int, local *tensor.Tensor) (*DTensor, error) {
	want, err := m.LocalShape(name, l, global)
	if err != nil {
		return nil, err
	}
	if !slices.Equal(want, local.Shape) {
		return nil, errs.New(errs.Shape, "tensor %s: block %s, layout %s of %v needs %v", name, local.TypeString(), l, global, want)
	}
	return &DTensor{Name: name, Mesh: m, Layout: l.Clone(), Global: slices.Clone(global), Local: local}, nil
}

// FromGlobal gives rank its block of a whole tensor (see Shard).
func FromGlobal(m *mesh.Mesh, name string, l mesh.Layout, global *tensor.Tensor, rank int) (*DTensor, error) {
	local, err := Shard(m, name, l, global, rank)
	if err != nil {
		return nil, err
	}
	return New(m, name, l, global.Shape, local)
}

// Redistribute moves the tensor to layout `to` through g's communicators, following
// mesh.Moves (the plan the compiler's shard pass emits): all_reduce for pending sums,
// all_to_all for a shard changing dims, all_gather, then local chunks. Every rank of the mesh
// must call it with the same layouts.
func (d *DTensor) Redistribute(ctx context.Context, g *Groups, to mesh.Layout) (*DTensor, error) {
	if err := d.Mesh.Check(d.Name, to, d.Global); err != nil {
		return nil, err
	}
	moves, err := mesh.Moves(d.Layout, to)
	if err != nil {
		return nil, errs.Wrap(errs.Input, err, "tensor %s", d.Name)
	}
	cur := d.Local
	for _, mv := range moves {
		shape, err := d.Mesh.LocalShape(d.Name, mv.After, d.Global)
		if err != nil {
			return nil, err
		}
		attrs := graph.Attrs{"axis": graph.String(mv.Axis)}
		switch mv.Op {
		case "all_reduce":
			attrs["op"] = graph.String("sum")
		case "all_to_all":
			attrs["split_dim"], attrs["concat_dim"] = graph.Int(int64(mv.ToDim)), graph.Int(int64(mv.Dim))
		default:
			attrs["dim"] = graph.Int(int64(mv.Dim))
		}
		n := &graph.Node{Op: mv.Op, Attrs: attrs, Output: &graph.Value{Name: d.Name, Type: graph.Type{DType: cur.DType, Shape: shape}}}
		if cur, err = Exec(ctx, g, n, cur); err != nil {
			return nil, err
		}
	}
	return &DTensor{Name: d.Name, Mesh: d.Mesh, Layout: to.Clone(), Global: slices.Clone(d.Global), Local: cur}, nil
}
