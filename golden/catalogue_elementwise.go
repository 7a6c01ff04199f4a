package golden

import (
	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/harness"
)

// Elementwise shapes: one element, a 2-D shape of primes inside one 1024-element block, and a
// prime length just past one block, so the second block is ragged (1031 = 1024 + 7).
func init() {
	register(unaryFamily, "neg", "abs", "relu", "exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "silu", "gelu")
	register(binaryFamily, "add", "sub", "mul", "maximum", "minimum") // div: catalogue_ops21.go
	register(castFamily, "cast")
}

// unaryDist is the input distribution of a unary op on more than one element.
func unaryDist(op string, dt numerics.DType) harness.Dist {
	switch {
	case dt.IsInt():
		return harness.DefaultDist(dt)
	case op == "log" || op == "sqrt" || op == "rsqrt":
		return distPositive
	case op == "exp":
		return distExp
	}
	return distNormal
}

func unaryFamily(op string, dt numerics.DType) []Spec {
	var attrs graph.Attrs
	one := distAwayZero
	if dt.IsInt() {
		one = harness.Dist{Kind: harness.DistInt, Lo: 1, Hi: 100}
	}
	mk := func(tag string, d harness.Dist, shape ...int) draft {
		return draft{tag: tag, dists: dists("x", d), tol: tolDefault, build: func(b *graph.Builder) *graph.Value {
			return b.Op(op, attrs, b.Input("x", dt, shape...))
		}}
	}
	specs := finish(op, dt,
		mk("1", one, 1),
		mk("7x13", unaryDist(op, dt), 7, 13),
		mk("1031", unaryDist(op, dt), 1031))
	if op == "gelu" {
		// The tanh approximation is a different formula: give it its own case.
		attrs = graph.Attrs{"approx": graph.String("tanh")}
		specs = append(specs, finish(op, dt, mk("7x13-tanh", distNormal, 7, 13))...)
	}
	return specs
}

func binaryFamily(op string, dt numerics.DType) []Spec {
	da, db := distNormal, distNormal
	oneA, oneB := distAwayZero, distNegAway
	switch {
	case dt.IsInt():
		da, db = harness.Dist{Kind: harness.DistInt, Lo: -100, Hi: 100}, harness.Dist{Kind: harness.DistInt, Lo: -100, Hi: 100}
		oneA, oneB = harness.Dist{Kind: harness.DistInt, Lo: 1, Hi: 50}, harness.Dist{Kind: harness.DistInt, Lo: -50, Hi: -1}
	case op == "div":
		// A divisor away from zero keeps quotients inside every float format.
		db = distAwayZero
	}
	if op == "add" && !dt.IsInt() {
		// a + b of opposite-signed values near each other would cancel towards zero; the
		// one-element case adds same-signed values instead.
		oneB = distAwayZero
	}
	mk := func(tag string, a, b harness.Dist, sa, sb []int) draft {
		return draft{tag: tag, dists: dists("a", a, "b", b), tol: tolDefault, build: func(bl *graph.Builder) *graph.Value {
			return bl.Op(op, nil, bl.Input("a", dt, sa...), bl.Input("b", dt, sb...))
		}}
	}
	return finish(op, dt,
		mk("1", oneA, oneB, []int{1}, []int{1}),
		mk("5x1-bcast3x1x11", da, db, []int{5, 1}, []int{3, 1, 11}),
		mk("1031", da, db, []int{1031}, []int{1031}))
}

// castTargets lists, per source dtype, conversions that exercise rounding, saturation or
// wrapping, each with an input distribution that reaches the interesting range.
var castTargets = map[numerics.DType][]struct {
	to   numerics.DType
	dist harness.Dist
}{
	numerics.F64:    {{numerics.F32, distNormal}, {numerics.I32, harness.Dist{Kind: harness.DistUniform, Lo: -3e9, Hi: 3e9}}},
	numerics.F32:    {{numerics.BF16, distNormal}, {numerics.I8, harness.Dist{Kind: harness.DistUniform, Lo: -200, Hi: 200}}},
	numerics.F16:    {{numerics.F8E4M3, harness.Dist{Kind: harness.DistUniform, Lo: -600, Hi: 600}}, {numerics.F32, distNormal}},
	numerics.BF16:   {{numerics.F16, harness.Dist{Kind: harness.DistNormal, Lo: -1e5, Hi: 1e5}}, {numerics.Bool, harness.Dist{Kind: harness.DistInt, Lo: -2, Hi: 2}}},
	numerics.F8E4M3: {{numerics.F8E5M2, distNormal}, {numerics.F32, distNormal}},
	numerics.F8E5M2: {{numerics.F8E4M3, harness.Dist{Kind: harness.DistUniform, Lo: -1000, Hi: 1000}}, {numerics.BF16, distNormal}},
	numerics.I8:     {{numerics.F8E4M3, harness.Dist{Kind: harness.DistInt, Lo: -128, Hi: 127}}, {numerics.I32, harness.Dist{Kind: harness.DistInt, Lo: -128, Hi: 127}}},
	numerics.I32:    {{numerics.I8, harness.Dist{Kind: harness.DistInt, Lo: -100000, Hi: 100000}}, {numerics.F16, harness.Dist{Kind: harness.DistInt, Lo: -100000, Hi: 100000}}},
	numerics.Bool:   {{numerics.F32, harness.Dist{Kind: harness.DistInt}}, {numerics.I32, harness.Dist{Kind: harness.DistInt}}},
}

func castFamily(op string, dt numerics.DType) []Spec {
	var ds []draft
	for _, t := range castTargets[dt] {
		for _, shape := range [][]int{{7, 13}, {1031}} {
			tag := "to-" + t.to.String() + "-" + shapeTag(shape)
			ds = append(ds, draft{tag: tag, dists: dists("x", t.dist), tol: tolDefault, build: func(b *graph.Builder) *graph.Value {
				return b.Op(op, graph.Attrs{"to": graph.DTypeAttr(t.to)}, b.Input("x", dt, shape...))
			}})
		}
	}
	return finish(op, dt, ds...)
}
