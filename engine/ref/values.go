package ref

import (
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
)

// scalar is the two domains the model computes in: float64 for every float dtype, int64 for
// integers and bool. Int64 arithmetic wraps mod 2^64, and 2^8 and 2^32 divide 2^64, so wrapping
// once at the end gives the same bits as wrapping after every step.
type scalar interface{ ~int64 | ~float64 }

func add[T scalar](a, b T) T { return a + b }
func sub[T scalar](a, b T) T { return a - b }
func mul[T scalar](a, b T) T { return a * b }

// Go's built-in max/min already propagate NaN and order -0 below +0, exactly the op semantics.
func maxOf[T scalar](a, b T) T { return max(a, b) }
func minOf[T scalar](a, b T) T { return min(a, b) }

func floatsOf(t *tensor.Tensor) []float64 { return t.Float64s() }

// intsOf reads integer or bool elements exactly (sign-extended; bool as 0/1).
func intsOf(t *tensor.Tensor) []int64 {
	out := make([]int64, t.Len())
	for i := range out {
		out[i] = intAt(t, i)
	}
	return out
}

func intAt(t *tensor.Tensor, i int) int64 {
	b := t.Bits(i)
	switch t.DType {
	case numerics.I8:
		return int64(int8(b))
	case numerics.I32:
		return int64(int32(b))
	case numerics.Bool:
		if b != 0 {
			return 1
		}
		return 0
	}
	return int64(b)
}

// putFloats rounds each value to out's dtype: the single rounding every node gets.
func putFloats(out *tensor.Tensor, vals []float64) {
	for i, v := range vals {
		out.SetFloat64(i, v)
	}
}

// putInts stores integer results, wrapped once to out's width.
func putInts(out *tensor.Tensor, vals []int64) {
	for i, v := range vals {
		setInt(out, i, v)
	}
}

// setInt wraps v to t's width (bool: nonzero is 1) and stores it.
func setInt(t *tensor.Tensor, i int, v int64) { t.SetBits(i, uint64(numerics.WrapInt(t.DType, v))) }

// index maps a flat index of shape to the flat index of another layout: coordinate d moves
// with stride strides[d] (0 for a broadcast axis). It walks dims from the last, row-major.
func index(flat int, shape, strides []int) int {
	off := 0
	for d := len(shape) - 1; d >= 0; d-- {
		off += (flat % shape[d]) * strides[d]
		flat /= shape[d]
	}
	return off
}

// product multiplies dims (1 for none).
func product(dims []int) int { return tensor.NumElems(dims) }
