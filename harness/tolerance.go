package harness

import (
	"fmt"
	"math"

	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

// DefaultGuard is the magnitude-guard factor used when Tolerance.Guard is 0: a float check is
// meaningless when ATol exceeds half the RMS of the reference, because an output of zeros
// would then pass for most elements.
const DefaultGuard = 0.5

// ReductionRTolCap bounds the relative tolerance that ForReduction may grow to (unless the
// unscaled RTol is already larger). At 1/16 a reduction that dropped or doubled one of k
// terms of similar size still fails for k up to about 256.
const ReductionRTolCap = 1.0 / 16

// Tolerance says when an output matches its expected value. The zero value is an exact,
// guarded comparison. See docs/tolerances.md.
type Tolerance struct {
	// RTol and ATol: an element matches when |got-want| <= ATol + RTol*|want|.
	RTol float64 `json:"rtol"`
	ATol float64 `json:"atol"`
	// MaxULP > 0 switches to ULP mode: an element matches when it is at most MaxULP
	// representable steps from want, or within ATol of it (so values straddling zero can
	// still be absorbed by an explicit ATol). RTol is ignored in ULP mode.
	MaxULP uint64 `json:"max_ulp,omitempty"`
	// Budget is the number of finite mismatching elements tolerated. NaN and Inf position
	// mismatches are never absorbed.
	Budget int `json:"budget,omitempty"`
	// Bitwise compares bit patterns: -0 != +0, NaN payloads count, Budget is ignored.
	Bitwise bool `json:"bitwise,omitempty"`
	// Guard is the magnitude-guard factor: a float check fails as meaningless when
	// ATol > Guard*RMS(finite |want|) or RTol >= 1. 0 means DefaultGuard; negative disables
	// the guard (NoGuard).
	Guard float64 `json:"guard,omitempty"`
}

// DefaultTolerance is the starting tolerance for an output of dtype dt (design.md §7). Each
// float (rtol, atol) allows a few units of the dtype's rounding error; ints and bool are
// compared exactly.
func DefaultTolerance(dt numerics.DType) Tolerance {
	switch dt {
	case numerics.F64:
		return Tolerance{RTol: 1e-12, ATol: 1e-12}
	case numerics.F32:
		return Tolerance{RTol: 1.3e-6, ATol: 1e-5}
	case numerics.F16:
		return Tolerance{RTol: 1e-3, ATol: 1e-5}
	case numerics.BF16:
		return Tolerance{RTol: 1.6e-2, ATol: 1e-5}
	case numerics.F8E4M3:
		return Tolerance{RTol: 1.25e-1, ATol: 1e-2}
	case numerics.F8E5M2:
		return Tolerance{RTol: 2.5e-1, ATol: 1e-2}
	}
	return Tolerance{}
}

// Bitwise is the tolerance of determinism checks: every bit must match.
func Bitwise() Tolerance { return Tolerance{Bitwise: true} }

// NoGuard disables the magnitude guard. Use it explicitly, and only for outputs whose
// reference is legitimately tiny or zero (a loss near its minimum, masked-out rows), never to
// make a failing random-input test pass. The constant-output rule still applies.
func (t Tolerance) NoGuard() Tolerance {
	t.Guard = -1
	return t
}

// WithBudget returns t allowing n mismatching finite elements.
func (t Tolerance) WithBudget(n int) Tolerance {
	t.Budget = n
	return t
}

// ForReduction scales t for an output that sums k terms of inputs rounded to the output
// dtype (a matmul or reduction with K = k).
//
// Rounding errors of a k-term sum behave like a random walk: with terms of similar size the
// error grows like sqrt(k) units of the accumulator, while the typical result grows like
// sqrt(k) times a term for zero-mean data. So:
//   - RTol grows by sqrt(k). The per-dtype default RTol is a few units roundoff of the output
//     dtype, so this covers accumulation at the output's own precision (the worst legitimate
//     case: an accum attribute equal to the storage dtype). RTol stops at ReductionRTolCap,
//     or at the unscaled RTol when that is already larger (fp8).
//   - ATol grows by sqrt(k) without a cap: it covers elements whose sum cancels to near zero,
//     where the absolute error of the partial sums remains. The magnitude guard still checks
//     the scaled ATol against the reference, so scaling cannot make a check meaningless.
//   - MaxULP grows by ceil(sqrt(k)) for the same reason as RTol.
//
// Budget, Bitwise and Guard are unchanged. k <= 1 returns t.
func (t Tolerance) ForReduction(k int) Tolerance {
	if k <= 1 || t.Bitwise {
		return t
	}
	s := math.Sqrt(float64(k))
	t.RTol = math.Min(t.RTol*s, math.Max(t.RTol, ReductionRTolCap))
	t.ATol *= s
	if t.MaxULP > 0 {
		t.MaxULP *= uint64(math.Ceil(s))
	}
	return t
}

// guard returns the effective guard factor, or 0 when the guard is disabled.
func (t Tolerance) guard() float64 {
	switch {
	case t.Guard < 0:
		return 0
	case t.Guard == 0:
		return DefaultGuard
	}
	return t.Guard
}

// Validate rejects tolerances that cannot be applied (negative or non-finite numbers).
func (t Tolerance) Validate() error {
	for _, f := range []struct {
		name string
		v    float64
	}{{"rtol", t.RTol}, {"atol", t.ATol}, {"guard", t.Guard}} {
		if math.IsNaN(f.v) || math.IsInf(f.v, 0) {
			return errs.New(errs.Input, "tolerance: %s is %v, want a finite number", f.name, f.v)
		}
	}
	if t.RTol < 0 || t.ATol < 0 {
		return errs.New(errs.Input, "tolerance: rtol %g and atol %g must be >= 0", t.RTol, t.ATol)
	}
	if t.Budget < 0 {
		return errs.New(errs.Input, "tolerance: budget %d must be >= 0", t.Budget)
	}
	return nil
}

func (t Tolerance) String() string {
	if t.Bitwise {
		return "bitwise"
	}
	s := fmt.Sprintf("rtol=%g atol=%g", t.RTol, t.ATol)
	if t.MaxULP > 0 {
		s = fmt.Sprintf("max_ulp=%d atol=%g", t.MaxULP, t.ATol)
	}
	if t.Budget > 0 {
		s += fmt.Sprintf(" budget=%d", t.Budget)
	}
	if g := t.guard(); g == 0 {
		s += " noguard"
	} else if g != DefaultGuard {
		s += fmt.Sprintf(" guard=%g", g)
	}
	return s
}
