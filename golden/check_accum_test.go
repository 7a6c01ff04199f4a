package golden

import (
	"strings"
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
	"github.com/tessera-qa/tessera-qa/harness"
)

// TestScaledMatmulOnCudaUsesTheAccumulatorBound: the H100's result at [0,1] of
// 33x48x64-f32-range (-2.881498098373413, torch._scaled_mm's too) fails the golden file's
// tolerance on the CPU backend, which stays as strict as before, and passes on cuda, where
// the fp8 tensor cores' accumulation bound (harness/accum) is added; on cuda an element off
// by 0.1 and an all-zero output still fail.
func TestScaledMatmulOnCudaUsesTheAccumulatorBound(t *testing.T) {
	f, err := Load(Data(), "scaled_matmul", numerics.F8E4M3)
	if err != nil {
		t.Fatal(err)
	}
	var c GoldenCase
	for _, x := range f.Cases {
		if x.Name == "scaled_matmul/fp8e4m3/33x48x64-f32-range" {
			c = x
		}
	}
	if c.Graph == nil {
		t.Fatal("case 33x48x64-f32-range not in the golden file")
	}
	gpu := func(o []*tensor.Tensor) { o[0].SetFloat64(1, -2.881498098373413) }
	if w := c.Want[0].Float64(1); w != -2.8813364505767822 {
		t.Fatalf("golden [0,1] = %v, the H100 run compared with -2.8813364505767822", w)
	}
	r := CheckSpec(c, &fakeBackend{name: "cpu", spoil: gpu})
	if r.Verdict != harness.VerdictFail || r.Outputs[0].Check.BoundRMS != 0 {
		t.Errorf("cpu with the GPU's element: %s (%s), bound RMS %g; want a fail with no bound", r.Verdict, r.Reason, r.Outputs[0].Check.BoundRMS)
	}
	r = CheckSpec(c, &fakeBackend{name: "cuda", spoil: gpu})
	if r.Verdict != harness.VerdictPass || r.Outputs[0].Check.BoundRMS <= 0 {
		t.Errorf("cuda with the GPU's element: %s (%s), bound RMS %g; want a pass with a bound", r.Verdict, r.Reason, r.Outputs[0].Check.BoundRMS)
	}
	r = CheckSpec(c, &fakeBackend{name: "cuda", spoil: func(o []*tensor.Tensor) { o[0].SetFloat64(1, o[0].Float64(1)+0.1) }})
	if r.Verdict != harness.VerdictFail || !strings.Contains(r.Reason, "error bound") {
		t.Errorf("cuda, [0,1] off by 0.1: %s (%s)", r.Verdict, r.Reason)
	}
	r = CheckSpec(c, &fakeBackend{name: "cuda", spoil: func(o []*tensor.Tensor) { clear(o[0].Data) }})
	if r.Verdict != harness.VerdictFail {
		t.Errorf("cuda, zeros: %s", r.Verdict)
	}
	t.Logf("cuda: bound RMS %.4g, reference RMS %.4g", r.Outputs[0].Check.BoundRMS, r.Outputs[0].Check.RefRMS)
}
