package bench

import (
	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
	"github.com/tessera-qa/tessera-qa/harness"
)

// fp8GemmCase is the graph and the seeded inputs of one shape of TestGPUFP8GemmMatchesReference:
// scaled_matmul of e4m3 a [M,K] and b [N,K] (normal with mean 0 and deviation 4) with
// per-tensor scales in [0.25,1), seed 7, and e4m3's special values planted: NaN (0x7F) at
// a[0,0] (row 0 of the output NaN), a[1..3,1] = 448, -448, 2^-9 and b[0..2, 2..4] = -224,
// 224, -2^-10.
// TestH100ErrorsFitTheBudget rebuilds the GPU's inputs with it.
func fp8GemmCase(m, n, k int, out numerics.DType) (*graph.Graph, map[string]*tensor.Tensor, error) {
	b := graph.NewBuilder("fp8")
	e4 := numerics.F8E4M3
	b.Output(b.Op("scaled_matmul", graph.Attrs{"out_dtype": graph.DTypeAttr(out)},
		b.Input("a", e4, m, k), b.Input("b", e4, n, k), b.Input("scale_a", numerics.F32), b.Input("scale_b", numerics.F32, 1)))
	g, err := b.Build()
	if err != nil {
		return nil, nil, err
	}
	in, err := harness.RandomInputs(g, 7, map[string]harness.Dist{
		"a": {Kind: harness.DistNormal, Lo: -4, Hi: 4}, "b": {Kind: harness.DistNormal, Lo: -4, Hi: 4},
		"scale_a": distScale, "scale_b": distScale})
	if err != nil {
		return nil, nil, err
	}
	a, bb := in["a"], in["b"]
	a.SetBits(0, 0x7F)
	for i, v := range []float64{448, -448, 0x1p-9} {
		a.SetFloat64(k+1+i*k, v)     // rows 1..3
		bb.SetFloat64(2+i*k+i, -v/2) // rows 0..2 of b
	}
	return g, in, nil
}
