package property

import (
	"fmt"

	"pgregory.net/rapid"

	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
)

var transposeProduct = Property{
	Name:   "meta/transpose-product",
	Ops:    []string{"matmul", "batch_matmul"},
	Judged: "tolerance (ints: exact)",
	Checks: 300,
	Doc: "(AB)^T = B^T A^T: transpose(matmul(A, B)) against matmul(B, A) with both transpose flags " +
		"flipped (and independent tile hints), for matmul and batch_matmul",
	Body: func(e Env) func(*rapid.T) {
		return func(t *rapid.T) {
			op := rapid.SampledFrom([]string{"matmul", "batch_matmul"}).Draw(t, "op")
			dt := drawDType(t, numerics.F32, numerics.F64, numerics.F16, numerics.BF16,
				numerics.I32, numerics.I8, numerics.F8E4M3, numerics.F8E5M2)
			mnk := drawDims(t, "dim", 3, e.Config.MaxElems)
			m, n, k := mnk[0], mnk[1], mnk[2]
			for m*n*k > e.Config.MaxWork {
				m, n, k = (m+1)/2, (n+1)/2, (k+1)/2
			}
			ta, tb := rapid.Bool().Draw(t, "transpose_a"), rapid.Bool().Draw(t, "transpose_b")
			class := rapid.SampledFrom(relClasses).Draw(t, "class")
			seed := rapid.Uint64().Draw(t, "seed")
			lead := []int{}
			if op == "batch_matmul" {
				lead = []int{rapid.IntRange(1, 3).Draw(t, "batch")}
			}
			shape := func(r, c int, tr bool) []int {
				if tr {
					r, c = c, r
				}
				return append(append([]int{}, lead...), r, c)
			}
			in := map[string]*tensor.Tensor{}
			b := graph.NewBuilder("transpose_product")
			a := input(b, in, "a", Fill(dt, shape(m, k, ta), class, seed))
			bb := input(b, in, "b", Fill(dt, shape(k, n, tb), class, seed+1))
			lhsAttrs := graph.Attrs{"transpose_a": graph.Bool(ta), "transpose_b": graph.Bool(tb)}
			rhsAttrs := graph.Attrs{"transpose_a": graph.Bool(!tb), "transpose_b": graph.Bool(!ta)}
			for _, attrs := range []graph.Attrs{lhsAttrs, rhsAttrs} {
				if rapid.Bool().Draw(t, "tile_hint") {
					attrs["tile"] = graph.Ints(tileSizes[rapid.IntRange(0, 6).Draw(t, "tile")],
						tileSizes[rapid.IntRange(0, 6).Draw(t, "tile")], tileSizes[rapid.IntRange(0, 6).Draw(t, "tile")])
				}
			}
			perm := []int64{1, 0}
			if len(lead) > 0 {
				perm = []int64{0, 2, 1}
			}
			lhs := b.Op("transpose", graph.Attrs{"perm": graph.Ints(perm...)}, b.Op(op, lhsAttrs, a, bb))
			rhs := b.Op(op, rhsAttrs, bb, a)
			b.Output(lhs, rhs)
			tol := policy(k)
			if !dt.IsFloat() {
				tol = exact // wrapping integer sums are exact in any order
			}
			e.relation(t, "meta/transpose-product", build(t, b), in, side{got: 1, want: 0, tol: tol, what: "B^T A^T vs (AB)^T"})
		}
	},
}

var attentionPermutation = Property{
	Name:   "meta/attention-batch-permutation",
	Ops:    []string{"attention"},
	Judged: "bitwise",
	Checks: 200,
	Doc: "attention(Pq, Pk, Pv) = P attention(q, k, v) for a permutation P of the batch: each batch " +
		"element runs the same tile program on its own data, so the bits must not move",
	Body: func(e Env) func(*rapid.T) {
		return func(t *rapid.T) {
			dt := drawDType(t, numerics.F32, numerics.F64, numerics.F16, numerics.BF16, numerics.F8E4M3, numerics.F8E5M2)
			nb := rapid.IntRange(2, 5).Draw(t, "batch")
			idx := make([]int, nb)
			for i := range idx {
				idx[i] = i
			}
			perm := rapid.Permutation(idx).Draw(t, "perm")
			d := drawDims(t, "dim", 4, e.Config.MaxElems/nb)
			sq, sk, dd, dv := d[0], d[1], d[2], d[3]
			for nb*sq*sk*(dd+dv) > e.Config.MaxWork {
				sq, sk = (sq+1)/2, (sk+1)/2
			}
			class := rapid.SampledFrom([]Class{ClassNormal, ClassUniform, ClassLogits, ClassTiny, ClassHuge, ClassSpecial}).Draw(t, "class")
			seed := rapid.Uint64().Draw(t, "seed")
			attrs := graph.Attrs{}
			if rapid.Bool().Draw(t, "causal") {
				attrs["causal"] = graph.Bool(true)
			}
			if rapid.Bool().Draw(t, "scale") {
				attrs["scale"] = graph.Float(0.5)
			}
			in := map[string]*tensor.Tensor{}
			b := graph.NewBuilder("attention_permutation")
			q := input(b, in, "q", Fill(dt, []int{nb, sq, dd}, class, seed))
			k := input(b, in, "k", Fill(dt, []int{nb, sk, dd}, class, seed+1))
			v := input(b, in, "v", Fill(dt, []int{nb, sk, dv}, class, seed+2))
			lhs := b.Op("attention", attrs, q, k, v)
			inv := make([]int, nb)
			for i, p := range perm {
				inv[p] = i
			}
			out := b.Op("attention", attrs, permuteBatch(b, q, perm), permuteBatch(b, k, perm), permuteBatch(b, v, perm))
			b.Output(lhs, permuteBatch(b, out, inv))
			e.relation(t, "meta/attention-batch-permutation", build(t, b), in,
				side{got: 1, want: 0, tol: bitwise, what: fmt.Sprintf("P^-1 attention(P·) vs attention() with P=%v", perm)})
		}
	},
}

// permuteBatch returns concat(x[perm[0]], x[perm[1]], ...) along axis 0.
func permuteBatch(b *graph.Builder, x *graph.Value, perm []int) *graph.Value {
	s := x.Type.Shape
	parts := make([]*graph.Value, len(perm))
	for i, p := range perm {
		st, en := make([]int64, len(s)), make([]int64, len(s))
		for j, d := range s {
			en[j] = int64(d)
		}
		st[0], en[0] = int64(p), int64(p+1)
		parts[i] = b.Op("slice", graph.Attrs{"starts": graph.Ints(st...), "ends": graph.Ints(en...)}, x)
	}
	return b.Op("concat", graph.Attrs{"axis": graph.Int(0)}, parts...)
}
