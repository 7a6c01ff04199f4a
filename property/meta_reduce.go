package property

import (
	"slices"

	"pgregory.net/rapid"

	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
)

var reduceConcat = Property{
	Name:   "meta/reduce-concat",
	Ops:    []string{"reduce_max", "reduce_sum"},
	Judged: "exact (float sums: tolerance)",
	Checks: 300,
	Doc: "reduce(concat(a, b)) = combine(reduce(a), reduce(b)) along the concat axis: exact for " +
		"reduce_max (maximum is exact and order-free) and for integer sums (wrapping is), within " +
		"tolerance for float sums (f32, f64), tested on positive data because with cancellation the " +
		"rounding of the partial sums is relative to them, not to the result",
	Body: func(e Env) func(*rapid.T) {
		return func(t *rapid.T) {
			op := rapid.SampledFrom([]string{"reduce_max", "reduce_sum"}).Draw(t, "op")
			dts := []numerics.DType{numerics.F32, numerics.F64, numerics.I32, numerics.I8}
			if op == "reduce_max" {
				// Sums of positive data in 16- and 8-bit floats round to so few distinct values
				// (bf16 steps of 2 at 300) that one side can legitimately come out constant
				// while the other varies, which harness.Check's constant-output rule reads as
				// a dead kernel. Maxima are exact in every dtype.
				dts = append(dts, numerics.F16, numerics.BF16, numerics.F8E4M3, numerics.F8E5M2)
			}
			dt := drawDType(t, dts...)
			s := drawDims(t, "dim", rapid.IntRange(1, 3).Draw(t, "rank"), e.Config.MaxElems/2)
			axis := rapid.IntRange(0, len(s)-1).Draw(t, "axis")
			sb := slices.Clone(s)
			sb[axis] = dimPool[rapid.IntRange(0, len(dimPool)-1).Draw(t, "dim_b")]
			for tensor.NumElems(sb) > e.Config.MaxElems/2 && sb[axis] > 1 {
				sb[axis] = (sb[axis] + 1) / 2
			}
			class := rapid.SampledFrom(append([]Class{ClassSpecial}, relClasses...)).Draw(t, "class")
			if op == "reduce_sum" && dt.IsFloat() {
				class = ClassPositive
			}
			keep := rapid.Bool().Draw(t, "keepdims")
			seed := rapid.Uint64().Draw(t, "seed")
			in := map[string]*tensor.Tensor{}
			b := graph.NewBuilder("reduce_concat")
			a := input(b, in, "a", Fill(dt, s, class, seed))
			bb := input(b, in, "b", Fill(dt, sb, class, seed+1))
			attrs := graph.Attrs{"axes": graph.Ints(int64(axis)), "keepdims": graph.Bool(keep)}
			lhs := b.Op(op, attrs, b.Op("concat", graph.Attrs{"axis": graph.Int(int64(axis))}, a, bb))
			combine := map[string]string{"reduce_max": "maximum", "reduce_sum": "add"}[op]
			rhs := b.Op(combine, nil, b.Op(op, attrs, a), b.Op(op, attrs, bb))
			b.Output(lhs, rhs)
			tol := exact
			if op == "reduce_sum" && dt.IsFloat() {
				tol = policy(s[axis] + sb[axis])
			}
			e.relation(t, "meta/reduce-concat", build(t, b), in, side{got: 1, want: 0, tol: tol, what: combine + " of " + op + "s vs " + op + " of the concat"})
		}
	},
}
