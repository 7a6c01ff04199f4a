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
// It does not include the output dtype's rounding (the caller's tolerance covers that). An
// element with a NaN or Inf input gets 0: its output is NaN or Inf, whose position
// harness.CheckBound compares exactly, so no bound applies to it.
func ScaledMatmul(m Model, a, b, scaleA, scaleB *tensor.Tensor) ([]float64, error) {
	if err := checkScaled(a, b, scaleA, scaleB); err != nil {
		return nil, err
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
			out[i*cols+j] = finiteOrZero(c * s)
		}
	}
	return out, nil
}

func checkScaled(a, b, scaleA, scaleB *tensor.Tensor) error {
	if a == nil || b == nil || scaleA == nil || scaleB == nil {
		return errs.New(errs.Input, "accum: scaled_matmul bound needs a, b, scale_a and scale_b")
	}
	if len(a.Shape) != 2 || len(b.Shape) != 2 || a.Shape[1] != b.Shape[1] {
		return errs.New(errs.Shape, "accum: scaled_matmul bound needs a [M,K] and b [N,K], got %s and %s", a.TypeString(), b.TypeString())
	}
	if scaleA.Len() != 1 || scaleB.Len() != 1 {
		return errs.New(errs.Shape, "accum: scaled_matmul bound needs per-tensor scales, got %s and %s", scaleA.TypeString(), scaleB.TypeString())
	}
	return nil
}

func finiteOrZero(v float64) float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return 0
	}
	return v
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

// ScaledMatmulNorms is a cheaper, looser form of ScaledMatmul's bound for outputs too large to
// sum |a_ik|*|b_jk| over every (i, j, k) on a CPU (an 8192^3 GEMM): by Cauchy-Schwarz,
// sum_k |a_ik|*|b_jk| <= ||a_i||_2 * ||b_j||_2, which costs O((M+N)K). For zero-mean normal
// data it is about pi/2 times the exact sum. It bounds the same error, so it fails the same
// kinds of wrong kernels where the wrong result's error exceeds pi/2 times the model's.
func ScaledMatmulNorms(m Model, a, b, scaleA, scaleB *tensor.Tensor) ([]float64, error) {
	if err := checkScaled(a, b, scaleA, scaleB); err != nil {
		return nil, err
	}
	rows, cols, k := a.Shape[0], b.Shape[0], a.Shape[1]
	c := m.Coef(k) * math.Abs(scaleA.Float64(0)*scaleB.Float64(0))
	na, nb := rowNorms(a, rows, k), rowNorms(b, cols, k)
	out := make([]float64, rows*cols)
	for i, x := range na {
		for j, y := range nb {
			out[i*cols+j] = finiteOrZero(c * x * y)
		}
	}
	return out, nil
}

func rowNorms(t *tensor.Tensor, rows, k int) []float64 {
	v := t.Float64s()
	out := make([]float64, rows)
	for i := range rows {
		var s float64
		for _, x := range v[i*k : (i+1)*k] {
			s += x * x
		}
		out[i] = math.Sqrt(s)
	}
	return out
}
