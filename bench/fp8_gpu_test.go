package bench

import (
	"fmt"
	"math"
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/compiler"
	"github.com/tessera-qa/tessera-qa/engine/compiler/ptx"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/engine/ref"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
	"github.com/tessera-qa/tessera-qa/harness"
	"github.com/tessera-qa/tessera-qa/harness/accum"
)

// TestGPUFP8GemmMatchesReference runs scaled_matmul on the CUDA backend through the fp8 wgmma
// kernel, on ragged shapes and every output dtype, against engine/ref (exact), twice with the
// same bits, with e4m3's special values planted in the inputs (fp8GemmCase). The comparison
// allows the output dtype's default tolerance plus HopperFP8's per-element bound of the tensor
// cores' 13-bit truncating accumulation (harness/accum, docs/numerics.md).
// Without a GPU it skips.
func TestGPUFP8GemmMatchesReference(t *testing.T) {
	gpu := gpuBackend(t)
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
		g, in, err := fp8GemmCase(c.m, c.n, c.k, c.out)
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
		bound, err := accum.ScaledMatmul(accum.HopperFP8, in["a"], in["b"], in["scale_a"], in["scale_b"])
		if err != nil {
			t.Fatal(err)
		}
		r := harness.CheckBound(got1[0], want[0], harness.DefaultTolerance(c.out), bound)
		if !r.Pass {
			t.Errorf("%s: %s", name, r.Reason)
		}
		t.Logf("%-22s max %d ulp, max |err| %.4g from engine/ref; worst err/budget %.3f at %d; error bound RMS %.4g, reference RMS %.4g",
			name, r.MaxULP, r.MaxAbs, budgetUse(got1[0], want[0], harness.DefaultTolerance(c.out), bound, r.Worst), r.Worst, r.BoundRMS, r.RefRMS)
	}
}

// budgetUse is |got-want| / (atol + rtol*|want| + bound) at flat index i (the check's worst
// element): how much of the budget the kernel used there; 0 for a NaN/Inf or missing element.
func budgetUse(got, want *tensor.Tensor, tol harness.Tolerance, bound []float64, i int) float64 {
	if i < 0 {
		return 0
	}
	g, w := got.Float64(i), want.Float64(i)
	d := math.Abs(g - w)
	if math.IsNaN(d) || math.IsInf(d, 0) {
		return 0
	}
	return d / (tol.ATol + tol.RTol*math.Abs(w) + bound[i])
}
