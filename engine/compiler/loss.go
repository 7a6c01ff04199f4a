package compiler

import (
	"fmt"

	"github.com/tessera-qa/tessera-qa/engine/graph"
)

// splitLossMin is the size from which mse_loss is split: below it the fused one-kernel loss
// (one grid point, a sequential sweep) is cheapest and keeps its bits.
const splitLossMin = 1 << 16

// splitLoss rewrites a large mse_loss(a, b) of rank >= 2 into row sums and their sum:
//
//	d = cast(a, acc) - cast(b, acc); r = reduce_sum(d*d, last axis); out = cast(reduce_sum(r) / N)
//
// The fused loss is one grid point that sweeps every element in order: on the H100 it took
// 101 ms for 16.8M elements, half of a training step. Row sums run one grid point per row
// block. Every value stays in the accumulator dtype until the final rounding, as the fused
// loss keeps it; the order of the additions changes (by rows, then across rows), so the bits
// of a split loss differ from an unsplit one (and are again the same run after run).
func splitLoss(s *state) error {
	var out []*graph.Node
	fresh := freshNames(s.g)
	for _, n := range s.g.Nodes {
		a := n.Inputs
		if n.Op != "mse_loss" || a[0].Type.Rank() < 2 || a[0].Type.NumElems() < splitLossMin || n.StringAttr("reduction") == "none" {
			out = append(out, n)
			continue
		}
		acc := accumDType(n)
		var err error
		add := inserter(&out, fresh, n, &err)
		wide := func(v *graph.Value) *graph.Value {
			if v.Type.DType == acc {
				return v
			}
			return add("cast", graph.Attrs{"to": graph.DTypeAttr(acc)}, v)
		}
		d := add("sub", nil, wide(a[0]), wide(a[1]))
		rows := add("reduce_sum", graph.Attrs{"axes": graph.Ints(-1)}, add("mul", nil, d, d))
		total := add("reduce_sum", nil, rows)
		mean := total // reduction "sum"
		if n.StringAttr("reduction") == "mean" {
			mean = add("div", nil, total, add("full_like", graph.Attrs{"value": graph.Float(float64(a[0].Type.NumElems()))}, total))
		}
		if err != nil {
			return fmt.Errorf("node %%%s: splitting mse_loss: %w", n.Output.Name, err)
		}
		// The last node produces the loss's own value, so readers and outputs keep it.
		last := &graph.Node{Op: "cast", Inputs: []*graph.Value{mean}, Attrs: graph.Attrs{"to": graph.DTypeAttr(n.Output.Type.DType)}, Output: n.Output}
		out = append(out, last)
	}
	s.g.Nodes = out
	return nil
}
