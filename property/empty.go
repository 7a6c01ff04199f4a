package property

import (
	"github.com/tessera-qa/tessera-qa/engine/graph"
)

// Empty tensors in random graphs (issue 21). A step whose Empty draw is EmptyDraw gives its
// fresh primary input a leading dim of 0, for the ops whose templates keep every shape rule
// satisfied with an empty operand; later steps reuse an empty value only for those ops. So
// an empty batch flows through elementwise chains, casts, sums and means, softmax and norms,
// and the agreement and determinism properties compare its outputs: an empty output by its
// exact shape (harness.ModeEmpty), and a sum or mean over the empty batch (0, NaN), whose
// reference is a constant, is left to Judgeable, which drops it as it drops every
// degenerate reference (the golden catalogue's empty cases check those values exactly).

// EmptyDraw is the largest Empty draw and the one that empties a step's input: rapid favours
// the ends of a range, so about one step in ten draws it.
const EmptyDraw = 15

// emptySafe lists the op kinds (and ops) that take an empty operand in every template
// choice: no max over an empty axis, no attention with an empty head dim, no reshape whose
// -1 is ambiguous next to a 0, no matmul template that sizes K from the dim pool.
func emptySafe(d *graph.OpDef) bool {
	if d == nil {
		return false
	}
	switch d.Kind {
	case graph.KindUnary, graph.KindBinary, graph.KindCast, graph.KindRowwise:
		return true
	case graph.KindReduce:
		return d.Name != "reduce_max"
	}
	return false
}

// takes reports whether the current step may reuse v: an empty value only for an
// empty-safe op.
func (b *builder) takes(v *graph.Value) bool {
	return v.Type.NumElems() > 0 || emptySafe(b.op)
}

// emptied returns shape with its leading dim set to 0 when the step asks for an empty input
// and op d takes one; a scalar stays a scalar.
func (b *builder) emptied(d *graph.OpDef, shape []int) []int {
	if b.s.Empty == EmptyDraw && len(shape) > 0 && emptySafe(d) {
		shape[0] = 0
	}
	return shape
}
