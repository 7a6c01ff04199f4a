package golden

import (
	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/harness"
)

// Reductions, row-wise ops and the loss. Default tiles are 16x256 (reduce), 8x256 (row-wise)
// and 1024 (loss); the shapes give a long ragged row (1031 = 4*256 + 7), more rows than one
// tile holds (19 > 16, 11 > 8), reductions over non-adjacent axes and along a non-last axis.
func init() {
	// reduce_*, softmax, log_softmax: catalogue_ops21.go (these families plus issue 21's cases)
	register(normFamily, "layernorm", "rmsnorm")
}

func reduceFamily(op string, dt numerics.DType) []Spec {
	d, one := distNormal, distAwayZero
	switch {
	case dt.IsInt() && op == "reduce_max":
		// The max of many small ints is the top of the range in every row (a constant
		// reference). For int8, draws from [-10000, 127] saturate to -128 except about one in
		// 40, so a row holds a few dozen values spread over the range and its max varies; for
		// int32 a wide range does the same.
		d = harness.Dist{Kind: harness.DistInt, Lo: -10000, Hi: 127}
		if dt == numerics.I32 {
			d = harness.Dist{Kind: harness.DistInt, Lo: -1e6, Hi: 1e6}
		}
		one = harness.Dist{Kind: harness.DistInt, Lo: 1, Hi: 50}
	case dt.IsInt():
		d, one = harness.DefaultDist(dt), harness.Dist{Kind: harness.DistInt, Lo: 1, Hi: 50}
	case op == "reduce_mean":
		// Zero-mean data would average to values near zero, where a count error is invisible.
		d = distMean
	}
	rule := func(k int) tolRule {
		if op == "reduce_max" {
			return tolDefault // the result is one of the inputs: nothing accumulates
		}
		return tolReduce(k)
	}
	mk := func(tag string, dist harness.Dist, k int, shape []int, attrs graph.Attrs) draft {
		return draft{tag: tag, dists: dists("x", dist), tol: rule(k), build: func(b *graph.Builder) *graph.Value {
			return b.Op(op, attrs, b.Input("x", dt, shape...))
		}}
	}
	return finish(op, dt,
		mk("1-all", one, 1, []int{1}, nil),
		mk("3x1031-axis1", d, 1031, []int{3, 1031}, graph.Attrs{"axes": graph.Ints(1)}),
		mk("13x19x7-axes0+2-keep", d, 13*7, []int{13, 19, 7}, graph.Attrs{"axes": graph.Ints(0, -1), "keepdims": graph.Bool(true)}))
}

func softmaxFamily(op string, dt numerics.DType) []Spec {
	rule := tolProb
	if op == "log_softmax" {
		rule = tolReduce // log-probabilities are O(log k): no tiny values to protect
	}
	mk := func(tag string, k int, shape []int, axis int64) draft {
		return draft{tag: tag, dists: dists("x", distLogits), tol: rule(k), build: func(b *graph.Builder) *graph.Value {
			return b.Op(op, graph.Attrs{"axis": graph.Int(axis)}, b.Input("x", dt, shape...))
		}}
	}
	return finish(op, dt,
		mk("1x7", 7, []int{1, 7}, -1),
		mk("13x11-axis0", 13, []int{13, 11}, 0),
		mk("3x1031", 1031, []int{3, 1031}, -1))
}

func normFamily(op string, dt numerics.DType) []Spec {
	mk := func(rows, cols int) draft {
		ds := dists("x", distNormal, "gamma", distGamma)
		if op == "layernorm" {
			ds["beta"] = distBeta
		}
		return draft{tag: shapeTag([]int{rows, cols}), dists: ds,
			tol: tolReduce(cols), build: func(b *graph.Builder) *graph.Value {
				x := b.Input("x", dt, rows, cols)
				g := b.Input("gamma", dt, cols)
				if op == "rmsnorm" {
					return b.Op(op, nil, x, g)
				}
				return b.Op(op, nil, x, g, b.Input("beta", dt, cols))
			}}
	}
	return finish(op, dt, mk(1, 7), mk(11, 13), mk(3, 1031))
}

func lossFamily(op string, dt numerics.DType) []Spec {
	mk := func(tag string, da, db harness.Dist, shape ...int) draft {
		return draft{tag: tag, dists: dists("a", da, "b", db), tol: tolReduce(graph.Type{Shape: shape}.NumElems()),
			build: func(b *graph.Builder) *graph.Value {
				return b.Op(op, nil, b.Input("a", dt, shape...), b.Input("b", dt, shape...))
			}}
	}
	return finish(op, dt,
		mk("1", distAwayZero, distNegAway, 1),
		mk("7x13", distNormal, distNormal, 7, 13),
		mk("3x1031", distNormal, distNormal, 3, 1031))
}
