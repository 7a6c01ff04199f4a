package bench

import (
	"fmt"
	"math"
	"runtime"
	"sync"

	"github.com/tessera-qa/tessera-qa/engine/tensor"
	"github.com/tessera-qa/tessera-qa/harness"
)

// parallelMin is the output size from which checkParallel splits the comparison.
const parallelMin = 1 << 20

// checkParallel is harness.Check over a large output, split into contiguous parts checked
// concurrently (a 8192x8192 output takes seconds on one core). Each part obeys every rule of
// harness.Check (NaN/Inf positions, constant output, magnitude guard against the part's own
// reference values, tolerance); the merged result fails when any part fails or the mismatches
// together exceed the budget, and reports the first failing part's reason. A non-nil bound is
// a per-element error bound (harness.CheckBound), split with the output.
func checkParallel(got, want *tensor.Tensor, tol harness.Tolerance, bound []float64) harness.CheckResult {
	check := func(g, w *tensor.Tensor, b []float64) harness.CheckResult {
		if bound == nil {
			return harness.Check(g, w, tol)
		}
		return harness.CheckBound(g, w, tol, b)
	}
	n := want.Len()
	if n < parallelMin || got.DType != want.DType || got.Len() != n || (bound != nil && len(bound) != n) {
		return check(got, want, bound)
	}
	parts := min(runtime.GOMAXPROCS(0), n/(parallelMin/4))
	res := make([]harness.CheckResult, parts)
	size := want.DType.Size()
	var wg sync.WaitGroup
	for i := range parts {
		lo, hi := n*i/parts, n*(i+1)/parts
		wg.Add(1)
		go func() {
			defer wg.Done()
			view := func(t *tensor.Tensor) *tensor.Tensor {
				return &tensor.Tensor{DType: t.DType, Shape: []int{hi - lo}, Data: t.Data[lo*size : hi*size]}
			}
			var b []float64
			if bound != nil {
				b = bound[lo:hi]
			}
			r := check(view(got), view(want), b)
			if r.Worst >= 0 {
				r.Worst += lo
			}
			if !r.Pass {
				r.Reason = fmt.Sprintf("elements %d..%d: %s", lo, hi-1, r.Reason)
			}
			res[i] = r
		}()
	}
	wg.Wait()
	out := harness.CheckResult{Pass: true, Mode: res[0].Mode, Tolerance: res[0].Tolerance, Worst: -1}
	var sq, bsq float64
	worstSet := false
	for _, r := range res {
		out.Elements += r.Elements
		out.Mismatches += r.Mismatches
		out.NonFinite += r.NonFinite
		out.MaxAbs = math.Max(out.MaxAbs, r.MaxAbs)
		out.MaxRel = math.Max(out.MaxRel, r.MaxRel)
		out.MaxULP = max(out.MaxULP, r.MaxULP)
		sq += r.RefRMS * r.RefRMS * float64(r.Elements)
		bsq += r.BoundRMS * r.BoundRMS * float64(r.Elements)
		if !r.Pass && out.Pass {
			out.Pass, out.Reason = false, r.Reason
			out.Worst, out.WorstGot, out.WorstWant = r.Worst, r.WorstGot, r.WorstWant
			worstSet = true
		}
	}
	if !worstSet {
		// Every part passed: name the element with the largest absolute error's part.
		for _, r := range res {
			if r.MaxAbs == out.MaxAbs {
				out.Worst, out.WorstGot, out.WorstWant = r.Worst, r.WorstGot, r.WorstWant
				break
			}
		}
	}
	out.RefRMS = math.Sqrt(sq / float64(max(out.Elements, 1)))
	out.BoundRMS = math.Sqrt(bsq / float64(max(out.Elements, 1)))
	if out.Pass && !tol.Bitwise && out.Mismatches > tol.Budget {
		out.Pass, out.Reason = false, fmt.Sprintf("%d mismatches over all parts exceed the budget of %d", out.Mismatches, tol.Budget)
	}
	return out
}
