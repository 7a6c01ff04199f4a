package golden

import (
	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/harness"
)

// Issue 21's cases, in a block of their own: each family below is the op's earlier family
// (same specs, names and seeds, so their files and pins stay) followed by the new cases:
// div's rounding modes (negative operands, exact-integer quotients, zero divisors), reductions over axes=[] with and without keepdims and over a scalar's dim 0 / -1,
// softmax and log_softmax of a scalar, mse_loss's sum and none reductions.
func init() {
	register(divFamily, "div")
	register(reduceFamily21, "reduce_sum", "reduce_max", "reduce_mean")
	register(softmaxFamily21, "softmax", "log_softmax")
	register(lossFamily21, "mse_loss")
}

// Integer-valued operands: quotients land on integers (ties of floor and trunc), both signs,
// and the divisor range holds 0 (±Inf and NaN for floats, the engine's 0 for ints).
var (
	distDividend = harness.Dist{Kind: harness.DistInt, Lo: -30, Hi: 30}
	distDivisor  = harness.Dist{Kind: harness.DistInt, Lo: -6, Hi: 6}
)

func divFamily(op string, dt numerics.DType) []Spec {
	var specs []Spec
	if dt.IsFloat() {
		specs = binaryFamily(op, dt) // true division: integers have none
	}
	for _, mode := range graph.DivRoundingModes {
		attrs := graph.Attrs{"rounding_mode": graph.String(mode)}
		mk := func(tag string, a, b harness.Dist, sa, sb []int) draft {
			return draft{tag: mode + "-" + tag, dists: dists("a", a, "b", b), tol: tolDefault, build: func(bl *graph.Builder) *graph.Value {
				return bl.Op(op, attrs, bl.Input("a", dt, sa...), bl.Input("b", dt, sb...))
			}}
		}
		ds := []draft{
			mk("ints-7x13", distDividend, distDivisor, []int{7, 13}, []int{7, 13}),
			mk("ints-5x1-bcast3x1x11", distDividend, distDivisor, []int{5, 1}, []int{3, 1, 11}),
		}
		if dt.IsFloat() {
			ds = append(ds, mk("1031", distNormal, distAwayZero, []int{1031}, []int{1031}))
		}
		specs = append(specs, finish(op, dt, ds...)...)
	}
	return specs
}

func reduceFamily21(op string, dt numerics.DType) []Spec {
	d := distNormal
	switch {
	case dt.IsInt():
		d = harness.Dist{Kind: harness.DistInt, Lo: -50, Hi: 50}
	case op == "reduce_mean":
		d = distMean
	}
	rule := func(k int) tolRule {
		if op == "reduce_max" {
			return tolDefault
		}
		return tolReduce(k)
	}
	mk := func(tag string, k int, shape []int, attrs graph.Attrs) draft {
		return draft{tag: tag, dists: dists("x", d), tol: rule(k), build: func(b *graph.Builder) *graph.Value {
			return b.Op(op, attrs, b.Input("x", dt, shape...))
		}}
	}
	return append(reduceFamily(op, dt), finish(op, dt,
		mk("5x7x3-axes[]", 105, []int{5, 7, 3}, graph.Attrs{"axes": graph.Ints()}),
		mk("5x7x3-axes[]-keep", 105, []int{5, 7, 3}, graph.Attrs{"axes": graph.Ints(), "keepdims": graph.Bool(true)}),
		mk("scalar-axis0", 1, []int{}, graph.Attrs{"axes": graph.Ints(0)}),
		mk("scalar-axis-1-keep", 1, []int{}, graph.Attrs{"axes": graph.Ints(-1), "keepdims": graph.Bool(true)}))...)
}

func softmaxFamily21(op string, dt numerics.DType) []Spec {
	mk := func(tag string, axis int64) draft {
		return draft{tag: tag, dists: dists("x", distLogits), tol: tolDefault, build: func(b *graph.Builder) *graph.Value {
			return b.Op(op, graph.Attrs{"axis": graph.Int(axis)}, b.Input("x", dt))
		}}
	}
	if op == "log_softmax" {
		// log_softmax of one element is exactly 0, which no golden check can tell from a
		// zeroed output: the unit tests (engine/backend/cpu) hold it.
		return softmaxFamily(op, dt)
	}
	return append(softmaxFamily(op, dt), finish(op, dt, mk("scalar-axis0", 0), mk("scalar-axis-1", -1))...)
}

func lossFamily21(op string, dt numerics.DType) []Spec {
	mk := func(tag, reduction string, shape ...int) draft {
		tol := tolReduce(graph.Type{Shape: shape}.NumElems())
		if reduction == "none" {
			tol = tolDefault
		}
		return draft{tag: tag, dists: dists("a", distNormal, "b", distNormal), tol: tol,
			build: func(b *graph.Builder) *graph.Value {
				return b.Op(op, graph.Attrs{"reduction": graph.String(reduction)}, b.Input("a", dt, shape...), b.Input("b", dt, shape...))
			}}
	}
	return append(lossFamily(op, dt), finish(op, dt,
		mk("7x13-sum", "sum", 7, 13), mk("3x1031-sum", "sum", 3, 1031), mk("7x13-none", "none", 7, 13))...)
}
