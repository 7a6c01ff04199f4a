package compiler

import (
	"fmt"

	"github.com/tessera-qa/tessera-qa/engine/graph"
)

// desugar rewrites the forms of ops that the kernels do not lower themselves into ops they do,
// before any other pass sees the graph (so the shard pass and the fusions need no rule of
// their own for them). It is required: skipping it would leave nodes no lowering handles.
//
//   - mse_loss{reduction="none"}: (a-b)^2 per element, in the accumulator dtype, rounded once:
//     cast, sub, mul, cast, which the elementwise fusion makes one kernel.
//   - the 2-D FFTs and the complex helpers (lower_spectral.go);
//   - a conv's padding, as explicit zero blocks (lower_conv.go).
func desugar(s *state) error {
	var out []*graph.Node
	fresh := freshNames(s.g)
	for _, n := range s.g.Nodes {
		var err error
		add := inserter(&out, fresh, n, &err)
		// last gives the rewrite's final node the original output value, so readers keep it.
		last := func(op string, attrs graph.Attrs, ins ...*graph.Value) {
			out = append(out, &graph.Node{Op: op, Inputs: ins, Attrs: attrs, Output: n.Output})
		}
		switch {
		case n.Op == "mse_loss" && n.StringAttr("reduction") == "none":
			acc := accumDType(n)
			wide := func(v *graph.Value) *graph.Value {
				if v.Type.DType == acc {
					return v
				}
				return add("cast", graph.Attrs{"to": graph.DTypeAttr(acc)}, v)
			}
			d := add("sub", nil, wide(n.Inputs[0]), wide(n.Inputs[1]))
			if acc == n.Output.Type.DType {
				last("mul", nil, d, d)
			} else {
				last("cast", graph.Attrs{"to": graph.DTypeAttr(n.Output.Type.DType)}, add("mul", nil, d, d))
			}
		case desugarSpectral(n, add, last):
		case desugarConv(n, add, last):
		default:
			out = append(out, n)
		}
		if err != nil {
			return fmt.Errorf("node %%%s: desugaring %s: %w", n.Output.Name, n.Op, err)
		}
	}
	s.g.Nodes = out
	return nil
}
