package ref

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
)

var (
	nan  = math.NaN()
	inf  = math.Inf(1)
	negz = math.Copysign(0, -1)
	ln2  = math.Ln2
	ln3  = math.Log(3)
)

// tt builds a tensor of dtype dt holding vals (encoded with numerics.Encode).
func tt(dt numerics.DType, shape []int, vals ...float64) *tensor.Tensor {
	if len(vals) != tensor.NumElems(shape) {
		panic(fmt.Sprintf("tt: %d values for shape %v", len(vals), shape))
	}
	return tensor.FromFloat64(dt, shape, vals)
}

func sh(dims ...int) []int { return dims }

// runOp builds a one-node graph op(x0, x1, ...) over the given tensors and runs it.
func runOp(op string, attrs graph.Attrs, ins ...*tensor.Tensor) (*tensor.Tensor, error) {
	b := graph.NewBuilder("case")
	vals := make([]*graph.Value, len(ins))
	for i, t := range ins {
		vals[i] = b.Input(fmt.Sprintf("x%d", i), t.DType, t.Shape...)
	}
	b.Output(b.Op(op, attrs, vals...))
	g, err := b.Build()
	if err != nil {
		return nil, err
	}
	feed := map[string]*tensor.Tensor{}
	for i, t := range ins {
		feed[fmt.Sprintf("x%d", i)] = t
	}
	outs, err := Run(g, feed)
	if err != nil {
		return nil, err
	}
	return outs[0], nil
}

// sameValue: NaN matches NaN; with tol 0 the values and the signs of zero must match exactly;
// otherwise |got-want| <= tol*max(1, |want|), and infinities must match exactly.
func sameValue(got, want, tol float64) bool {
	switch {
	case math.IsNaN(want) || math.IsNaN(got):
		return math.IsNaN(want) && math.IsNaN(got)
	case tol == 0 || math.IsInf(want, 0):
		return got == want && math.Signbit(got) == math.Signbit(want)
	}
	return math.Abs(got-want) <= tol*max(1, math.Abs(want))
}

func expectTensor(t *testing.T, what string, got *tensor.Tensor, dt numerics.DType, shape []int, want []float64, tol float64) {
	t.Helper()
	if got.DType != dt || !slices.Equal(got.Shape, shape) {
		t.Fatalf("%s: got %s, want %s", what, got.TypeString(), tensor.TypeString(dt, shape))
	}
	for i, g := range got.Float64s() {
		if !sameValue(g, want[i], tol) {
			t.Errorf("%s: element %d = %v, want %v (tol %g); all: %v", what, i, g, want[i], tol, got.Float64s())
			return
		}
	}
}

func randTensor(r *rand.Rand, dt numerics.DType, shape ...int) *tensor.Tensor {
	vals := make([]float64, tensor.NumElems(shape))
	for i := range vals {
		vals[i] = r.Float64()*4 - 2
	}
	return tensor.FromFloat64(dt, shape, vals)
}

// transposed2 returns the explicit row-major copy of the transpose of each [R,C] matrix in a
// stack of them (shape [..., R, C] -> [..., C, R]), written without any ref code.
func transposed2(x *tensor.Tensor) *tensor.Tensor {
	r := len(x.Shape)
	rows, cols := x.Shape[r-2], x.Shape[r-1]
	shape := slices.Clone(x.Shape)
	shape[r-2], shape[r-1] = cols, rows
	out := tensor.New(x.DType, shape)
	for b := range x.Len() / (rows * cols) {
		for i := range rows {
			for j := range cols {
				out.SetBits(b*rows*cols+j*rows+i, x.Bits(b*rows*cols+i*cols+j))
			}
		}
	}
	return out
}
