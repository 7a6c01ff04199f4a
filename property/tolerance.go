package property

import (
	"math"

	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
	"github.com/tessera-qa/tessera-qa/harness"
)

// Tolerance is the tolerance policy of every property that compares an output of dtype dt
// with an expected value want (docs/property.md):
//
//   - start from harness.DefaultTolerance(dt), scaled by ForReduction(k) for the longest
//     reduction k upstream of the output (docs/tolerances.md);
//   - when the expected value's RMS is below 1, scale ATol by it, never below 4 of dt's
//     smallest subnormals. The default ATol assumes unit-scale data; floating point is scale
//     invariant, so for tiny data (ClassTiny, near-cancellation) an unscaled ATol would both
//     make the magnitude guard call every check meaningless and let any answer pass.
//
// The result is never looser than DefaultTolerance(dt).ForReduction(k), and the magnitude
// guard stays on: a case whose reference is still degenerate (all zeros, all NaN) is filtered
// out by Judgeable, except where a property controls its values and says NoGuard.
func Tolerance(dt numerics.DType, k int, want *tensor.Tensor) harness.Tolerance {
	t := harness.DefaultTolerance(dt).ForReduction(k)
	if !dt.IsFloat() || want == nil {
		return t
	}
	if rms := finiteRMS(want); rms < 1 {
		t.ATol = math.Max(t.ATol*rms, 4*numerics.Decode(dt, 1))
	}
	return t
}

// finiteRMS is the RMS of t's finite values (0 when there are none), scaled by the largest
// magnitude so that squaring cannot overflow.
func finiteRMS(t *tensor.Tensor) float64 {
	var peak float64
	n := 0
	for i := range t.Len() {
		if v := t.Float64(i); !math.IsNaN(v) && !math.IsInf(v, 0) {
			peak = math.Max(peak, math.Abs(v))
			n++
		}
	}
	if peak == 0 {
		return 0
	}
	var sum float64
	for i := range t.Len() {
		if v := t.Float64(i); !math.IsNaN(v) && !math.IsInf(v, 0) {
			sum += (v / peak) * (v / peak)
		}
	}
	return peak * math.Sqrt(sum/float64(n))
}
