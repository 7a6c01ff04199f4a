package ref

import (
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"math"
	"slices"

	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
)

// reduceOp folds the node's axes with f; mean divides the float fold by the element count.
func reduceOp(ff func(a, b float64) float64, fi func(a, b int64) int64, mean bool) impl {
	return func(n *graph.Node, in []*tensor.Tensor, out *tensor.Tensor) error {
		x := in[0]
		axes, err := graph.ReduceAxes(n, len(x.Shape))
		if err != nil {
			return errs.Wrap(errs.Shape, err, "ref: %s", nodeName(n))
		}
		if x.DType.IsFloat() {
			vals, count := fold(floatsOf(x), x.Shape, axes, ff)
			if mean {
				for i := range vals {
					vals[i] /= float64(count)
				}
			}
			putFloats(out, vals)
			return nil
		}
		if fi == nil {
			return floatOnly(n, x.DType)
		}
		vals, _ := fold(intsOf(x), x.Shape, axes, fi)
		putInts(out, vals)
		return nil
	}
}

// fold reduces axes of x (shape) with f, starting from each group's first element. Walking x
// row-major meets every group's elements in increasing index order, the order the op
// promises. The result's layout is the same with or without keepdims.
func fold[T scalar](x []T, shape, axes []int, f func(a, b T) T) (out []T, count int) {
	var kept []int
	count = 1
	for d, size := range shape {
		if slices.Contains(axes, d) {
			count *= size
		} else {
			kept = append(kept, size)
		}
	}
	keptStrides := tensor.Strides(kept)
	strides := make([]int, len(shape)) // 0 along reduced axes
	k := 0
	for d := range shape {
		if !slices.Contains(axes, d) {
			strides[d] = keptStrides[k]
			k++
		}
	}
	out = make([]T, product(kept))
	seen := make([]bool, len(out))
	for i, v := range x {
		o := index(i, shape, strides)
		if seen[o] {
			out[o] = f(out[o], v)
		} else {
			out[o], seen[o] = v, true
		}
	}
	return out, count
}

// rowwise applies f in place to every line of the input along the node's axis.
func rowwise(f func(row []float64)) impl {
	return func(n *graph.Node, in []*tensor.Tensor, out *tensor.Tensor) error {
		x := in[0]
		ax, err := graph.NormDim(int(n.IntAttr("axis")), len(x.Shape))
		if err != nil {
			return errs.Wrap(errs.Shape, err, "ref: %s: axis %d", nodeName(n), n.IntAttr("axis"))
		}
		shape := x.Shape
		if len(shape) == 0 {
			shape = []int{1} // a scalar is a row of one element
		}
		vals := floatsOf(x)
		if len(vals) == 0 {
			out.Data = out.Data[:0] // an empty axis or an empty batch of rows: an empty output, as torch
			return nil
		}
		length, inner := shape[ax], product(shape[ax+1:])
		row := make([]float64, length)
		for o := range product(shape[:ax]) {
			for i := range inner {
				base := o*length*inner + i
				for j := range row {
					row[j] = vals[base+j*inner]
				}
				f(row)
				for j := range row {
					vals[base+j*inner] = row[j]
				}
			}
		}
		putFloats(out, vals)
		return nil
	}
}

// rowShift returns max(row) and sum(exp(x-max)). A NaN max (NaN in the row) or Inf-Inf makes
// everything downstream NaN, which is the specified result for such rows.
func rowShift(row []float64) (m, sum float64) {
	if len(row) == 0 {
		return math.Inf(-1), 0 // no keys (attention with Sk = 0): nothing to normalise
	}
	m = row[0]
	for _, x := range row[1:] {
		m = max(m, x)
	}
	for _, x := range row {
		sum += math.Exp(x - m)
	}
	return m, sum
}

func softmaxRow(row []float64) {
	m, sum := rowShift(row)
	for j, x := range row {
		row[j] = math.Exp(x-m) / sum
	}
}

func logSoftmaxRow(row []float64) {
	m, sum := rowShift(row)
	for j, x := range row {
		row[j] = x - m - numerics.Log(sum)
	}
}

// layernorm: two-pass mean and biased variance over the last axis.
func layernorm(n *graph.Node, in []*tensor.Tensor, out *tensor.Tensor) error {
	x, gamma, beta := floatsOf(in[0]), floatsOf(in[1]), floatsOf(in[2])
	eps := n.FloatAttr("eps")
	length := len(gamma)
	for r := 0; r < len(x); r += length {
		row := x[r : r+length]
		var mean, variance float64
		for _, v := range row {
			mean += v
		}
		mean /= float64(length)
		for _, v := range row {
			variance += (v - mean) * (v - mean)
		}
		variance /= float64(length)
		sd := math.Sqrt(variance + eps)
		for j, v := range row {
			row[j] = (v-mean)/sd*gamma[j] + beta[j]
		}
	}
	putFloats(out, x)
	return nil
}

func rmsnorm(n *graph.Node, in []*tensor.Tensor, out *tensor.Tensor) error {
	x, gamma := floatsOf(in[0]), floatsOf(in[1])
	eps := n.FloatAttr("eps")
	length := len(gamma)
	for r := 0; r < len(x); r += length {
		row := x[r : r+length]
		var sq float64
		for _, v := range row {
			sq += v * v
		}
		rms := math.Sqrt(sq/float64(length) + eps)
		for j, v := range row {
			row[j] = v / rms * gamma[j]
		}
	}
	putFloats(out, x)
	return nil
}

func mseLoss(n *graph.Node, in []*tensor.Tensor, out *tensor.Tensor) error {
	a, b := floatsOf(in[0]), floatsOf(in[1])
	var sum float64
	for i := range a {
		d := a[i] - b[i]
		if n.StringAttr("reduction") == "none" {
			out.SetFloat64(i, d*d)
		}
		sum += d * d
	}
	switch n.StringAttr("reduction") {
	case "sum":
		out.SetFloat64(0, sum)
	case "mean":
		out.SetFloat64(0, sum/float64(len(a)))
	}
	return nil
}
