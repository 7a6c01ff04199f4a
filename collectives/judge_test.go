package collectives

import (
	"math"
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/dist"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

// The float budget is relative to the answer, not to the contributions: under cancellation
// (1000 + -999 = 1) an f32 sum off by 1e-3 is wrong even though it is tiny against the
// contributions' 1999, while one off by 1e-4 is within atol + rtol·|want| + (n-1)·u·S. Without
// cancellation the two readings agree, and both answers near 1 pass or fail alike.
func TestJudgeFloatSumBudgetIsRelativeToTheAnswer(t *testing.T) {
	v := newVerifier(Case{Op: AllReduce, Red: dist.Sum, DType: numerics.F32, Count: 1}, 2, dist.Deterministic, gen{})
	f32 := func(x float64) uint64 { return uint64(math.Float32bits(float32(x))) }
	for _, tc := range []struct {
		vals []float64
		got  float64
		ok   bool
	}{
		{[]float64{1000, -999}, 1, true},
		{[]float64{1000, -999}, 1 + 1e-4, true},
		{[]float64{1000, -999}, 1 + 1e-3, false},
		{[]float64{1000, -999}, 1 - 1e-3, false},
		{[]float64{0.5, 0.5}, 1 + 1e-3, false},
		{[]float64{0.5, 0.5}, 1 + 5e-6, true},
	} {
		if got := v.reduced(tc.vals, f32(tc.got)); got != tc.ok {
			t.Errorf("sum of %v given as %v: counted right %v, want %v", tc.vals, tc.got, got, tc.ok)
		}
	}
}
