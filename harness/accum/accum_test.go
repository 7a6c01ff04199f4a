package accum_test

import (
	"math"
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
	"github.com/tessera-qa/tessera-qa/harness"
	"github.com/tessera-qa/tessera-qa/harness/accum"
)

// TestCoef: the chunk term counts 32-product blocks of the first chunk (the whole chunk of
// 128 gives 4 blocks x 2 truncations), the f32 term counts chunks plus the two scalings.
func TestCoef(t *testing.T) {
	u := math.Ldexp(1, -13)
	for _, c := range []struct {
		k    int
		want float64
	}{
		{0, 0},
		{16, 2*u + 3*0x1p-24},
		{64, 4*u + 3*0x1p-24},
		{128, 8*u + 3*0x1p-24},
		{400, 8*u + 6*0x1p-24},
		{8192, 8*u + 66*0x1p-24},
	} {
		if got := accum.HopperFP8.Coef(c.k); got != c.want {
			t.Errorf("Coef(%d) = %g, want %g", c.k, got, c.want)
		}
	}
	whole := accum.Model{Bits: 10, BlockK: 1, Truncations: 1} // no promotion: every add in the narrow accumulator
	if got, want := whole.Coef(1000), 1000*math.Ldexp(1, -10)+3*0x1p-24; got != want {
		t.Errorf("unpromoted Coef(1000) = %g, want %g", got, want)
	}
}

func scaledGraph(t *testing.T, m, n, k int) (*graph.Graph, map[string]*tensor.Tensor) {
	t.Helper()
	b := graph.NewBuilder("sm")
	e4 := numerics.F8E4M3
	b.Output(b.Op("scaled_matmul", graph.Attrs{"out_dtype": graph.DTypeAttr(numerics.BF16)},
		b.Input("a", e4, m, k), b.Input("b", e4, n, k), b.Input("scale_a", numerics.F32), b.Input("scale_b", numerics.F32, 1)))
	g, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	in, err := harness.RandomInputs(g, 3, map[string]harness.Dist{"a": {Kind: harness.DistNormal}, "b": {Kind: harness.DistNormal},
		"scale_a": {Kind: harness.DistPositive, Lo: 0.25, Hi: 1}, "scale_b": {Kind: harness.DistPositive, Lo: 0.25, Hi: 1}})
	if err != nil {
		t.Fatal(err)
	}
	return g, in
}

// TestScaledMatmulBound: element (i, j) is Coef(K)*|sa*sb|*sum_k |a_ik||b_jk| (b is [N,K]);
// the row-norm form is never below it; NaN inputs give 0; only a lone scaled_matmul has one.
func TestScaledMatmulBound(t *testing.T) {
	const m, n, k = 3, 5, 200
	g, in := scaledGraph(t, m, n, k)
	in["a"].SetBits(k+7, 0x7F) // NaN in row 1
	bound, ok, err := accum.ForGraph(accum.HopperFP8, g, in)
	if err != nil || !ok {
		t.Fatalf("ok %v, err %v", ok, err)
	}
	norms, err := accum.ScaledMatmulNorms(accum.HopperFP8, in["a"], in["b"], in["scale_a"], in["scale_b"])
	if err != nil {
		t.Fatal(err)
	}
	s := in["scale_a"].Float64(0) * in["scale_b"].Float64(0)
	for i := range m {
		for j := range n {
			var sum float64
			for kk := range k {
				sum += math.Abs(in["a"].Float64(i*k+kk)) * math.Abs(in["b"].Float64(j*k+kk))
			}
			want := accum.HopperFP8.Coef(k) * s * sum
			if i == 1 {
				want = 0
			}
			if got := bound[i*n+j]; math.Abs(got-want) > 1e-12*want {
				t.Errorf("bound[%d,%d] = %g, want %g", i, j, got, want)
			}
			if i != 1 && norms[i*n+j] < bound[i*n+j] {
				t.Errorf("row-norm bound[%d,%d] = %g below the exact-sum bound %g", i, j, norms[i*n+j], bound[i*n+j])
			}
		}
	}
	b := graph.NewBuilder("mm")
	b.Output(b.Op("matmul", nil, b.Input("x", numerics.F32, 2, 3), b.Input("y", numerics.F32, 3, 2)))
	mm, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, err := accum.ForGraph(accum.HopperFP8, mm, nil); ok || err != nil {
		t.Errorf("matmul graph: ok %v, err %v (want no bound)", ok, err)
	}
	delete(in, "b")
	if _, _, err := accum.ForGraph(accum.HopperFP8, g, in); err == nil {
		t.Error("missing input b: no error")
	}
}

func TestForBackend(t *testing.T) {
	if m, ok := accum.ForBackend("cuda"); !ok || m != accum.HopperFP8 {
		t.Errorf("cuda: %+v %v", m, ok)
	}
	if _, ok := accum.ForBackend("cpu"); ok {
		t.Error("cpu has an accumulator bound; its checks must stay strict")
	}
}
