package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/compiler"
	"github.com/tessera-qa/tessera-qa/engine/compiler/tile"
	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
)

var (
	nan  = math.NaN()
	inf  = math.Inf(1)
	negz = math.Copysign(0, -1)
)

// tt builds a tensor holding vals encoded in dt.
func tt(dt numerics.DType, shape []int, vals ...float64) *tensor.Tensor {
	return tensor.FromFloat64(dt, shape, vals)
}

func randTensor(rng *rand.Rand, dt numerics.DType, shape ...int) *tensor.Tensor {
	v := make([]float64, tensor.NumElems(shape))
	for i := range v {
		if dt.IsInt() {
			v[i] = float64(rng.IntN(19) - 9)
		} else {
			v[i] = rng.Float64()*4 - 2
		}
	}
	return tt(dt, shape, v...)
}

// runTile runs one hand-built kernel whose params are bufs[0], bufs[1], ... (in order), in
// place, on the given number of workers.
func runTile(k *tile.Kernel, workers int, bufs ...*tensor.Tensor) error {
	var buffers []compiler.Buffer
	var data [][]byte
	for i, b := range bufs {
		buffers = append(buffers, compiler.Buffer{Name: fmt.Sprintf("b%d", i), Type: graph.Type{DType: b.DType, Shape: b.Shape}})
		data = append(data, b.Data)
	}
	_, err := runKernel(k, buffers, data, newWorkers(workers))
	return err
}

// params declares one kernel param per buffer; outs marks which are written.
func params(bufs []*tensor.Tensor, outs ...int) []tile.Param {
	ps := make([]tile.Param, len(bufs))
	for i, b := range bufs {
		ps[i] = tile.Param{Buffer: i, Name: fmt.Sprintf("b%d", i), DType: b.DType, Len: b.Len()}
	}
	for _, o := range outs {
		ps[o].Output = true
	}
	return ps
}

// block2D is the access of the [rows, cols] tile at (rs, cs) of a row-major [m, n] buffer.
func block2D(param, m, n int, rs, cs tile.Expr, rows, cols int, mask bool) tile.Access {
	return tile.Access{Param: param, Base: tile.C(0), RowDims: []int{m}, RowStrides: []int{n},
		ColDims: []int{n}, ColStrides: []int{1}, RowStart: rs, ColStart: cs, Rows: rows, Cols: cols, Mask: mask}
}

// sameBits reports whether two float64s are the same value (NaN matches NaN; -0 != +0).
func sameBits(a, b float64) bool {
	if a != a || b != b {
		return a != a && b != b
	}
	return math.Float64bits(a) == math.Float64bits(b)
}

func wantValues(t *testing.T, what string, got *tensor.Tensor, want ...float64) {
	t.Helper()
	if got.Len() != len(want) {
		t.Fatalf("%s: %d values, want %d", what, got.Len(), len(want))
	}
	for i, w := range want {
		if g := got.Float64(i); !sameBits(g, w) {
			t.Errorf("%s[%d] = %v, want %v", what, i, g, w)
		}
	}
}

// closeTo compares got to want element-wise: |g-w| <= atol + rtol*|w|, NaN where NaN,
// infinities equal.
func closeTo(t *testing.T, what string, got, want *tensor.Tensor, rtol, atol float64) {
	t.Helper()
	if got.TypeString() != want.TypeString() {
		t.Fatalf("%s: got %s, want %s", what, got.TypeString(), want.TypeString())
	}
	bad := 0
	for i := range want.Len() {
		g, w := got.Float64(i), want.Float64(i)
		ok := (math.IsNaN(g) && math.IsNaN(w)) || g == w || math.Abs(g-w) <= atol+rtol*math.Abs(w)
		if !ok {
			if bad < 5 {
				t.Errorf("%s[%d] = %v, want %v (diff %.3g)", what, i, g, w, math.Abs(g-w))
			}
			bad++
		}
	}
	if bad > 0 {
		t.Errorf("%s: %d of %d elements out of tolerance", what, bad, want.Len())
	}
}
