package property

import (
	"math"
	"math/rand/v2"
	"slices"

	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
)

// source gives the perturbations: delta(i) in [-1, 1] scales the i-th one of a tensor, and
// node(k) is the source for the k-th node.
type source interface {
	delta(i int) float64
	node(k int) source
}

// rngSource draws each perturbation uniformly from [-1, 1].
type rngSource struct{ r *rand.Rand }

func randomSource(seed uint64) source { return rngSource{rand.New(rand.NewPCG(seed, 0x7e57))} }
func (s rngSource) delta(int) float64 { return 2*s.r.Float64() - 1 }
func (s rngSource) node(int) source   { return s }

// cyclic moves element i by -1, 0 or +1 as (i+phase) mod 3 is 0, 1 or 2; the phase advances
// by one per node, so an element moved one way in one node moves another way in the next.
type cyclic int

func (c cyclic) delta(i int) float64 { return float64((i+int(c))%3 - 1) }
func (c cyclic) node(k int) source   { return c + cyclic(k) }

// roundAway picks the value a correct engine may store for an exact result v whose computed
// form may be off by reach (relative) plus floor (absolute), given moved, the perturbed
// result, and dir: keep (|dir| <= 1/3) returns moved; down or up return moved if it already
// rounds to another value of dt than v does, else v moved the whole reach and floor that way
// if that does (the rare rounding flip, or a result in the subnormals, made certain so that a
// draw cannot miss it), else moved. Keeping matters as much as flipping: a product of flipped
// operands may be right only if it rounds the natural way. Values differ in the sign of a zero
// too (a division turns it into ±Inf), and a zero sum has no defined sign (the golden model's
// +0 plus -0 terms is +0, an accumulator started at -0 stays -0), so with sumZero an exact zero
// takes the other sign unless kept.
func roundAway(dt numerics.DType, v, reach, floor, moved float64, sumZero bool, dir float64) float64 {
	keep := math.Abs(dir) <= 1.0/3
	if math.IsNaN(v) || math.IsInf(v, 0) || keep {
		return moved
	}
	if v == 0 {
		if sumZero {
			return -v
		}
		return moved
	}
	r0 := numerics.Round(dt, v)
	differs := func(w float64) bool {
		rw := numerics.Round(dt, w)
		return rw != r0 || math.Signbit(rw) != math.Signbit(r0)
	}
	if differs(moved) {
		return moved // the draw already moved it to another value
	}
	w := v + math.Copysign(math.Abs(v)*reach+floor, dir)
	if differs(w) {
		return w
	}
	return moved
}

// scaleAll multiplies every element of an f64 tensor by one 1±rel, the sign drawn once.
func scaleAll(t *tensor.Tensor, r source, rel float64) {
	if rel == 0 {
		return
	}
	f := 1 + rel
	if r.delta(0) < 0 {
		f = 1 - rel
	}
	for i := range t.Len() {
		t.SetFloat64(i, t.Float64(i)*f)
	}
}

func toF64(t *tensor.Tensor) *tensor.Tensor {
	return &tensor.Tensor{DType: numerics.F64, Shape: slices.Clone(t.Shape), Data: tensor.FromFloat64(numerics.F64, t.Shape, t.Float64s()).Data}
}

// scaleEach multiplies every element of an f64 tensor by its own 1+δ, |δ| <= rel.
func scaleEach(t *tensor.Tensor, r source, rel float64) {
	for i := range t.Len() {
		t.SetFloat64(i, t.Float64(i)*(1+rel*r.delta(i)))
	}
}

// shiftEach moves every element of an f64 tensor by up to abs.
func shiftEach(t *tensor.Tensor, r source, abs float64) {
	for i := range t.Len() {
		t.SetFloat64(i, t.Float64(i)+abs*r.delta(i))
	}
}

// maxAbs is the largest finite magnitude in t (0 if it has none).
func maxAbs(t *tensor.Tensor) float64 {
	m := 0.0
	for i := range t.Len() {
		if a := math.Abs(t.Float64(i)); a > m && !math.IsInf(a, 0) {
			m = a
		}
	}
	return m
}

