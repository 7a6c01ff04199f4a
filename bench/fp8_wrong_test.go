package bench

import (
	"math"
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/engine/ref"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
	"github.com/tessera-qa/tessera-qa/harness"
	"github.com/tessera-qa/tessera-qa/harness/accum"
)

// kernelVariant computes scaled_matmul's output element (i, j) from a [M,K], b [N,K] (as
// float64 values) and the product of the scales, the way one kernel (right or wrong) would.
type kernelVariant struct {
	name  string
	right bool // a correct kernel: must pass the budget; every other one must fail it
	dot   func(a, b []float64, m, n, k, i, j int, sa, sb float64) float64
}

// truncate keeps bits fraction bits of x below the leading bit of 2^e, toward zero.
func truncate(x float64, e, bits int) float64 {
	q := math.Ldexp(1, e-bits)
	return math.Trunc(x/q) * q
}

// hopperDot emulates the model's hardware at its worst: per 32-product block, every operand
// (the running chunk sum and each product) is truncated to 13 fraction bits below the
// block's largest exponent, the sum is truncated again, each 128-k chunk is added to an f32
// accumulator, and the result is scaled in f32.
func hopperDot(a, b []float64, _, _, k, i, j int, sa, sb float64) float64 {
	var acc float32
	for c0 := 0; c0 < k; c0 += 128 {
		var s float64
		for b0 := c0; b0 < min(c0+128, k); b0 += 32 {
			ops := []float64{s}
			for kk := b0; kk < min(b0+32, c0+128, k); kk++ {
				ops = append(ops, a[i*k+kk]*b[j*k+kk])
			}
			var big float64
			for _, x := range ops {
				big = math.Max(big, math.Abs(x))
			}
			if big == 0 {
				continue
			}
			_, e := math.Frexp(big) // big in [2^(e-1), 2^e)
			var sum float64
			for _, x := range ops {
				sum += truncate(x, e-1, 13)
			}
			_, e = math.Frexp(sum)
			s = truncate(sum, e-1, 13)
		}
		acc += float32(s)
	}
	return float64(acc * float32(sa*sb))
}

var fp8Variants = []kernelVariant{
	{"exact f64 (engine/ref's arithmetic)", true, func(a, b []float64, _, _, k, i, j int, sa, sb float64) float64 {
		var s float64
		for kk := range k {
			s += a[i*k+kk] * b[j*k+kk]
		}
		return s * sa * sb
	}},
	{"13-bit truncating blocks, promoted every 128 k (the model's hardware)", true, hopperDot},
	{"B read as [K,N] (not transposed)", false, func(a, b []float64, _, n, k, i, j int, sa, sb float64) float64 {
		var s float64
		for kk := range k {
			s += a[i*k+kk] * b[kk*n+j]
		}
		return s * sa * sb
	}},
	{"scale_b dropped", false, func(a, b []float64, m, n, k, i, j int, sa, _ float64) float64 {
		return hopperDot(a, b, m, n, k, i, j, sa, 1)
	}},
	{"second k-chunk (k 128..255) missing", false, func(a, b []float64, _, _, k, i, j int, sa, sb float64) float64 {
		var s float64
		for kk := range k {
			if kk < 128 || kk >= 256 {
				s += a[i*k+kk] * b[j*k+kk]
			}
		}
		return s * sa * sb
	}},
	{"last k-chunk missing (the ragged tail)", false, func(a, b []float64, _, _, k, i, j int, sa, sb float64) float64 {
		var s float64
		for kk := range (k - 1) / 128 * 128 {
			s += a[i*k+kk] * b[j*k+kk]
		}
		return s * sa * sb
	}},
	{"one product (k = 5) dropped", false, func(a, b []float64, _, _, k, i, j int, sa, sb float64) float64 {
		var s float64
		for kk := range k {
			if kk != 5 {
				s += a[i*k+kk] * b[j*k+kk]
			}
		}
		return s * sa * sb
	}},
	{"all zeros", false, func([]float64, []float64, int, int, int, int, int, float64, float64) float64 { return 0 }},
}

