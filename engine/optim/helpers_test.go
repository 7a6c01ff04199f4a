package optim

import (
	"bytes"
	"maps"
	"math"
	"math/big"
	"math/rand/v2"
	"slices"

	_ "github.com/tessera-qa/tessera-qa/engine/backend/cpu"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
)

// randn fills a tensor with seeded normal values times scale, never exactly zero unless
// zeros is set (then about one element in 16 is 0).
func randn(rng *rand.Rand, dt numerics.DType, shape []int, scale float64, zeros bool) *tensor.Tensor {
	v := make([]float64, tensor.NumElems(shape))
	for i := range v {
		for v[i] == 0 {
			v[i] = rng.NormFloat64() * scale
		}
		if zeros && rng.IntN(16) == 0 {
			v[i] = 0
		}
	}
	return tensor.FromFloat64(dt, shape, v)
}

func cloneAll(m map[string]*tensor.Tensor) map[string]*tensor.Tensor {
	out := map[string]*tensor.Tensor{}
	for k, t := range m {
		out[k] = t.Clone()
	}
	return out
}

// sameBits reports the first name whose tensors differ in type or bytes, "" if none.
func sameBits(a, b map[string]*tensor.Tensor) string {
	for _, k := range slices.Sorted(maps.Keys(a)) {
		x, y := a[k], b[k]
		if y == nil || !sameType(x, y) || !bytes.Equal(x.Data, y.Data) {
			return k
		}
	}
	for k := range b {
		if a[k] == nil {
			return k
		}
	}
	return ""
}

// maxULP is the largest ULP distance between two tensors of one dtype, and the largest
// absolute difference.
func maxULP(a, b *tensor.Tensor) (ulp uint64, abs float64) {
	for i := range a.Len() {
		ulp = max(ulp, numerics.ULPDistance(a.DType, a.Bits(i), b.Bits(i)))
		abs = max(abs, math.Abs(a.Float64(i)-b.Float64(i)))
	}
	return ulp, abs
}

// fma32 is x*y+z rounded once to f32, computed exactly with math/big: an independent
// reference for the graph's f64 emulation.
func fma32(x, y, z float32) float32 {
	p := new(big.Float).SetPrec(200).SetFloat64(float64(x))
	p.Mul(p, new(big.Float).SetPrec(200).SetFloat64(float64(y)))
	p.Add(p, new(big.Float).SetPrec(200).SetFloat64(float64(z)))
	f, _ := p.Float32()
	return f
}
