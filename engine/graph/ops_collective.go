package graph

import (
	"fmt"
	"slices"

	"github.com/tessera-qa/tessera-qa/engine/dist/mesh"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

// Collective ops: one rank's view of a communication over one mesh axis. A graph holding them
// has a Mesh and is every rank's program (SPMD); "the group" of a rank is mesh.Group(axis,
// rank), the ranks that differ from it only on axis, and "coordinate" is the rank's position
// on axis. Reductions combine the group's contributions in coordinate order. Each op's output
// type follows from its input and the axis size alone, so every rank infers the same types.
//
// send/recv carry pipeline-stage traffic in the same SPMD program: src and dst are stage
// coordinates on axis. The k-th recv of a (axis, src, dst) triple receives what the k-th send
// of that triple sent, in program order.

// RedOps are the reductions all_reduce and reduce_scatter accept.
var RedOps = []string{"sum", "max", "min", "avg"}

var axisAttr = AttrSpec{Name: "axis", Kind: AttrString, Doc: "mesh axis the group runs along"}

func init() {
	opAttr := AttrSpec{Name: "op", Kind: AttrString, Default: dflt(String("sum")), Doc: `"sum", "max", "min" or "avg"`, Values: RedOps}
	dimAttr := func(name, doc string) AttrSpec {
		return AttrSpec{Name: name, Kind: AttrInt, Default: dflt(Int(0)), Doc: doc}
	}
	p2p := []AttrSpec{axisAttr,
		{Name: "src", Kind: AttrInt, Doc: "sending stage: coordinate on axis"},
		{Name: "dst", Kind: AttrInt, Doc: "receiving stage: coordinate on axis"}}

	register(&OpDef{Name: "all_reduce", Kind: KindCollective, MinArgs: 1, MaxArgs: 1, DTypes: numeric,
		Attrs: []AttrSpec{axisAttr, opAttr}, InferMesh: allReduceInfer,
		Doc: "every member gets the reduction (op) of the group's inputs, combined in coordinate order"})
	register(&OpDef{Name: "all_gather", Kind: KindCollective, MinArgs: 1, MaxArgs: 1, DTypes: anyDType,
		Attrs: []AttrSpec{axisAttr, dimAttr("dim", "dim to concatenate along")}, InferMesh: allGatherInfer,
		Doc: "every member gets the group's inputs concatenated along dim in coordinate order (dim grows by the axis size)"})
	register(&OpDef{Name: "reduce_scatter", Kind: KindCollective, MinArgs: 1, MaxArgs: 1, DTypes: numeric,
		Attrs: []AttrSpec{axisAttr, dimAttr("dim", "dim to split the result along"), opAttr}, InferMesh: reduceScatterInfer,
		Doc: "the group's inputs reduced (op), then member c keeps block c of the result along dim (dim shrinks by the axis size)"})
	register(&OpDef{Name: "broadcast", Kind: KindCollective, MinArgs: 1, MaxArgs: 1, DTypes: anyDType,
		Attrs: []AttrSpec{axisAttr, dimAttr("root", "coordinate on axis whose input every member gets")}, InferMesh: broadcastCollInfer,
		Doc: "every member gets the input of the member at coordinate root"})
	register(&OpDef{Name: "all_to_all", Kind: KindCollective, MinArgs: 1, MaxArgs: 1, DTypes: anyDType,
		Attrs:     []AttrSpec{axisAttr, dimAttr("split_dim", "dim cut into axis-size blocks, block j going to member j"), dimAttr("concat_dim", "dim along which the received blocks are joined in coordinate order")},
		InferMesh: allToAllInfer,
		Doc:       "member c gets block c (along split_dim) of every member's input, joined along concat_dim in coordinate order"})
	register(&OpDef{Name: "send", Kind: KindCollective, MinArgs: 1, MaxArgs: 1, DTypes: anyDType, Attrs: p2p, InferMesh: sendInfer,
		Doc: "the member at coordinate src sends its input to the member at dst; the output is the input on every member (it orders the send in the graph)"})
	register(&OpDef{Name: "recv", Kind: KindCollective, MinArgs: 0, MaxArgs: 0, DTypes: anyDType,
		Attrs: append(slices.Clone(p2p),
			AttrSpec{Name: "dtype", Kind: AttrDType, Doc: "dtype of the received tensor"},
			AttrSpec{Name: "shape", Kind: AttrInts, Doc: "shape of the received tensor"}),
		InferMesh: recvInfer,
		Doc:       "the member at coordinate dst gets what src sent with the matching send; every other member gets zeros"})
	register(&OpDef{Name: "chunk", Kind: KindCollective, MinArgs: 1, MaxArgs: 1, DTypes: anyDType,
		Attrs: []AttrSpec{axisAttr, dimAttr("dim", "dim to cut into axis-size blocks")}, InferMesh: chunkInfer,
		Doc: "member c keeps block c of its own input along dim: the local step from replicated to sharded (no communication)"})
}

// collAxis returns the node's axis size, checking the axis exists.
func collAxis(n *Node, m *mesh.Mesh) (int, error) {
	a := n.StringAttr("axis")
	if m.AxisIndex(a) < 0 {
		return 0, fmt.Errorf("mesh %s has no axis %q", m, a)
	}
	return m.Size(a), nil
}

func checkRedOp(n *Node, dt numerics.DType) error {
	op := n.StringAttr("op")
	if !slices.Contains(RedOps, op) {
		return fmt.Errorf("op %q: want sum, max, min or avg", op)
	}
	if op == "avg" && !dt.IsFloat() {
		return fmt.Errorf("op avg needs float inputs, got %s (an integer average would truncate)", dt)
	}
	return nil
}

func allReduceInfer(n *Node, in []Type, m *mesh.Mesh) (Type, error) {
	if _, err := collAxis(n, m); err != nil {
		return Type{}, err
	}
	if err := checkRedOp(n, in[0].DType); err != nil {
		return Type{}, err
	}
	return same(n, in)
}

// collDim normalizes a dim attribute against the input's rank.
func collDim(n *Node, name string, t Type) (int, error) {
	if t.Rank() == 0 {
		return 0, fmt.Errorf("needs rank >= 1 (a scalar has no dim to split or join)")
	}
	d, err := NormAxis(int(n.IntAttr(name)), t.Rank())
	if err != nil {
		return 0, fmt.Errorf("%s %d: %w", name, n.IntAttr(name), err)
	}
	return d, nil
}

// resized returns t with dim d multiplied by mul and divided by div (which must divide it).
func resized(n *Node, t Type, d, mul, div int) (Type, error) {
	s := slices.Clone(t.Shape)
	if s[d]%div != 0 {
		return Type{}, fmt.Errorf("dim %d (size %d) is not divisible by mesh axis %s (size %d)", d, s[d], n.StringAttr("axis"), div)
	}
	if s[d] > MaxElements/mul {
		return Type{}, fmt.Errorf("dim %d (size %d) times mesh axis %s (size %d) exceeds %d elements", d, s[d], n.StringAttr("axis"), mul, MaxElements)
	}
	s[d] = s[d] / div * mul
	return Type{DType: t.DType, Shape: s}, nil
}

func allGatherInfer(n *Node, in []Type, m *mesh.Mesh) (Type, error) {
	size, err := collAxis(n, m)
	if err != nil {
		return Type{}, err
	}
	d, err := collDim(n, "dim", in[0])
	if err != nil {
		return Type{}, err
	}
	return resized(n, in[0], d, size, 1)
}

func reduceScatterInfer(n *Node, in []Type, m *mesh.Mesh) (Type, error) {
	size, err := collAxis(n, m)
	if err != nil {
		return Type{}, err
	}
	if err := checkRedOp(n, in[0].DType); err != nil {
		return Type{}, err
	}
	d, err := collDim(n, "dim", in[0])
	if err != nil {
		return Type{}, err
	}
	return resized(n, in[0], d, 1, size)
}

func chunkInfer(n *Node, in []Type, m *mesh.Mesh) (Type, error) {
	size, err := collAxis(n, m)
	if err != nil {
		return Type{}, err
	}
	d, err := collDim(n, "dim", in[0])
	if err != nil {
		return Type{}, err
	}
	return resized(n, in[0], d, 1, size)
}

func broadcastCollInfer(n *Node, in []Type, m *mesh.Mesh) (Type, error) {
	size, err := collAxis(n, m)
	if err != nil {
		return Type{}, err
	}
	if r := n.IntAttr("root"); r < 0 || r >= int64(size) {
		return Type{}, fmt.Errorf("root %d outside axis %s of size %d", r, n.StringAttr("axis"), size)
	}
	return same(n, in)
}

func allToAllInfer(n *Node, in []Type, m *mesh.Mesh) (Type, error) {
	size, err := collAxis(n, m)
	if err != nil {
		return Type{}, err
	}
	sd, err := collDim(n, "split_dim", in[0])
	if err != nil {
		return Type{}, err
	}
	cd, err := collDim(n, "concat_dim", in[0])
	if err != nil {
		return Type{}, err
	}
	t, err := resized(n, in[0], sd, 1, size)
	if err != nil {
		return Type{}, err
	}
	return resized(n, t, cd, size, 1)
}

func checkStages(n *Node, size int) error {
	src, dst := n.IntAttr("src"), n.IntAttr("dst")
	if src < 0 || src >= int64(size) || dst < 0 || dst >= int64(size) {
		return fmt.Errorf("src %d / dst %d outside axis %s of size %d", src, dst, n.StringAttr("axis"), size)
	}
	if src == dst {
		return fmt.Errorf("src and dst are both %d: a stage does not send to itself", src)
	}
	return nil
}

func sendInfer(n *Node, in []Type, m *mesh.Mesh) (Type, error) {
	size, err := collAxis(n, m)
	if err != nil {
		return Type{}, err
	}
	if err := checkStages(n, size); err != nil {
		return Type{}, err
	}
	return same(n, in)
}

func recvInfer(n *Node, _ []Type, m *mesh.Mesh) (Type, error) {
	size, err := collAxis(n, m)
	if err != nil {
		return Type{}, err
	}
	if err := checkStages(n, size); err != nil {
		return Type{}, err
	}
	shape := n.IntsAttr("shape")
	if shape == nil {
		shape = []int{}
	}
	t := Type{DType: n.DTypeAttr("dtype"), Shape: shape}
	if len(shape) > MaxRank {
		return Type{}, fmt.Errorf("shape %v: rank exceeds %d", shape, MaxRank)
	}
	return t, checkType(t)
}
