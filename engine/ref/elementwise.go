package ref

import (
	"math"

	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
)

func negF(x float64) float64  { return -x }
func absF(x float64) float64  { return math.Abs(x) }
func expF(x float64) float64  { return numerics.Exp(x) }
func logF(x float64) float64  { return numerics.Log(x) }
func sqrtF(x float64) float64 { return math.Sqrt(x) }
func tanhF(x float64) float64 { return math.Tanh(x) }

// reluF is max(x, 0) with the max semantics of the binary op: NaN stays NaN, -0 gives +0.
func reluF(x float64) float64 { return max(x, 0) }

// rsqrtF follows 1/sqrt(x) literally: rsqrt(+0) = +Inf, rsqrt(-0) = -Inf (as IEEE rSqrt).
func rsqrtF(x float64) float64 { return 1 / math.Sqrt(x) }

// sigmoid never forms e^|x| for large |x|, where 1+e^|x| would overflow to Inf/Inf.
func sigmoid(x float64) float64 {
	if x >= 0 {
		return 1 / (1 + math.Exp(-x))
	}
	e := math.Exp(x)
	return e / (1 + e)
}

// silu is x*sigmoid(x) literally, so silu(-Inf) = -Inf*0 = NaN, as torch computes it.
func silu(x float64) float64 { return x * sigmoid(x) }

func geluErf(x float64) float64 { return 0.5 * x * (1 + math.Erf(x/math.Sqrt2)) }

func geluTanh(x float64) float64 {
	return 0.5 * x * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(x+0.044715*x*x*x)))
}

// gelu checks approx here because the op's type rule does not look at attribute values.
func gelu(n *graph.Node, in []*tensor.Tensor, out *tensor.Tensor) error {
	var f func(float64) float64
	switch a := n.StringAttr("approx"); a {
	case "erf":
		f = geluErf
	case "tanh":
		f = geluTanh
	default:
		return errs.New(errs.Input, "ref: %s: approx %q is neither \"erf\" nor \"tanh\"", nodeName(n), a)
	}
	return unaryOp(f, nil)(n, in, out)
}

// unaryOp applies ff to float tensors and fi to integer ones; a nil fi marks a float-only op.
func unaryOp(ff func(float64) float64, fi func(int64) int64) impl {
	return func(n *graph.Node, in []*tensor.Tensor, out *tensor.Tensor) error {
		if in[0].DType.IsFloat() {
			putFloats(out, mapSlice(floatsOf(in[0]), ff))
			return nil
		}
		if fi == nil {
			return floatOnly(n, in[0].DType)
		}
		putInts(out, mapSlice(intsOf(in[0]), fi))
		return nil
	}
}

func mapSlice[T scalar](xs []T, f func(T) T) []T {
	out := make([]T, len(xs))
	for i, x := range xs {
		out[i] = f(x)
	}
	return out
}

// binaryOp broadcasts numpy-style; ff/fi as in unaryOp.
func binaryOp(ff func(a, b float64) float64, fi func(a, b int64) int64) impl {
	return func(n *graph.Node, in []*tensor.Tensor, out *tensor.Tensor) error {
		a, b := in[0], in[1]
		if a.DType.IsFloat() {
			putFloats(out, broadcastApply(floatsOf(a), a.Shape, floatsOf(b), b.Shape, out.Shape, ff))
			return nil
		}
		if fi == nil {
			return floatOnly(n, a.DType)
		}
		putInts(out, broadcastApply(intsOf(a), a.Shape, intsOf(b), b.Shape, out.Shape, fi))
		return nil
	}
}

func broadcastApply[T scalar](a []T, as []int, b []T, bs []int, os []int, f func(T, T) T) []T {
	sa, sb := broadcastStrides(as, os), broadcastStrides(bs, os)
	out := make([]T, product(os))
	for i := range out {
		out[i] = f(a[index(i, os, sa)], b[index(i, os, sb)])
	}
	return out
}

// broadcastStrides gives, per output axis, the stride of the operand along it: 0 where the
// operand has size 1 or lacks the axis (numpy aligns shapes at the last axis).
func broadcastStrides(shape, outShape []int) []int {
	st := make([]int, len(outShape))
	own := tensor.Strides(shape)
	lead := len(outShape) - len(shape)
	for d := lead; d < len(outShape); d++ {
		if shape[d-lead] != 1 {
			st[d] = own[d-lead]
		}
	}
	return st
}

func floatOnly(n *graph.Node, dt numerics.DType) error {
	return errs.New(errs.DType, "ref: %s: %s is defined for floats only, got %s", nodeName(n), n.Op, dt)
}

// cast: int->int wraps; everything else goes through numerics.Round, the one definition of
// conversion semantics (RNE, fp8 saturation, float->int truncate+saturate with NaN->0, x!=0).
func cast(n *graph.Node, in []*tensor.Tensor, out *tensor.Tensor) error {
	src, to := in[0], out.DType
	for i := range out.Len() {
		switch {
		case src.DType.IsFloat() && to.IsFloat():
			out.SetFloat64(i, numerics.Round(to, src.Float64(i)))
		case src.DType.IsFloat():
			setInt(out, i, int64(numerics.Round(to, src.Float64(i))))
		case to.IsFloat():
			out.SetFloat64(i, numerics.Round(to, float64(intAt(src, i))))
		default:
			setInt(out, i, intAt(src, i)) // wraps to the target width; bool takes nonzero as true
		}
	}
	return nil
}