// TestFP8BudgetFailsWrongKernels: under the GPU test's check (the output dtype's default
// tolerance plus HopperFP8's bound, harness.CheckBound), an emulation of the modelled hardware
// passes and a kernel with B not transposed, a dropped scale, a missing k-chunk, or all zeros
// fails, and so does one dropped product, on the GPU test's inputs (with its planted NaN, +-448 and subnormals) and three output
// dtypes. N = K in the square case so that reading B untransposed stays in bounds.
func TestFP8BudgetFailsWrongKernels(t *testing.T) {
	for _, c := range []struct {
		m, n, k int
		out     numerics.DType
	}{
		{200, 136, 272, numerics.BF16},
		{130, 72, 400, numerics.F16},
		{96, 384, 384, numerics.F32},
	} {
		g, in, err := fp8GemmCase(c.m, c.n, c.k, c.out)
		if err != nil {
			t.Fatal(err)
		}
		want, err := ref.Run(g, in)
		if err != nil {
			t.Fatal(err)
		}
		bound, err := accum.ScaledMatmul(accum.HopperFP8, in["a"], in["b"], in["scale_a"], in["scale_b"])
		if err != nil {
			t.Fatal(err)
		}
		a, b := in["a"].Float64s(), in["b"].Float64s()
		sa, sb := in["scale_a"].Float64(0), in["scale_b"].Float64(0)
		for _, v := range fp8Variants {
			if v.name == "B read as [K,N] (not transposed)" && c.n != c.k {
				continue
			}
			vals := make([]float64, c.m*c.n)
			for i := range c.m {
				for j := range c.n {
					vals[i*c.n+j] = v.dot(a, b, c.m, c.n, c.k, i, j, sa, sb)
				}
			}
			got := tensor.FromFloat64(c.out, []int{c.m, c.n}, vals)
			r := harness.CheckBound(got, want[0], harness.DefaultTolerance(c.out), bound)
			t.Logf("%dx%dx%d-%s %-70s pass %-5v %d of %d out; bound RMS %.3g, ref RMS %.3g",
				c.m, c.n, c.k, c.out, v.name, r.Pass, r.Mismatches, r.Elements, r.BoundRMS, r.RefRMS)
			if r.Pass != v.right {
				t.Errorf("%dx%dx%d-%s, %s: pass %v, want %v: %s", c.m, c.n, c.k, c.out, v.name, r.Pass, v.right, r.Reason)
			}
		}
	}
}

// cudaClass is an engine that reports itself as the H100 ("cuda/sm_90"), so that the bench
// applies the fp8 accumulator's bound, while computing on the CPU.
type cudaClass struct{ *fakeEngine }

func (c cudaClass) Device() (Device, error) {
	d, err := c.fakeEngine.Device()
	d.Class = "cuda/sm_90"
	return d, err
}

// TestBenchFP8GateUsesTheBound: on a cuda-class device the fp8gemm row is judged with the
// bf16 default tolerance plus the accumulator's bound (both checks carry a bound), an exact
// engine passes, and an engine whose element [0,0] is 2x+1 fails both checks; on the CPU
// class the row keeps its plain tolerance (no bound).
func TestBenchFP8GateUsesTheBound(t *testing.T) {
	cases, err := Select(Selection{Ops: []string{"fp8gemm"}, Shapes: []string{"fp8gemm:16x24x272"}})
	if err != nil {
		t.Fatal(err)
	}
	rows, _, err := Run(cudaClass{newFake(t, 1)}, RefOracle{MS: 1}, cases, Options{Reps: 3, Seed: 5})
	if err != nil {
		t.Fatal(err)
	}
	r := rows[0]
	if !r.Passed() || r.Check.BoundRMS <= 0 || r.RefCheck.BoundRMS <= 0 || r.Check.Tolerance != harness.DefaultTolerance(numerics.BF16) {
		t.Errorf("exact engine on cuda class: %s; bound RMS %g / %g, tolerance %s", r.Verdict(), r.Check.BoundRMS, r.RefCheck.BoundRMS, r.Check.Tolerance)
	}
	bad := newFake(t, 1)
	bad.corrupt = true
	rows, _, _ = Run(cudaClass{bad}, RefOracle{MS: 1}, cases, Options{Reps: 3, Seed: 5})
	if r := rows[0]; r.Check.Pass || r.RefCheck.Pass {
		t.Errorf("corrupted engine on cuda class passed: %s", r.Verdict())
	}
	rows, _, _ = Run(newFake(t, 1), RefOracle{MS: 1}, cases, Options{Reps: 3, Seed: 5})
	if r := rows[0]; !r.Passed() || r.Check.BoundRMS != 0 || r.RefCheck.BoundRMS != 0 {
		t.Errorf("cpu class: %s, bound RMS %g / %g (want none)", r.Verdict(), r.Check.BoundRMS, r.RefCheck.BoundRMS)
	}
}
