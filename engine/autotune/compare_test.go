package autotune

import (
	"math"
	"strings"
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
)

func TestCompareOutputs(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	want := f32(1, -2, 3e-7, nan, -inf, 4)
	for _, tc := range []struct {
		name string
		got  *tensor.Tensor
		err  string
	}{
		{"identical", f32(1, -2, 3e-7, nan, -inf, 4), ""},
		// Reordered sums: a relative change of 1e-5 anywhere, and a near-zero element that
		// moved by far more than its own magnitude but little against the rms.
		{"reordering noise", f32(1.00001, -2.00002, 9e-5, nan, -inf, 4.00004), ""},
		{"dropped tile", f32(1, -2, 3e-7, nan, -inf, 3.5), "element 5"},
		{"all zero", f32(0, 0, 0, nan, -inf, 0), "element 0"},
		{"NaN appears", f32(nan, -2, 3e-7, nan, -inf, 4), "NaN positions"},
		{"NaN vanishes", f32(1, -2, 3e-7, 0, -inf, 4), "NaN positions"},
		{"Inf sign", f32(1, -2, 3e-7, nan, inf, 4), "Inf positions"},
		{"shape", f32(1, 2), "output 0 is f32[2]"},
	} {
		err := CompareOutputs([]*tensor.Tensor{tc.got}, []*tensor.Tensor{want})
		if (tc.err == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("%s: err %v, want %q", tc.name, err, tc.err)
		}
	}
	ints := tensor.FromFloat64(numerics.I32, []int{3}, []float64{1, 2, 3})
	off := tensor.FromFloat64(numerics.I32, []int{3}, []float64{1, 2, 4})
	if err := CompareOutputs([]*tensor.Tensor{off}, []*tensor.Tensor{ints}); err == nil || !strings.Contains(err.Error(), "exact") {
		t.Errorf("ints must match exactly: %v", err)
	}
	if err := CompareOutputs(nil, []*tensor.Tensor{ints}); err == nil {
		t.Error("missing outputs accepted")
	}
	// bf16 allows a couple of roundings (ulp 2^-7 at 1..2) but not a 10% error.
	w := tensor.FromFloat64(numerics.BF16, []int{2}, []float64{1.5, -1.25})
	g1 := tensor.FromFloat64(numerics.BF16, []int{2}, []float64{1.5 + 1.0/64, -1.25})
	g2 := tensor.FromFloat64(numerics.BF16, []int{2}, []float64{1.5, -1.375})
	if err := CompareOutputs([]*tensor.Tensor{g1}, []*tensor.Tensor{w}); err != nil {
		t.Errorf("bf16 two-ulp difference rejected: %v", err)
	}
	if err := CompareOutputs([]*tensor.Tensor{g2}, []*tensor.Tensor{w}); err == nil {
		t.Error("bf16 10% error accepted")
	}
}

func TestMedian(t *testing.T) {
	if m, err := median([]float64{5, 1, 3}, 3); err != nil || m != 3 {
		t.Errorf("median odd = %v, %v", m, err)
	}
	if m, err := median([]float64{4, 1, 3, 2}, 4); err != nil || m != 2.5 {
		t.Errorf("median even = %v, %v", m, err)
	}
	for _, bad := range [][]float64{{1, 2}, {1, math.NaN(), 2}, {1, -1, 2}, {1, math.Inf(1), 2}} {
		if _, err := median(bad, 3); err == nil {
			t.Errorf("median accepted %v for 3 reps", bad)
		}
	}
}