// rows calls fn with the flat indices of every row of shape along axis.
func rows(shape []int, axis int, fn func(idx []int)) {
	st := tensor.Strides(shape)
	n, step := shape[axis], st[axis]
	idx := make([]int, n)
	total := tensor.NumElems(shape)
	for base := range total {
		if (base/step)%n != 0 {
			continue // not the first element of its row
		}
		for j := range n {
			idx[j] = base + j*step
		}
		fn(idx)
	}
}

// towardMax moves each finite logit x by up to rel·|x - rowmax|.
func towardMax(t *tensor.Tensor, axis int, r source, rel float64) {
	rows(t.Shape, axis, func(idx []int) {
		m := math.Inf(-1)
		for _, i := range idx {
			m = math.Max(m, t.Float64(i))
		}
		if math.IsInf(m, 0) || math.IsNaN(m) {
			return
		}
		for _, i := range idx {
			// A -Inf logit (masked) stays: its exp is 0 however the row's max moves, where
			// moving it by a multiple of its infinite distance made it NaN, so every softmax
			// row with a masked entry was rejected as ill-conditioned.
			if x := t.Float64(i); !math.IsInf(x, 0) {
				t.SetFloat64(i, x+rel*r.delta(i)*math.Abs(x-m))
			}
		}
	})
}

// rowNoise scales each row by one 1+δ (shifts it by δ when additive), |δ| <= rel.
func rowNoise(t *tensor.Tensor, axis int, r source, rel float64, additive bool) {
	row := 0
	rows(t.Shape, axis, func(idx []int) {
		d := rel * r.delta(row)
		row++
		for _, i := range idx {
			if additive {
				t.SetFloat64(i, t.Float64(i)+d)
			} else {
				t.SetFloat64(i, t.Float64(i)*(1+d))
			}
		}
	})
}

// norm perturbs the output of a layernorm (centred) or rmsnorm, row by row (last axis), for
// what moving its inputs cannot reproduce: a layernorm subtracts a mean that is off by up to
// rel·|mean|, which shifts the normalized row by that over its deviation (the layernorm of two
// values is ±1 whatever they are, yet an f32 engine's is not); and the statistic it divides
// by, var+eps or mean(x²)+eps, is off by up to floor absolute (K+1 roundings at the
// accumulator's subnormal spacing), which matters when the statistic is tiny (an f16
// accumulator holds eps = 1e-6 only to 1.3%).
type norm struct {
	x, gamma, beta []float64
	eps, rel       float64
	floor          float64
	centred        bool
}

func (nm norm) perturb(t *tensor.Tensor, r source) {
	n := len(nm.gamma)
	for row := 0; row*n < len(nm.x); row++ {
		xs := nm.x[row*n : (row+1)*n]
		var sum, sq float64
		for _, v := range xs {
			sum += v
		}
		mean := 0.0
		if nm.centred {
			mean = sum / float64(n)
		}
		for _, v := range xs {
			sq += (v - mean) * (v - mean)
		}
		stat := sq/float64(n) + nm.eps
		if stat == 0 || math.IsNaN(stat) || math.IsInf(stat, 0) {
			continue
		}
		shift := nm.rel * r.delta(row) * math.Abs(mean) / math.Sqrt(stat)
		scale := 1 + math.Min(1, nm.floor/(2*stat))*r.delta(row+1)
		for j := range n {
			i := row*n + j
			var b float64
			if nm.beta != nil {
				b = nm.beta[j]
			}
			y := t.Float64(i) + nm.gamma[j]*shift
			t.SetFloat64(i, b+(y-b)*scale)
		}
	}
}

// flip moves each finite element of t one step up or down, or leaves it, at random; it never
// creates an Inf or NaN.
func flip(t *tensor.Tensor, r source) {
	if !t.DType.IsFloat() {
		return
	}
	sign := uint64(1) << (8*t.DType.Size() - 1)
	for i := range t.Len() {
		b := t.Bits(i)
		v := numerics.Decode(t.DType, b)
		if math.IsInf(v, 0) || math.IsNaN(v) {
			continue
		}
		mag := b &^ sign
		switch d := r.delta(i); {
		case d < -1.0/3:
			if mag > 0 {
				mag--
			}
		case d > 1.0/3:
			if w := numerics.Decode(t.DType, mag+1); !math.IsInf(w, 0) && !math.IsNaN(w) {
				mag++
			}
		}
		t.SetBits(i, b&sign|mag)
	}
}
