package ref

import (
	"fmt"
	"slices"

	"github.com/tessera-qa/tessera-qa/engine/dist/mesh"
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
)

// RunDist is the golden model of an SPMD run: g is every rank's program over g.Mesh, inputs[r]
// rank r's inputs. It evaluates the ranks in lockstep, node by node, and computes each
// collective from every member's input at once, the global answer with no communication at
// all: reductions in float64 (int64 for integers) over the group in coordinate order, rounded
// once to the dtype; gathers, scatters and all-to-all as element copies; a recv gets what the
// matching send held. Every other node is Eval, as in Run. A graph without a mesh runs on one
// rank. The result is outputs[r][i], rank r's i-th output.
func RunDist(g *graph.Graph, inputs []map[string]*tensor.Tensor) ([][]*tensor.Tensor, error) {
	if g == nil {
		return nil, errs.New(errs.Input, "ref: nil graph")
	}
	if err := graph.Verify(g); err != nil {
		return nil, err
	}
	world := 1
	if g.Mesh != nil {
		world = g.Mesh.World()
	}
	if len(inputs) != world {
		return nil, errs.New(errs.Input, "ref: graph %s runs on %d ranks (mesh %s), got inputs for %d", g.Name, world, g.Mesh, len(inputs))
	}
	env := make([]map[*graph.Value]*tensor.Tensor, world)
	for r := range world {
		if err := graph.CheckInputs(g, inputs[r]); err != nil {
			return nil, errs.Wrap(errs.Input, err, "rank %d", r)
		}
		env[r] = map[*graph.Value]*tensor.Tensor{}
		for _, v := range g.Inputs {
			env[r][v] = inputs[r][v.Name]
		}
	}
	mail := map[string][]*tensor.Tensor{} // per send/recv channel: what was sent, in order
	for _, n := range g.Nodes {
		in := make([][]*tensor.Tensor, world) // in[r]: rank r's input tensors
		for r := range world {
			for _, v := range n.Inputs {
				in[r] = append(in[r], env[r][v])
			}
		}
		var outs []*tensor.Tensor
		var err error
		if graph.IsCollective(n.Op) {
			outs, err = collective(g.Mesh, n, in, mail)
		} else {
			outs = make([]*tensor.Tensor, world)
			for r := range world {
				if outs[r], err = Eval(n, in[r]); err != nil {
					err = errs.Wrap(errs.Internal, err, "rank %d", r)
					break
				}
			}
		}
		if err != nil {
			return nil, errs.Wrap(errs.Internal, err, "graph %s", g.Name)
		}
		for r := range world {
			env[r][n.Output] = outs[r]
		}
	}
	res := make([][]*tensor.Tensor, world)
	for r := range world {
		for _, v := range g.Outputs {
			res[r] = append(res[r], env[r][v].Clone())
		}
	}
	return res, nil
}

// collective computes one mesh op for every rank. in[r][0] is rank r's input (none for recv).
func collective(m *mesh.Mesh, n *graph.Node, in [][]*tensor.Tensor, mail map[string][]*tensor.Tensor) ([]*tensor.Tensor, error) {
	axis := n.StringAttr("axis")
	outs := make([]*tensor.Tensor, m.World())
	for r := range outs {
		group := m.Group(axis, r)
		coord := m.Coord(axis, r)
		members := make([]*tensor.Tensor, len(group))
		if len(in[r]) > 0 {
			for c, q := range group {
				members[c] = in[q][0]
			}
		}
		var err error
		switch n.Op {
		case "all_reduce":
			outs[r], err = reduceMembers(n, members)
		case "reduce_scatter":
			var full *tensor.Tensor
			if full, err = reduceMembers(n, members); err == nil {
				outs[r] = block(full, dimAttr(n, "dim", full), coord, len(group))
			}
		case "all_gather":
			outs[r] = join(members, dimAttr(n, "dim", members[0]))
		case "broadcast":
			outs[r] = members[n.IntAttr("root")].Clone()
		case "chunk":
			outs[r] = block(in[r][0], dimAttr(n, "dim", in[r][0]), coord, len(group))
		case "all_to_all":
			sd, cd := dimAttr(n, "split_dim", members[0]), dimAttr(n, "concat_dim", members[0])
			parts := make([]*tensor.Tensor, len(group))
			for j, t := range members {
				parts[j] = block(t, sd, coord, len(group))
			}
			outs[r] = join(parts, cd)
		case "send":
			outs[r] = in[r][0].Clone()
			if coord == int(n.IntAttr("src")) {
				key := channel(n, group)
				mail[key] = append(mail[key], in[r][0].Clone())
			}
		case "recv":
			outs[r] = tensor.New(n.Output.Type.DType, n.Output.Type.Shape)
			if coord == int(n.IntAttr("dst")) {
				key := channel(n, group)
				if len(mail[key]) == 0 {
					return nil, errs.New(errs.Input, "ref: %s: rank %d receives on %s but no send of that channel came before it", nodeName(n), r, key)
				}
				got := mail[key][0]
				mail[key] = mail[key][1:]
				if got.DType != outs[r].DType || !slices.Equal(got.Shape, outs[r].Shape) {
					return nil, errs.New(errs.Shape, "ref: %s: rank %d expects %s but the matching send carried %s", nodeName(n), r, outs[r].TypeString(), got.TypeString())
				}
				outs[r] = got
			}
		default:
			return nil, errs.New(errs.Unsupported, "ref: %s: no reference for collective %s", nodeName(n), n.Op)
		}
		if err != nil {
			return nil, err
		}
	}
	return outs, nil
}

