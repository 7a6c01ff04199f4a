package harness

import (
	"math"
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

// TestCheckBoundAddsPerElement: the bound of element i widens element i only; the error
// message names the bound; ULP mode adds it to ATol.
func TestCheckBoundAddsPerElement(t *testing.T) {
	want := f32(10, -20, 30, -40)
	tol := DefaultTolerance(numerics.F32)
	got := f32(10.5, -20, 30, -40)
	mustFail(t, Check(got, want, tol), "1 of 4 elements out of tolerance")
	mustPass(t, CheckBound(got, want, tol, []float64{0.5, 0, 0, 0}))
	r := CheckBound(got, want, tol, []float64{0, 0.5, 0, 0})
	mustFail(t, r, "(error bound 0 of it)")
	if r.Worst != 0 {
		t.Errorf("worst %d, want 0", r.Worst)
	}
	mustFail(t, CheckBound(got, want, tol, []float64{0.49, 0, 0, 0}), "first at [0]")
	u := Tolerance{MaxULP: 2}
	mustFail(t, CheckBound(got, want, u, []float64{0, 0, 0, 0}), "ulp")
	mustPass(t, CheckBound(got, want, u, []float64{0.5, 0, 0, 0}))
}

// TestCheckBoundRejects: a bound of the wrong length, negative, NaN or Inf, or on a bitwise
// check, is an unusable check, never a pass.
func TestCheckBoundRejects(t *testing.T) {
	want := f32(1, 2)
	tol := DefaultTolerance(numerics.F32)
	mustFail(t, CheckBound(want.Clone(), want, tol, []float64{0}), "error bound has 1 elements")
	mustFail(t, CheckBound(want.Clone(), want, tol, []float64{0, -1}), "error bound at [1] is -1")
	mustFail(t, CheckBound(want.Clone(), want, tol, []float64{math.NaN(), 0}), "error bound at [0] is NaN")
	mustFail(t, CheckBound(want.Clone(), want, tol, []float64{0, math.Inf(1)}), "error bound at [1] is +Inf")
	mustFail(t, CheckBound(want.Clone(), want, Bitwise(), []float64{0, 0}), "cannot widen a bitwise check")
}

// TestCheckBoundGuard: a bound whose RMS exceeds half the reference's RMS makes the check
// meaningless (zeros would pass), while NaN positions and the constant-output rule still hold.
func TestCheckBoundGuard(t *testing.T) {
	want := f32(1, -1, 1, -1)
	tol := DefaultTolerance(numerics.F32)
	zeros := f32(0, 0, 0, 0)
	mustFail(t, CheckBound(zeros, want, tol, []float64{1, 1, 1, 1}), "meaningless: the error bound's RMS 1 exceeds 0.5")
	mustFail(t, CheckBound(zeros, want, tol, []float64{0.4, 0.4, 0.4, 0.4}), "constant output")
	got := f32(1.3, -1, 1, -1)
	r := CheckBound(got, want, tol, []float64{0.4, 0, 0, 0})
	mustPass(t, r)
	if r.BoundRMS != 0.2 {
		t.Errorf("bound RMS %g, want 0.2", r.BoundRMS)
	}
	mustFail(t, CheckBound(f32(math.NaN(), -1, 1, -1), want, tol, []float64{0.4, 0, 0, 0}), "NaN/Inf positions differ")
}
