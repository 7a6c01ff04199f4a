package compiler

import (
	"fmt"
	"math"

	"github.com/tessera-qa/tessera-qa/engine/compiler/tile"
	"github.com/tessera-qa/tessera-qa/engine/failpoint"
	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

// Empty tensors (a dim of size 0) never reach a Tile IR kernel. A kernel with an empty output
// is not emitted at all: it has nothing to write, and a grid of 0 CTAs is what cuLaunchKernel
// refuses. A kernel with a non-empty output that reads an empty operand (a sum over an empty
// axis, a matmul with K = 0, attention over no keys) is replaced by a fill of the value the op
// gives over nothing, so no backend ever sees a zero-length buffer or a loop that runs zero
// times. Both rules are correct by construction for every backend, the CUDA one included.

// isEmpty reports whether a value holds no elements.
func isEmpty(v *graph.Value) bool { return v.Type.NumElems() == 0 }

// readsEmpty reports whether a node with a non-empty output reads an empty operand.
func readsEmpty(n *graph.Node) bool {
	if isEmpty(n.Output) {
		return false
	}
	for _, in := range n.Inputs {
		if isEmpty(in) {
			return true
		}
	}
	return false
}

// needsFill reports whether n's kernel is a fill: it reads an empty operand into a non-empty
// output. concat is not: it copies its non-empty pieces and skips the empty ones.
func needsFill(n *graph.Node) bool { return readsEmpty(n) && n.Op != "concat" }

// emptyValue is what node n gives when it reads an empty operand but its output is not empty:
// the identity of its reduction, as PyTorch answers. Ops without one are refused by the
// verifier (reduce_max over an empty axis) or cannot have a non-empty output from an empty
// input (elementwise, row-wise, movement), which is an internal error here.
func emptyValue(n *graph.Node) (float64, error) {
	switch n.Op {
	case "reduce_sum", "matmul", "batch_matmul", "scaled_matmul":
		return failpoint.Pick(failpoint.EmptyReduceGarbage, 0.0, 1.0), nil // torch: sum over nothing, K = 0
	case "attention", "attention_grad":
		// torch 1.13 has no fused attention: softmax(q k^T) v over Sk = 0 keys is a softmax of
		// an empty row (empty) times an empty v, a matmul with K = 0: zeros. attention_grad
		// with no keys (dq) or no queries (dk, dv) is likewise a sum over nothing.
		return 0, nil
	case "reduce_mean", "mse_loss":
		return math.NaN(), nil // torch: 0/0
	case "attention_lse":
		return math.Inf(-1), nil // torch.logsumexp over an empty axis
	}
	return 0, fmt.Errorf("node %%%s: %s of %v has a non-empty output %s but an empty operand, and no value over nothing", n.Output.Name, n.Op, typesOf(n.Inputs), n.Output.Type)
}

func typesOf(vs []*graph.Value) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = v.Type.String()
	}
	return out
}

// fillSchedule is the schedule of a fill kernel: one flat block per grid point, as an
// elementwise kernel.
func fillSchedule(sc Schedule, n *graph.Node) Schedule {
	return Schedule{Kernel: sc.Kernel, Key: sc.Key, Kind: "fill", BM: 1, BN: fit(n.Output.Type.NumElems(), defElemBlock), Stages: 1,
		LoopOrder: "grid(blocks)", Source: "empty-operand"}
}

// lowerFill writes the node's value over nothing into its whole output. scaled_matmul still
// applies its scales (0 * inf is NaN there as in the reference).
func (b *kbuilder) lowerFill(n *graph.Node, sc Schedule) error {
	v, err := emptyValue(n)
	if err != nil {
		return err
	}
	out := n.Output
	shape, block := out.Type.Shape, sc.BN
	pid := b.grid(ceilDiv(out.Type.NumElems(), block))[0]
	acc := accumDType(n)
	r := b.full(1, block, numerics.Round(acc, v))
	if n.Op == "scaled_matmul" {
		r = b.scaleEpilogue(r, n.Inputs[2], n.Inputs[3])
	}
	b.emit(tile.Store{Src: r, At: flatTile(b.param(out, true), tile.C(0), shape, contiguous(shape), pid, block)})
	return nil
}
