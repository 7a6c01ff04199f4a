package gradients

import (
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/backend"
	_ "github.com/tessera-qa/tessera-qa/engine/backend/cpu"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

// The spectral ops' VJPs (adjoint DFTs) against float64 finite differences on the CPU.
func TestSpectralGradcheck(t *testing.T) {
	ops := []string{"fft", "ifft", "rfft", "irfft", "fft2", "ifft2", "rfft2", "irfft2", "complex_mul", "conj"}
	cs, err := Cases(ops)
	if err != nil {
		t.Fatal(err)
	}
	// Beyond the PerPair cases: the pad and crop (n), outer-axis (dim) and forward-norm forms.
	for _, op := range ops[:4] {
		more, err := CasesTagged(op, []numerics.DType{numerics.F64, numerics.F32}, "2x97-forward", "5x12x3-dim1", "6x5-dim0", "3x16-n10", "3x9-n14")
		if err != nil || len(more) != 10 {
			t.Fatalf("%s: %d tagged cases, %v", op, len(more), err)
		}
		cs = append(cs, more...)
	}
	for _, op := range ops[4:8] {
		more, err := CasesTagged(op, []numerics.DType{numerics.F64, numerics.F32}, "6x4-s5x7")
		if err != nil || len(more) != 2 {
			t.Fatalf("%s: %d tagged cases, %v", op, len(more), err)
		}
		cs = append(cs, more...)
	}
	be, err := backend.Get("cpu")
	if err != nil {
		t.Fatal(err)
	}
	rows := Rows(CheckAll(be, cs, Options{}), ops)
	if len(rows) < len(ops) {
		t.Fatalf("%d rows for %d ops", len(rows), len(ops))
	}
	for _, r := range rows {
		t.Logf("%s %s: %s, %d cases, worst %.2g of %.2g %s", r.Op, r.DType, r.Verdict, r.Cases, r.Worst, r.Budget, r.Reason)
		if r.Cases > 0 && r.Verdict != Pass {
			t.Errorf("%s %s: %s: %s", r.Op, r.DType, r.Verdict, r.Reason)
		}
	}
}
