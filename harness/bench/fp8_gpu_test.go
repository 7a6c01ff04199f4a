package bench

import (
	"fmt"
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/backend"
	"github.com/tessera-qa/tessera-qa/engine/compiler"
	"github.com/tessera-qa/tessera-qa/engine/compiler/ptx"
	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/engine/ref"
	"github.com/tessera-qa/tessera-qa/harness"
)

// TestGPUFP8GemmMatchesReference runs scaled_matmul on the CUDA backend through the fp8 wgmma
// kernel, on ragged shapes and every output dtype, against engine/ref (f32 accumulation's
// reduction tolerance), twice with the same bits, with e4m3's special values planted in the
// inputs: NaN (0x7F) at a[0,0] (row 0 of the output NaN), +-448, the smallest subnormal.
// Without a GPU it skips.
func TestGPUFP8GemmMatchesReference(t *testing.T) {
	gpu, err := backend.Get("cuda")
	if err == nil {
		err = gpu.Available()
	}
	if err != nil {
		t.Skip("cuda unavailable: " + err.Error())
	}
	target := ptx.H100
	target.ArchSuffix = "a"
	for _, c := range []struct {
		m, n, k int
		out     numerics.DType
	}{
		{200, 136, 272, numerics.BF16},
		{130, 72, 400, numerics.F16},
		{1000, 1000, 1024, numerics.F32},
		{2048, 2048, 2048, numerics.BF16},
	} {
		name := fmt.Sprintf("%dx%dx%d-%s", c.m, c.n, c.k, c.out)
		b := graph.NewBuilder("fp8")
		e4 := numerics.F8E4M3
		b.Output(b.Op("scaled_matmul", graph.Attrs{"out_dtype": graph.DTypeAttr(c.out)},
			b.Input("a", e4, c.m, c.k), b.Input("b", e4, c.n, c.k), b.Input("scale_a", numerics.F32), b.Input("scale_b", numerics.F32, 1)))
		g, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		p, err := compiler.Compile(g, compiler.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if path := programPath(p, target); path != "wgmma" {
			t.Errorf("%s: path %s, want the fp8 wgmma kernel", name, path)
		}
		in, err := harness.RandomInputs(g, 7, map[string]harness.Dist{
			"a": {Kind: harness.DistNormal, Lo: -4, Hi: 4}, "b": {Kind: harness.DistNormal, Lo: -4, Hi: 4},
			"scale_a": distScale, "scale_b": distScale})
		if err != nil {
			t.Fatal(err)
		}
		a, bb := in["a"], in["b"]
		a.SetBits(0, 0x7F)
		for i, v := range []float64{448, -448, 0x1p-9} {
			a.SetFloat64(c.k+1+i*c.k, v)   // rows 1..3
			bb.SetFloat64(2+i*c.k+i, -v/2) // rows 0..2 of b
		}
		want, err := ref.Run(g, in)
		if err != nil {
			t.Fatal(err)
		}
		got1, err := gpu.Run(p, in)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got2, err := gpu.Run(p, in)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if d1, d2 := harness.Digests(got1), harness.Digests(got2); d1[0] != d2[0] {
			t.Errorf("%s: two runs differ: %s vs %s", name, d1[0], d2[0])
		}
		r := harness.Check(got1[0], want[0], tolReduce(c.out, c.k))
		if !r.Pass {
			t.Errorf("%s: %s", name, r.Reason)
		}
		t.Logf("%-22s max %d ulp from engine/ref", name, r.MaxULP)
	}
}
