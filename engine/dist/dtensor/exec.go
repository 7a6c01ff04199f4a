package dtensor

import (
	"context"
	"fmt"
	"slices"

	"github.com/tessera-qa/tessera-qa/engine/dist"
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/failpoint"
	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
)

// Exec runs one collective node of a rank program on this rank: x is its input (nil for
// recv), the result has the node's output type. Blocks along a dim are laid out contiguously
// before the communicator sees them, since dist's collectives work on flat buffers in rank
// order; members of an axis communicator are in coordinate order, so rank order is
// coordinate order.
func Exec(ctx context.Context, g *Groups, n *graph.Node, x *tensor.Tensor) (*tensor.Tensor, error) {
	out, err := exec(ctx, g, n, x)
	if err != nil {
		return nil, errs.Wrap(errs.Internal, err, "rank %d: node %%%s (%s over %s)", g.Rank(), n.Output.Name, n.Op, n.StringAttr("axis"))
	}
	if !slices.Equal(out.Shape, n.Output.Type.Shape) || out.DType != n.Output.Type.DType {
		return nil, errs.New(errs.Internal, "rank %d: node %%%s (%s) made %s, declared %s", g.Rank(), n.Output.Name, n.Op, out.TypeString(), n.Output.Type)
	}
	return out, nil
}

// ExecBucket runs a bucket of all_reduce nodes (compiler.Step.Bucket: one axis, reduction and
// dtype) as one all_reduce over their inputs xs laid end to end, and gives each node its slice.
// The reduction is element by element, so the results have the bits of one Exec per node.
func ExecBucket(ctx context.Context, g *Groups, ns []*graph.Node, xs []*tensor.Tensor) ([]*tensor.Tensor, error) {
	if len(ns) == 0 || len(ns) != len(xs) {
		return nil, errs.New(errs.Internal, "rank %d: a bucket of %d all_reduces with %d inputs", g.Rank(), len(ns), len(xs))
	}
	first := ns[0]
	where := func() string {
		return fmt.Sprintf("rank %d: bucket %%%s..%%%s (%d all_reduces over %s)", g.Rank(), first.Output.Name, ns[len(ns)-1].Output.Name, len(ns), first.StringAttr("axis"))
	}
	for i, n := range ns {
		x := xs[i]
		if n.Op != "all_reduce" || n.StringAttr("axis") != first.StringAttr("axis") || n.StringAttr("op") != first.StringAttr("op") ||
			x == nil || x.DType != first.Output.Type.DType || !slices.Equal(x.Shape, n.Output.Type.Shape) {
			return nil, errs.New(errs.Internal, "%s: node %%%s (%s) does not belong to it", where(), n.Output.Name, n.Op)
		}
	}
	c, err := g.Axis(first.StringAttr("axis"))
	if err != nil {
		return nil, errs.Wrap(errs.Internal, err, "%s", where())
	}
	op, err := dist.ParseRedOp(first.StringAttr("op"))
	if err != nil {
		return nil, errs.Wrap(errs.Internal, err, "%s", where())
	}
	outs := make([]*tensor.Tensor, len(ns))
	bufs := make([][]byte, len(ns))
	for i, n := range ns {
		outs[i] = tensor.New(n.Output.Type.DType, n.Output.Type.Shape)
		copy(outs[i].Data, xs[i].Data)
		bufs[i] = outs[i].Data
	}
	if failpoint.Enabled(failpoint.DistBucketOnlyFirstReduced) {
		bufs = bufs[:1]
	}
	if err := c.AllReduceEach(ctx, first.Output.Type.DType, bufs, op); err != nil {
		return nil, errs.Wrap(errs.Internal, err, "%s", where())
	}
	return outs, nil
}

func exec(ctx context.Context, g *Groups, n *graph.Node, x *tensor.Tensor) (*tensor.Tensor, error) {
	axis := n.StringAttr("axis")
	c, err := g.Axis(axis)
	if err != nil {
		return nil, err
	}
	size, coord := c.World(), c.Rank()
	dt := n.Output.Type.DType
	if x == nil && n.Op != "recv" {
		return nil, errs.New(errs.Input, "%s needs an input", n.Op)
	}
	dim := func(name string) int {
		d, _ := graph.NormAxis(int(n.IntAttr(name)), len(x.Shape)) // checked by inference
		return d
	}
	switch n.Op {
	case "all_reduce":
		op, err := dist.ParseRedOp(n.StringAttr("op"))
		if err != nil {
			return nil, err
		}
		out := tensor.New(dt, x.Shape)
		return out, c.AllReduce(ctx, dt, x.Data, out.Data, op)
	case "all_gather":
		buf := make([]byte, size*len(x.Data))
		if err := c.AllGather(ctx, dt, x.Data, buf); err != nil {
			return nil, err
		}
		return joinBlocks(buf, dt, x.Shape, dim("dim"), size), nil
	case "reduce_scatter":
		op, err := dist.ParseRedOp(n.StringAttr("op"))
		if err != nil {
			return nil, err
		}
		out := tensor.New(dt, n.Output.Type.Shape)
		return out, c.ReduceScatter(ctx, dt, packBlocks(x, dim("dim"), size), out.Data, op)
	case "broadcast":
		out := tensor.New(dt, x.Shape)
		return out, c.Broadcast(ctx, dt, x.Data, out.Data, int(n.IntAttr("root")))
	case "all_to_all":
		sd, cd := dim("split_dim"), dim("concat_dim")
		buf := make([]byte, len(x.Data))
		if err := c.AllToAll(ctx, dt, packBlocks(x, sd, size), buf); err != nil {
			return nil, err
		}
		part := slices.Clone(x.Shape)
		part[sd] /= size
		return joinBlocks(buf, dt, part, cd, size), nil
	case "chunk":
		return Block(x, dim("dim"), coord, size), nil
	case "send":
		if coord == int(n.IntAttr("src")) {
			if err := c.Send(ctx, dt, x.Data, int(n.IntAttr("dst"))); err != nil {
				return nil, err
			}
		}
		return x, nil
	case "recv":
		out := tensor.New(dt, n.Output.Type.Shape)
		if coord == int(n.IntAttr("dst")) {
			return out, c.Recv(ctx, dt, out.Data, int(n.IntAttr("src")))
		}
		return out, nil
	}
	return nil, errs.New(errs.Unsupported, "no executor for collective %s", n.Op)
}
