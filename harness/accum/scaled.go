package accum

import (
	"math"

	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
)

// ScaledMatmul is the error bound of every element of scaled_matmul(a [M,K], b [N,K], scale_a,
// scale_b) computed as m describes, in the output's row-major order:
//
//	bound[i,j] = m.Coef(K) * |scale_a*scale_b| * sum_k |a[i,k]| * |b[j,k]|
//
// It does not include the output dtype's rounding (the caller's tolerance covers that). A
// NaN or Inf term gives +Inf for that element; harness.CheckBound compares NaN/Inf positions
// exactly, so the bound of such an element is never used, and ScaledMatmul clamps it to 0.
func ScaledMatmul(m Model, a, b, scaleA, scaleB *tensor.Tensor) ([]float64, error) {
	if a == nil || b == nil || scaleA == nil || scaleB == nil {
		return nil, errs.New(errs.Input, "accum: scaled_matmul bound needs a, b, scale_a and scale_b")
	}
	if len(a.Shape) != 2 || len(b.Shape) != 2 || a.Shape[1] != b.Shape[1] {
		return nil, errs.New(errs.Shape, "accum: scaled_matmul bound needs a [M,K] and b [N,K], got %s and %s", a.TypeString(), b.TypeString())
	}
	if scaleA.Len() != 1 || scaleB.Len() != 1 {
		return nil, errs.New(errs.Shape, "accum: scaled_matmul bound needs per-tensor scales, got %s and %s", scaleA.TypeString(), scaleB.TypeString())
	}
	rows, cols, k := a.Shape[0], b.Shape[0], a.Shape[1]
	scale := math.Abs(scaleA.Float64(0) * scaleB.Float64(0))
	c := m.Coef(k) * scale
	absA, absB := absValues(a), absValues(b)
	out := make([]float64, rows*cols)
	for i := range rows {
		ra := absA[i*k : (i+1)*k]
		for j := range cols {
			rb := absB[j*k : (j+1)*k]
			var s float64
			for kk, x := range ra {
				s += x * rb[kk]
			}
			v := c * s
			if math.IsNaN(v) || math.IsInf(v, 0) {
				v = 0
			}
			out[i*cols+j] = v
		}
	}
	return out, nil
}

func absValues(t *tensor.Tensor) []float64 {
	v := t.Float64s()
	for i, x := range v {
		v[i] = math.Abs(x)
	}
	return v
}

// ForGraph is the bound of g's only output when g is one scaled_matmul of its own inputs (a
// golden or differential case of that op); ok is false for any other graph, which then keeps
// its plain tolerance.
func ForGraph(m Model, g *graph.Graph, in map[string]*tensor.Tensor) (bound []float64, ok bool, err error) {
	if g == nil || len(g.Nodes) != 1 || len(g.Outputs) != 1 {
		return nil, false, nil
	}
	n := g.Nodes[0]
	if n.Op != "scaled_matmul" || n.Output != g.Outputs[0] || len(n.Inputs) != 4 {
		return nil, false, nil
	}
	var ts [4]*tensor.Tensor
	for i, v := range n.Inputs {
		if ts[i] = in[v.Name]; ts[i] == nil {
			return nil, false, errs.New(errs.Input, "accum: graph %s: no input %%%s for node %s", g.Name, v.Name, n.Output.Name)
		}
	}
	bound, err = ScaledMatmul(m, ts[0], ts[1], ts[2], ts[3])
	return bound, err == nil, err
}
