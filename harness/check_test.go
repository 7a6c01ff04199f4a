package harness

import (
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
)

func f64(vals ...float64) *tensor.Tensor {
	return tensor.FromFloat64(numerics.F64, []int{len(vals)}, vals)
}

func f32(vals ...float64) *tensor.Tensor {
	return tensor.FromFloat64(numerics.F32, []int{len(vals)}, vals)
}

func mustPass(t *testing.T, r CheckResult) {
	t.Helper()
	if !r.Pass {
		t.Fatalf("want pass, got fail: %s", r.Reason)
	}
}

func mustFail(t *testing.T, r CheckResult, reasonPart string) {
	t.Helper()
	if r.Pass {
		t.Fatalf("want fail (%q), got pass: %+v", reasonPart, r)
	}
	if !strings.Contains(r.Reason, reasonPart) {
		t.Fatalf("reason %q does not mention %q", r.Reason, reasonPart)
	}
}

func TestDefaultToleranceTable(t *testing.T) {
	want := map[numerics.DType][2]float64{
		numerics.F64: {1e-12, 1e-12}, numerics.F32: {1.3e-6, 1e-5}, numerics.F16: {1e-3, 1e-5},
		numerics.BF16: {1.6e-2, 1e-5}, numerics.F8E4M3: {1.25e-1, 1e-2}, numerics.F8E5M2: {2.5e-1, 1e-2},
		numerics.I8: {0, 0}, numerics.I32: {0, 0}, numerics.Bool: {0, 0},
	}
	for _, dt := range numerics.All {
		got := DefaultTolerance(dt)
		w, ok := want[dt]
		if !ok {
			t.Fatalf("no expectation for %s", dt)
		}
		if got.RTol != w[0] || got.ATol != w[1] || got.MaxULP != 0 || got.Budget != 0 || got.Bitwise || got.guard() != DefaultGuard {
			t.Errorf("DefaultTolerance(%s) = %+v, want rtol %g atol %g, guarded", dt, got, w[0], w[1])
		}
	}
}

func TestForReduction(t *testing.T) {
	f32t := DefaultTolerance(numerics.F32)
	if got := f32t.ForReduction(1); got != f32t {
		t.Errorf("k=1 changed the tolerance: %+v", got)
	}
	got := f32t.ForReduction(4)
	if got.RTol != 2*f32t.RTol || got.ATol != 2*f32t.ATol || got.Guard != f32t.Guard {
		t.Errorf("f32 k=4: %+v, want rtol and atol doubled", got)
	}
	if bf := DefaultTolerance(numerics.BF16).ForReduction(4096); bf.RTol != ReductionRTolCap || bf.ATol != 64e-5 {
		t.Errorf("bf16 k=4096: %+v, want rtol capped at %g and atol 64x", bf, ReductionRTolCap)
	}
	if e5 := DefaultTolerance(numerics.F8E5M2).ForReduction(100); e5.RTol != 0.25 {
		t.Errorf("e5m2 rtol above the cap must stay, got %g", e5.RTol)
	}
	if u := (Tolerance{MaxULP: 2}).ForReduction(10); u.MaxULP != 8 {
		t.Errorf("MaxULP 2, k=10: got %d, want 2*ceil(sqrt(10)) = 8", u.MaxULP)
	}
	if b := Bitwise().ForReduction(1000); b != Bitwise() {
		t.Errorf("bitwise must not scale: %+v", b)
	}
}

func TestCheckToleranceEdge(t *testing.T) {
	// rtol 1/8 and atol 1/2 are exact in binary, so the boundary is exactly 8*1/8 + 1/2.
	tol := Tolerance{RTol: 0.125, ATol: 0.5}
	want := f64(8, -3, 5, 2)
	mustPass(t, Check(f64(9.5, -3, 5, 2), want, tol))
	r := Check(f64(math.Nextafter(9.5, 10), -3, 5, 2), want, tol)
	mustFail(t, r, "1 of 4 elements out of tolerance")
	if r.Mismatches != 1 || r.Worst != 0 || r.NonFinite != 0 {
		t.Errorf("mismatches %d worst %d nonfinite %d, want 1, 0, 0", r.Mismatches, r.Worst, r.NonFinite)
	}
	if r.MaxAbs <= 1.5 || r.MaxRel <= 1.5/8 {
		t.Errorf("max_abs %g max_rel %g not recorded", r.MaxAbs, r.MaxRel)
	}
	if r.WorstGot != "9.500000000000002" || r.WorstWant != "8" {
		t.Errorf("worst values %q %q", r.WorstGot, r.WorstWant)
	}
}

