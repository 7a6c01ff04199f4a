// Package ref is the golden model: every op evaluated with plain loops in float64 (exact int64
// for integers), rounded once to the node's output dtype. Everything else in the engine is
// judged against it, so it favours the obviously right over the fast: no tiling, no fusion,
// accumulation in index order, and the `accum`/`tile` attributes are ignored (they describe how
// an engine may approximate this ideal, not what the ideal is).
package ref

import (
	"fmt"
	"slices"

	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
)

// impl computes one node into out, which Eval allocates with the inferred output type. Inputs
// have already been checked against the op's declaration, so an impl may trust shapes.
type impl func(n *graph.Node, in []*tensor.Tensor, out *tensor.Tensor) error

// impls is the one table of reference implementations, keyed by op name.
var impls = map[string]impl{
	"neg":     unaryOp(negF, func(x int64) int64 { return -x }),
	"abs":     unaryOp(absF, func(x int64) int64 { return max(x, -x) }),
	"relu":    unaryOp(reluF, func(x int64) int64 { return max(x, 0) }),
	"exp":     unaryOp(expF, nil),
	"log":     unaryOp(logF, nil),
	"sqrt":    unaryOp(sqrtF, nil),
	"rsqrt":   unaryOp(rsqrtF, nil),
	"tanh":    unaryOp(tanhF, nil),
	"sigmoid": unaryOp(sigmoid, nil),
	"silu":    unaryOp(silu, nil),
	"gelu":    gelu,

	"add":     binaryOp(add[float64], add[int64]),
	"sub":     binaryOp(sub[float64], sub[int64]),
	"mul":     binaryOp(mul[float64], mul[int64]),
	"div":     div,
	"maximum": binaryOp(maxOf[float64], maxOf[int64]),
	"minimum": binaryOp(minOf[float64], minOf[int64]),

	"cast": cast,

	"reduce_sum":  reduceOp(add[float64], add[int64], false),
	"reduce_max":  reduceOp(maxOf[float64], maxOf[int64], false),
	"reduce_mean": reduceOp(add[float64], nil, true),

	"softmax":     rowwise(softmaxRow),
	"log_softmax": rowwise(logSoftmaxRow),
	"layernorm":   layernorm,
	"rmsnorm":     rmsnorm,

	"matmul":        matmul,
	"batch_matmul":  matmul,
	"scaled_matmul": scaledMatmul,
	"attention":     attention,

	"transpose": transpose,
	"reshape":   reshape,
	"slice":     sliceOp,
	"concat":    concat,

	"mse_loss": mseLoss,
}

// Has reports whether op has a reference implementation.
func Has(op string) bool { _, ok := impls[op]; return ok }

// Run evaluates g on inputs (keyed by input value name) and returns the outputs in g.Outputs
// order. Every node's result is rounded once to its declared dtype, so tensors between nodes
// hold exactly what an engine storing them in that dtype would hold.
func Run(g *graph.Graph, inputs map[string]*tensor.Tensor) ([]*tensor.Tensor, error) {
	if g == nil {
		return nil, errs.New(errs.Input, "ref: nil graph")
	}
	if err := graph.Verify(g); err != nil {
		return nil, err
	}
	if err := graph.CheckInputs(g, inputs); err != nil {
		return nil, err
	}
	env := make(map[*graph.Value]*tensor.Tensor, len(g.Inputs)+len(g.Nodes))
	for _, v := range g.Inputs {
		env[v] = inputs[v.Name]
	}
	for _, n := range g.Nodes {
		in := make([]*tensor.Tensor, len(n.Inputs))
		for i, v := range n.Inputs {
			in[i] = env[v]
		}
		t, err := Eval(n, in)
		if err != nil {
			return nil, errs.Wrap(errs.Internal, err, "graph %s", g.Name)
		}
		env[n.Output] = t
	}
	outs := make([]*tensor.Tensor, len(g.Outputs))
	for i, v := range g.Outputs {
		// Clones, because an output may be a caller's input tensor or appear twice.
		outs[i] = env[v].Clone()
	}
	return outs, nil
}

// Eval computes one node from its input tensors. The output type is inferred from the tensors
// themselves (not trusted from the node), so Eval is safe on nodes outside a verified graph.
func Eval(n *graph.Node, in []*tensor.Tensor) (*tensor.Tensor, error) {
	if n == nil {
		return nil, errs.New(errs.Input, "ref: nil node")
	}
	f, ok := impls[n.Op]
	if !ok {
		return nil, errs.New(errs.Unsupported, "ref: %s: no reference implementation of op %q", nodeName(n), n.Op)
	}
	outType, err := inferFrom(n, in)
	if err != nil {
		return nil, err
	}
	out := tensor.New(outType.DType, outType.Shape)
	if err := f(n, in, out); err != nil {
		return nil, err
	}
	return out, nil
}

// inferFrom re-runs the op's type rule on the actual tensors and checks them against the node.
func inferFrom(n *graph.Node, in []*tensor.Tensor) (graph.Type, error) {
	if len(n.Inputs) != 0 && len(n.Inputs) != len(in) {
		return graph.Type{}, errs.New(errs.Input, "ref: %s: %s has %d inputs, got %d tensors", nodeName(n), n.Op, len(n.Inputs), len(in))
	}
	vals := make([]*graph.Value, len(in))
	for i, t := range in {
		if t == nil {
			return graph.Type{}, errs.New(errs.Input, "ref: %s: input %d is nil", nodeName(n), i)
		}
		typ := graph.Type{DType: t.DType, Shape: slices.Clone(t.Shape)}
		if err := graph.CheckType(typ); err != nil {
			return graph.Type{}, errs.Wrap(errs.Shape, err, "ref: %s: input %d", nodeName(n), i)
		}
		if len(t.Data) != t.Len()*t.DType.Size() {
			return graph.Type{}, errs.New(errs.Input, "ref: %s: input %d holds %d bytes, %s needs %d", nodeName(n), i, len(t.Data), t.TypeString(), t.Len()*t.DType.Size())
		}
		vals[i] = &graph.Value{Name: inputName(n, i), Type: typ}
	}
	probe := &graph.Node{Op: n.Op, Inputs: vals, Attrs: n.Attrs, Output: n.Output}
	typ, err := graph.InferNode(probe)
	if err != nil {
		return graph.Type{}, err
	}
	if err := graph.CheckType(typ); err != nil {
		return graph.Type{}, errs.Wrap(errs.Shape, err, "ref: %s: output", nodeName(n))
	}
	if n.Output != nil && n.Output.Type.DType.Valid() && !typ.Equal(n.Output.Type) {
		return graph.Type{}, errs.New(errs.Shape, "ref: %s: inputs give %s but the value is declared %s", nodeName(n), typ, n.Output.Type)
	}
	return typ, nil
}

func inputName(n *graph.Node, i int) string {
	if i < len(n.Inputs) && n.Inputs[i] != nil {
		return n.Inputs[i].Name
	}
	return fmt.Sprintf("in%d", i)
}

func nodeName(n *graph.Node) string {
	if n.Output != nil && n.Output.Name != "" {
		return "node %" + n.Output.Name + " (" + n.Op + ")"
	}
	return "node " + n.Op
}
