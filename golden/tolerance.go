package golden

import (
	"math"

	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/harness"
)

// tolRule gives the tolerance of one output from its type. Every rule starts from
// harness.DefaultTolerance of the output dtype (docs/tolerances.md); the deviations below
// say why they exist.
type tolRule func(out graph.Type) harness.Tolerance

// tolDefault is for ops that round once from a value the engine computes exactly or in f32
// (elementwise ops, casts): at most one rounding step apart from the golden model.
func tolDefault(out graph.Type) harness.Tolerance { return harness.DefaultTolerance(out.DType) }

// tolBitwise is for data movement: the engine copies bit patterns, so anything else is a bug.
func tolBitwise(graph.Type) harness.Tolerance { return harness.Bitwise() }

// tolReduce is for outputs that sum k terms (matmul over K, reductions, norms, losses): the
// harness's sqrt(k) scaling, which covers accumulating in the output's own precision.
func tolReduce(k int) tolRule {
	return func(out graph.Type) harness.Tolerance { return harness.DefaultTolerance(out.DType).ForReduction(k) }
}

// tolProb is for softmax over k terms. Its outputs are ratios of positive terms, so errors are
// relative: RTol scales with the sum's length (f32/f64 accumulate roundoff that grows like
// sqrt(k) units), but ATol must not grow, because probabilities shrink like 1/k and a scaled
// ATol would exceed them (the magnitude guard rejects that, rightly). For fp8 the default
// ATol of 1e-2 is itself above typical probabilities of a long row; it drops to one step of
// the format's subnormal spacing, the finest absolute resolution an fp8 output has and the
// largest error of a result that is one rounding away from the golden model's.
func tolProb(k int) tolRule {
	return func(out graph.Type) harness.Tolerance {
		d := harness.DefaultTolerance(out.DType)
		t := d.ForReduction(k)
		t.ATol = d.ATol
		switch out.DType {
		case numerics.F8E4M3:
			t.ATol = math.Ldexp(1, -9)
		case numerics.F8E5M2:
			t.ATol = math.Ldexp(1, -16)
		}
		return t
	}
}

// tolAttention is for attention over k keys. The output is a convex combination of V rows, so
// its size does not grow with k and neither does its absolute error: RTol takes the reduction
// scaling over the keys (the running sum of the softmax accumulates roundoff), ATol stays at
// the default (a sqrt(k)-scaled ATol would exceed the output itself, which averages towards
// zero). On top of that, f16/bf16 kernels round the probabilities P to the storage dtype before
// P x V (as tensor-core kernels do; the golden model does not), an error of one unit roundoff of
// the storage dtype per term that does not shrink where the output cancels to near zero: ATol
// grows to that unit roundoff (|V| is O(1) in the catalogue's data).
func tolAttention(k int) tolRule {
	return func(out graph.Type) harness.Tolerance {
		d := harness.DefaultTolerance(out.DType)
		t := d.ForReduction(k)
		t.ATol = d.ATol
		switch out.DType {
		case numerics.F16:
			t.ATol = math.Ldexp(1, -11)
		case numerics.BF16:
			t.ATol = math.Ldexp(1, -8)
		}
		return t
	}
}
