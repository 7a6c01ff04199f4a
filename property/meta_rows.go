package property

import (
	"math"
	"math/rand/v2"

	"pgregory.net/rapid"

	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
)

var softmaxShift = Property{
	Name:   "meta/softmax-shift",
	Ops:    []string{"softmax", "log_softmax"},
	Judged: "tolerance",
	Checks: 300,
	Doc: "softmax(x + c) = softmax(x) and log_softmax likewise, for a shift c constant along the " +
		"axis; x and c are multiples of one power of two, so x + c is exact and any difference is the kernel's",
	Body: func(e Env) func(*rapid.T) {
		return func(t *rapid.T) {
			dt, op, shape, axis, q, spread, lift := softmaxShiftDraws(t, e)
			p := mantissaBits(dt) + 1
			perRow := rapid.Bool().Draw(t, "per_row_shift")
			seed := rapid.Uint64().Draw(t, "seed")
			cshape := []int{1}
			if perRow {
				cshape = append([]int{}, shape...)
				cshape[axis] = 1
			}
			in := map[string]*tensor.Tensor{}
			b := graph.NewBuilder("softmax_shift")
			x := input(b, in, "x", lift(quantized(dt, shape, q, spread, seed)))
			c := input(b, in, "c", quantized(dt, cshape, q, p-2, seed+1))
			attrs := graph.Attrs{"axis": graph.Int(int64(axis))}
			lhs := b.Op(op, attrs, x)
			rhs := b.Op(op, attrs, b.Op("add", nil, x, c))
			b.Output(lhs, rhs)
			e.relation(t, "meta/softmax-shift", build(t, b), in,
				side{got: 1, want: 0, tol: policy(shape[axis]), what: op + "(x+c) vs " + op + "(x)"})
		}
	},
}

// exponentRange bounds the quantum 2^q of quantized values with p significant bits: every
// multiple up to 2^(p-1) quanta must be a normal finite number of dt.
func exponentRange(dt numerics.DType, p int) (lo, hi int) {
	lo = math.Ilogb(minNormal(dt))
	hi = math.Ilogb(numerics.MaxFinite(dt)) - p
	return max(lo, -8), min(hi, 8)
}

// quantized fills a tensor with k·2^q, k uniform in [-2^spread, 2^spread].
func quantized(dt numerics.DType, shape []int, q, spread int, seed uint64) *tensor.Tensor {
	t := tensor.New(dt, shape)
	r := rand.New(rand.NewPCG(seed, 0x9a7))
	n := 1 << spread
	for i := range t.Len() {
		k := r.IntN(2*n+1) - n
		t.SetFloat64(i, math.Ldexp(float64(k), q))
	}
	return t
}

var normScale = Property{
	Name:   "meta/norm-scale",
	Ops:    []string{"layernorm", "rmsnorm"},
	Judged: "tolerance",
	Checks: 300,
	Doc: "layernorm(αx) = layernorm(x) and rmsnorm(αx) = rmsnorm(x) for α > 0 and eps = 0; α is a " +
		"power of two (the scaling is then exact) or, for f32 and f64, any value (x·α then rounds " +
		"once, which a 16-bit result would amplify past its tolerance)",
	Body: func(e Env) func(*rapid.T) {
		return func(t *rapid.T) {
			dt := drawDType(t, numerics.F32, numerics.F64, numerics.F16, numerics.BF16)
			op := rapid.SampledFrom([]string{"layernorm", "rmsnorm"}).Draw(t, "op")
			s := drawDims(t, "dim", 2, e.Config.MaxElems)
			s[1] = max(s[1], 2)
			wide := dt == numerics.F32 || dt == numerics.F64
			var alpha float64
			if !wide || rapid.Bool().Draw(t, "power_of_two") {
				w := 4
				if wide {
					w = 20
				}
				alpha = math.Ldexp(1, rapid.IntRange(-w, w).Draw(t, "alpha_exp"))
			} else {
				alpha = numerics.Round(dt, rapid.Float64Range(0.25, 4).Draw(t, "alpha"))
			}
			class := rapid.SampledFrom([]Class{ClassNormal, ClassUniform, ClassPositive}).Draw(t, "class")
			seed := rapid.Uint64().Filter(func(seed uint64) bool {
				return op == "rmsnorm" || spreadRows(Fill(dt, s, class, seed), 8)
			}).Draw(t, "seed")
			x := Fill(dt, s, class, seed)
			in := map[string]*tensor.Tensor{}
			b := graph.NewBuilder("norm_scale")
			xv := input(b, in, "x", x)
			params := []*graph.Value{input(b, in, "gamma", Fill(dt, s[1:], ClassPositive, 7))}
			if op == "layernorm" {
				params = append(params, input(b, in, "beta", Fill(dt, s[1:], ClassNormal, 8)))
			}
			a := input(b, in, "alpha", tensor.FromFloat64(dt, []int{1}, []float64{alpha}))
			attrs := graph.Attrs{"eps": graph.Float(0)}
			lhs := b.Op(op, attrs, append([]*graph.Value{xv}, params...)...)
			rhs := b.Op(op, attrs, append([]*graph.Value{b.Op("mul", nil, xv, a)}, params...)...)
			b.Output(lhs, rhs)
			e.relation(t, "meta/norm-scale", build(t, b), in, side{got: 1, want: 0, tol: policy(s[1]), what: op + "(αx) vs " + op + "(x)"})
		}
	},
}

// spreadRows reports whether every row (last axis) of x has a standard deviation of at least
// 1/c of its largest magnitude: layernorm divides by it, so a nearly constant row turns the
// rounding of αx into a large change of the output, a property of the data, not the kernel.
func spreadRows(x *tensor.Tensor, c float64) bool {
	n := x.Shape[len(x.Shape)-1]
	for start := 0; start < x.Len(); start += n {
		var sum, sq, peak float64
		for i := start; i < start+n; i++ {
			v := x.Float64(i)
			sum += v
			peak = math.Max(peak, math.Abs(v))
		}
		mean := sum / float64(n)
		for i := start; i < start+n; i++ {
			d := x.Float64(i) - mean
			sq += d * d
		}
		if math.Sqrt(sq/float64(n))*c < peak {
			return false
		}
	}
	return true
}