func TestCheckStructure(t *testing.T) {
	a := f32(1, 2, 3)
	mustFail(t, Check(nil, a, Tolerance{}), "got is nil")
	mustFail(t, Check(a, nil, Tolerance{}), "want is nil")
	mustFail(t, Check(f64(1, 2, 3), a, Tolerance{}), "dtype: got f64[3], want f32[3]")
	mustFail(t, Check(tensor.FromFloat64(numerics.F32, []int{3, 1}, []float64{1, 2, 3}), a, Tolerance{}), "shape")
	bad := a.Clone()
	bad.Data = bad.Data[:5]
	mustFail(t, Check(bad, a, Tolerance{}), "malformed got")
	mustFail(t, Check(a, a, Tolerance{ATol: -1}), "atol")
	mustFail(t, Check(a, a, Tolerance{RTol: math.NaN()}), "rtol")
}

func TestCheckNaNPositions(t *testing.T) {
	nan := math.NaN()
	want := f32(1, nan, 3, 4)
	// A NaN where a number is expected, or the reverse, is never absorbed by the budget.
	r := Check(f32(1, 2, 3, 4), want, DefaultTolerance(numerics.F32).WithBudget(10))
	mustFail(t, r, "NaN/Inf positions differ at 1 of 4")
	if r.NonFinite != 1 || r.Worst != 1 {
		t.Errorf("nonfinite %d worst %d, want 1 and 1", r.NonFinite, r.Worst)
	}
	mustFail(t, Check(f32(nan, nan, 3, 4), want, DefaultTolerance(numerics.F32).WithBudget(10)), "first at [0]: got NaN, want 1")
	// NaN against NaN matches whatever the payload, outside bitwise mode.
	got := want.Clone()
	got.SetBits(1, 0x7fc00001)
	mustPass(t, Check(got, want, DefaultTolerance(numerics.F32)))
	mustFail(t, Check(got, want, Bitwise()), "differ bitwise")
}

func TestCheckInfSigns(t *testing.T) {
	inf := math.Inf(1)
	want := f32(1, inf, 3, -inf)
	mustPass(t, Check(f32(1, inf, 3, -inf), want, DefaultTolerance(numerics.F32)))
	mustFail(t, Check(f32(1, -inf, 3, -inf), want, DefaultTolerance(numerics.F32).WithBudget(4)), "NaN/Inf positions differ")
	mustFail(t, Check(f32(1, 3e38, 3, -inf), want, DefaultTolerance(numerics.F32).WithBudget(4)), "got 3")
	mustFail(t, Check(f32(inf, inf, 3, -inf), want, DefaultTolerance(numerics.F32).WithBudget(4)), "first at [0]: got +Inf, want 1")
}

func TestCheckSignedZero(t *testing.T) {
	negZero := math.Copysign(0, -1)
	want := f32(0, 1, 2)
	got := f32(negZero, 1, 2)
	mustPass(t, Check(got, want, DefaultTolerance(numerics.F32)))
	r := Check(got, want, Bitwise())
	mustFail(t, r, "1 of 3 elements differ bitwise; first at [0]: got -0 (0x80000000), want 0 (0x00000000)")
	if r.Mode != ModeBitwise || r.Mismatches != 1 {
		t.Errorf("mode %s mismatches %d", r.Mode, r.Mismatches)
	}
	mustPass(t, Check(want.Clone(), want, Bitwise()))
	// Bitwise ignores the budget: every bit must match.
	mustFail(t, Check(got, want, Bitwise().WithBudget(5)), "differ bitwise")
}

func TestCheckBudget(t *testing.T) {
	want := f32(1, 2, 3, 4, 5, 6)
	got := f32(1.5, 2.5, 3.5, 4, 5, 6)
	tol := DefaultTolerance(numerics.F32)
	mustPass(t, Check(got, want, tol.WithBudget(3)))
	r := Check(got, want, tol.WithBudget(2))
	mustFail(t, r, "3 of 6 elements out of tolerance")
	if r.Mismatches != 3 {
		t.Errorf("mismatches %d, want 3", r.Mismatches)
	}
	// Integers are exact by default; the budget applies to them too.
	wi := tensor.FromFloat64(numerics.I32, []int{2, 2}, []float64{1, 2, 3, 4})
	gi := tensor.FromFloat64(numerics.I32, []int{2, 2}, []float64{1, 2, 3, 5})
	mustFail(t, Check(gi, wi, DefaultTolerance(numerics.I32)), "first at [1,1]: got 5, want 4")
	mustPass(t, Check(gi, wi, DefaultTolerance(numerics.I32).WithBudget(1)))
}

func TestCheckULP(t *testing.T) {
	up := func(x float32, n int) float64 {
		for range n {
			x = math.Nextafter32(x, 10)
		}
		return float64(x)
	}
	want := f32(1, 2, 3)
	got := f32(up(1, 2), 2, 3)
	r := Check(got, want, Tolerance{MaxULP: 2})
	mustPass(t, r)
	if r.Mode != ModeULP || r.MaxULP != 2 {
		t.Errorf("mode %s max_ulp %d, want ulp and 2", r.Mode, r.MaxULP)
	}
	mustFail(t, Check(got, want, Tolerance{MaxULP: 1}), "2 ulp > 1")
	// ULP mode ignores rtol: a huge rtol does not rescue it.
	mustFail(t, Check(got, want, Tolerance{MaxULP: 1, RTol: 0.5}), "out of tolerance")
	// Across zero the ULP distance explodes; an explicit atol absorbs it.
	wz := f32(-1e-30, 1, 2)
	gz := f32(1e-30, 1, 2)
	mustFail(t, Check(gz, wz, Tolerance{MaxULP: 4}), "out of tolerance")
	mustPass(t, Check(gz, wz, Tolerance{MaxULP: 4, ATol: 1e-20}))
}