// channel names a send/recv pair's queue: axis, stages and the group (its lowest rank).
func channel(n *graph.Node, group []int) string {
	return fmt.Sprintf("%s:%d->%d@%d", n.StringAttr("axis"), n.IntAttr("src"), n.IntAttr("dst"), group[0])
}

func dimAttr(n *graph.Node, name string, t *tensor.Tensor) int {
	d, _ := graph.NormAxis(int(n.IntAttr(name)), len(t.Shape)) // checked by inference
	return d
}

// reduceMembers folds the members elementwise in coordinate order in float64 (int64 for
// integers) and rounds once; avg divides the float sum by the member count.
func reduceMembers(n *graph.Node, members []*tensor.Tensor) (*tensor.Tensor, error) {
	op := n.StringAttr("op")
	x := members[0]
	out := tensor.New(x.DType, x.Shape)
	if x.DType.IsFloat() {
		acc := floatsOf(x)
		for _, t := range members[1:] {
			for i, v := range floatsOf(t) {
				acc[i] = foldF(op, acc[i], v)
			}
		}
		if op == "avg" {
			for i := range acc {
				acc[i] /= float64(len(members))
			}
		}
		putFloats(out, acc)
		return out, nil
	}
	if op == "avg" {
		return nil, floatOnly(n, x.DType)
	}
	acc := intsOf(x)
	for _, t := range members[1:] {
		for i, v := range intsOf(t) {
			acc[i] = foldI(op, acc[i], v)
		}
	}
	putInts(out, acc)
	return out, nil
}

func foldF(op string, a, b float64) float64 {
	switch op {
	case "max":
		return max(a, b)
	case "min":
		return min(a, b)
	}
	return a + b
}

func foldI(op string, a, b int64) int64 {
	switch op {
	case "max":
		return max(a, b)
	case "min":
		return min(a, b)
	}
	return a + b
}

// block returns block k of n equal blocks of t along dim, element by element.
func block(t *tensor.Tensor, dim, k, n int) *tensor.Tensor {
	shape := slices.Clone(t.Shape)
	shape[dim] /= n
	out := tensor.New(t.DType, shape)
	strides := tensor.Strides(t.Shape)
	base := k * shape[dim] * strides[dim]
	for o := range out.Len() {
		out.SetBits(o, t.Bits(base+index(o, shape, strides)))
	}
	return out
}

// join concatenates equal-shaped tensors along dim, element by element: output element with
// coordinate c on dim comes from part c / size, coordinate c % size.
func join(parts []*tensor.Tensor, dim int) *tensor.Tensor {
	x := parts[0]
	shape := slices.Clone(x.Shape)
	shape[dim] *= len(parts)
	out := tensor.New(x.DType, shape)
	strides := tensor.Strides(shape)
	for o := range out.Len() {
		c := (o / strides[dim]) % shape[dim]
		p, within := c/x.Shape[dim], c%x.Shape[dim]
		// The same flat index with coordinate `within` on dim, in the part's shape.
		src := 0
		rem := o
		ps := tensor.Strides(x.Shape)
		for d := len(shape) - 1; d >= 0; d-- {
			cd := rem % shape[d]
			rem /= shape[d]
			if d == dim {
				cd = within
			}
			src += cd * ps[d]
		}
		out.SetBits(o, parts[p].Bits(src))
	}
	return out
}
