package harness

import (
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
)

// An empty output is compared exactly by its type: it passes under any tolerance, the
// magnitude guard's (an RMS of nothing is 0) included, and fails on any other shape or dtype,
// so an empty case never passes on nothing.
func TestCheckEmptyOutputsCompareTheirShapeExactly(t *testing.T) {
	for _, dt := range []numerics.DType{numerics.F32, numerics.BF16, numerics.I32} {
		want := tensor.New(dt, []int{0, 3})
		r := Check(tensor.New(dt, []int{0, 3}), want, DefaultTolerance(dt))
		mustPass(t, r)
		if r.Mode != ModeEmpty || r.Elements != 0 {
			t.Errorf("%s: mode %q elements %d, want %q and 0", dt, r.Mode, r.Elements, ModeEmpty)
		}
		mustPass(t, Check(tensor.New(dt, []int{0, 3}), want, Tolerance{Bitwise: true}))
		mustFail(t, Check(tensor.New(dt, []int{3, 0}), want, DefaultTolerance(dt)), "shape: got")
		mustFail(t, Check(tensor.New(dt, []int{0}), want, DefaultTolerance(dt)), "shape: got")
		mustFail(t, Check(tensor.New(dt, []int{3}), want, DefaultTolerance(dt)), "shape: got")
		mustFail(t, Check(nil, want, DefaultTolerance(dt)), "no output")
		// Bytes where none belong are malformed, not empty.
		bad := tensor.New(dt, []int{0, 3})
		bad.Data = make([]byte, dt.Size())
		mustFail(t, Check(bad, want, DefaultTolerance(dt)), "malformed got")
	}
	mustFail(t, Check(tensor.New(numerics.F16, []int{0}), tensor.New(numerics.F32, []int{0}), DefaultTolerance(numerics.F32)), "dtype")
	// An invalid tolerance still fails first.
	mustFail(t, Check(tensor.New(numerics.F32, []int{0}), tensor.New(numerics.F32, []int{0}), Tolerance{RTol: -1}), "")
	// The guard still applies to a non-empty output whose reference is the identity over an
	// empty axis (a sum of nothing is 0): only an exact tolerance passes it.
	zeros := tensor.New(numerics.F32, []int{3})
	mustFail(t, Check(zeros.Clone(), zeros, DefaultTolerance(numerics.F32)), "meaningless")
	mustPass(t, Check(zeros.Clone(), zeros, Tolerance{}))
}