func TestCheckZeroAndConstantOutputsFail(t *testing.T) {
	for _, dt := range numerics.Floats {
		want := RandomTensor(dt, []int{8, 16}, 42, Dist{Kind: DistNormal})
		zeros := tensor.New(dt, want.Shape)
		for _, k := range []int{1, 64, 4096, 1 << 20} {
			tol := DefaultTolerance(dt).ForReduction(k)
			mustFail(t, Check(zeros, want, tol), "constant output")
			mustFail(t, Check(zeros, want, tol.NoGuard().WithBudget(1000)), "constant output")
		}
		mustPass(t, Check(want.Clone(), want, DefaultTolerance(dt)))
		ones := tensor.FromFloat64(dt, want.Shape, fill(want.Len(), 1))
		mustFail(t, Check(ones, want, DefaultTolerance(dt)), "constant output: every element is 1")
	}
	// A constant reference with a matching constant output is fine.
	mustPass(t, Check(f32(2, 2, 2), f32(2, 2, 2), DefaultTolerance(numerics.F32)))
	// -0 and +0 are one value: a mixed-zero output is still constant.
	mustFail(t, Check(f32(0, math.Copysign(0, -1), 0), f32(1, 2, 3), Tolerance{RTol: 1}.NoGuard().WithBudget(3)), "constant output")
}

func TestMagnitudeGuard(t *testing.T) {
	// A reference around 1e-5 checked with the f32 default atol 1e-5: zeros would pass almost
	// every element, so the check itself is meaningless, even for a perfect output.
	vals := []float64{1e-5, -2e-5, 3e-5, -1e-5, 2e-5}
	want := f32(vals...)
	r := Check(want.Clone(), want, DefaultTolerance(numerics.F32))
	mustFail(t, r, "meaningless: atol 1e-05 exceeds 0.5 x the reference RMS")
	if r.RefRMS < 1.8e-5 || r.RefRMS > 2e-5 {
		t.Errorf("ref_rms %g, want about 1.9e-5", r.RefRMS)
	}
	mustPass(t, Check(want.Clone(), want, DefaultTolerance(numerics.F32).NoGuard()))
	mustPass(t, Check(want.Clone(), want, Tolerance{RTol: 1.3e-6, ATol: 1e-7}))
	// A custom guard factor moves the threshold.
	mustPass(t, Check(want.Clone(), want, Tolerance{RTol: 1.3e-6, ATol: 1e-5, Guard: 1}))
	// rtol >= 1 lets zero pass everywhere.
	mustFail(t, Check(f32(1, 2), f32(1, 2), Tolerance{RTol: 1}), "meaningless: rtol 1 >= 1")
	// An all-zero reference only passes an exact or unguarded check.
	mustFail(t, Check(f32(0, 0), f32(0, 0), DefaultTolerance(numerics.F32)), "meaningless")
	mustPass(t, Check(f32(0, 0), f32(0, 0), Tolerance{}))
	// Ints have no guard: their default is exact.
	wi := tensor.FromFloat64(numerics.I8, []int{2}, []float64{0, 1})
	mustPass(t, Check(wi.Clone(), wi, Tolerance{ATol: 5}))
}

func TestCheckResultEncodesAsJSON(t *testing.T) {
	// |1e308 - (-1e308)| overflows; the result must still encode.
	r := Check(f64(1e308, 1, 2), f64(-1e308, 1, 2), DefaultTolerance(numerics.F64))
	mustFail(t, r, "out of tolerance")
	if _, err := json.Marshal(r); err != nil {
		t.Fatalf("CheckResult does not encode: %v", err)
	}
	if r.MaxAbs != math.MaxFloat64 {
		t.Errorf("max_abs %g, want clamped to MaxFloat64", r.MaxAbs)
	}
}

func TestCheckWorstIsLargestExcess(t *testing.T) {
	want := tensor.FromFloat64(numerics.F64, []int{2, 3}, []float64{1, 2, 3, 4, 5, 6})
	got := tensor.FromFloat64(numerics.F64, []int{2, 3}, []float64{1.1, 2, 3, 4, 7, 6})
	r := Check(got, want, Tolerance{RTol: 1e-9})
	mustFail(t, r, "first at [0,0]")
	if r.Worst != 4 {
		t.Errorf("worst %d, want 4 (the largest error)", r.Worst)
	}
}

func fill(n int, v float64) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = v
	}
	return out
}
