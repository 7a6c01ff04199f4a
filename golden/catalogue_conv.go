package golden

import (
	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

// Issue 26's convolutions: ragged shapes, each attribute alone, groups (depthwise too),
// dilation, padding > 0, bias, and a kernel large enough for the conv-fft rewrite.
func init() { register(convFamily, "conv1d", "conv2d") }

func convFamily(op string, dt numerics.DType) []Spec {
	mk := func(tag string, bias bool, attrs graph.Attrs, x, w []int) draft {
		k := 1
		for _, d := range w[1:] {
			k *= d
		}
		names := []any{"x", distHalf, "w", distHalf}
		if bias {
			names = append(names, "b", distHalf)
		}
		return draft{tag: tag, dists: dists(names...), tol: tolReduce(k), build: func(b *graph.Builder) *graph.Value {
			in := []*graph.Value{b.Input("x", dt, x...), b.Input("w", dt, w...)}
			if bias {
				in = append(in, b.Input("b", dt, w[0]))
			}
			return b.Op(op, attrs, in...)
		}}
	}
	i := graph.Ints
	if op == "conv1d" {
		return finish(op, dt,
			mk("2x3x17-k4", false, nil, []int{2, 3, 17}, []int{5, 3, 4}),
			mk("stride3", true, graph.Attrs{"stride": i(3)}, []int{1, 2, 23}, []int{3, 2, 5}),
			mk("pad2", true, graph.Attrs{"padding": i(2)}, []int{2, 2, 9}, []int{4, 2, 3}),
			mk("dil2", false, graph.Attrs{"dilation": i(2)}, []int{1, 3, 20}, []int{2, 3, 4}),
			mk("groups2", true, graph.Attrs{"groups": graph.Int(2), "padding": i(1)}, []int{1, 4, 13}, []int{6, 2, 3}),
			mk("depthwise", false, graph.Attrs{"groups": graph.Int(3)}, []int{2, 3, 8}, []int{3, 1, 3}),
			mk("k63-pad31", false, graph.Attrs{"padding": i(31)}, []int{1, 2, 200}, []int{2, 2, 63}),
		)
	}
	return finish(op, dt,
		mk("2x3x9x7-k3x2", true, nil, []int{2, 3, 9, 7}, []int{4, 3, 3, 2}),
		mk("stride2x1-pad1x0-dil1x2", false, graph.Attrs{"stride": i(2, 1), "padding": i(1, 0), "dilation": i(1, 2)}, []int{1, 2, 11, 10}, []int{3, 2, 3, 3}),
		mk("groups2-pad1", true, graph.Attrs{"groups": graph.Int(2), "padding": i(1)}, []int{1, 4, 6, 5}, []int{4, 2, 3, 3}),
		mk("k15-pad7", false, graph.Attrs{"padding": i(7)}, []int{1, 1, 40, 36}, []int{2, 1, 15, 15}),
	)
}
