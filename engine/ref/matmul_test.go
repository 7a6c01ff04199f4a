package ref

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
)

// Each transpose flag must read the operand exactly as an explicitly transposed copy would be
// read without the flag; with the same K order the results are bitwise equal.
func TestMatmulTransposeFlags(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, c := range []struct {
		op     string
		as, bs []int
	}{
		{"matmul", sh(3, 4), sh(4, 5)},
		{"batch_matmul", sh(2, 3, 4), sh(2, 4, 5)},
	} {
		a, b := randTensor(r, f64, c.as...), randTensor(r, f64, c.bs...)
		plain, err := runOp(c.op, nil, a, b)
		if err != nil {
			t.Fatal(err)
		}
		for _, ta := range []bool{false, true} {
			for _, tb := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/ta=%v/tb=%v", c.op, ta, tb), func(t *testing.T) {
					ain, bin := a, b
					if ta {
						ain = transposed2(a)
					}
					if tb {
						bin = transposed2(b)
					}
					got, err := runOp(c.op, graph.Attrs{"transpose_a": graph.Bool(ta), "transpose_b": graph.Bool(tb)}, ain, bin)
					if err != nil {
						t.Fatal(err)
					}
					if got.Digest() != plain.Digest() {
						t.Errorf("got %v, want %v", got.Float64s(), plain.Float64s())
					}
				})
			}
		}
	}
}

// Square operands make every flag combination type-check, so a swapped flag would not be
// caught by shapes alone: the results of A^T B and A B must differ.
func TestMatmulFlagsMatter(t *testing.T) {
	a, b := tt(f64, sh(2, 2), 1, 2, 3, 4), tt(f64, sh(2, 2), 1, 0, 0, 1)
	got, err := runOp("matmul", graph.Attrs{"transpose_a": graph.Bool(true)}, a, b)
	if err != nil {
		t.Fatal(err)
	}
	expectTensor(t, "A^T I", got, f64, sh(2, 2), []float64{1, 3, 2, 4}, 0)
	got, err = runOp("matmul", graph.Attrs{"transpose_b": graph.Bool(true)}, b, a)
	if err != nil {
		t.Fatal(err)
	}
	expectTensor(t, "I A^T", got, f64, sh(2, 2), []float64{1, 3, 2, 4}, 0)
}

// attentionGraph builds attention(q, k, v) over [B1, B2, S, D] operands.
func attentionGraph(t *testing.T, q, k, v []int, attrs graph.Attrs) *graph.Graph {
	t.Helper()
	b := graph.NewBuilder("attn")
	b.Output(b.Op("attention", attrs, b.Input("q", f64, q...), b.Input("k", f64, k...), b.Input("v", f64, v...)))
	g, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// composedGraph is attention spelled out in other ops: batch_matmul(q, k^T) * scale + mask,
// softmax over keys, batch_matmul with v. mask is 0 or -Inf.
func composedGraph(t *testing.T, q, k, v []int) *graph.Graph {
	t.Helper()
	lead := q[0] * q[1]
	b := graph.NewBuilder("composed")
	qv, kv, vv := b.Input("q", f64, q...), b.Input("k", f64, k...), b.Input("v", f64, v...)
	scale := b.Input("scale", f64)
	mask := b.Input("mask", f64, q[2], k[2])
	q3 := b.Op("reshape", graph.Attrs{"shape": graph.Ints(int64(lead), int64(q[2]), int64(q[3]))}, qv)
	k3 := b.Op("reshape", graph.Attrs{"shape": graph.Ints(int64(lead), int64(k[2]), int64(k[3]))}, kv)
	v3 := b.Op("reshape", graph.Attrs{"shape": graph.Ints(int64(lead), int64(v[2]), int64(v[3]))}, vv)
	s := b.Op("batch_matmul", graph.Attrs{"transpose_b": graph.Bool(true)}, q3, k3)
	p := b.Op("softmax", nil, b.Op("add", nil, b.Op("mul", nil, s, scale), mask))
	o := b.Op("batch_matmul", nil, p, v3)
	b.Output(b.Op("reshape", graph.Attrs{"shape": graph.Ints(int64(q[0]), int64(q[1]), int64(q[2]), int64(v[3]))}, o))
	g, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func TestAttentionMatchesComposition(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, c := range []struct {
		sq, sk, d, dv int
		causal        bool
		scale         float64 // 0: attribute absent
	}{
		{5, 6, 4, 3, false, 0},
		{5, 6, 4, 3, true, 0},
		{7, 3, 8, 2, true, 0.3},
		{4, 4, 2, 5, false, 1.7},
		{1, 9, 16, 4, true, 0},
	} {
		t.Run(fmt.Sprintf("sq%d_sk%d_d%d_causal%v_scale%g", c.sq, c.sk, c.d, c.causal, c.scale), func(t *testing.T) {
			qs, ks, vs := sh(2, 3, c.sq, c.d), sh(2, 3, c.sk, c.d), sh(2, 3, c.sk, c.dv)
			attrs := graph.Attrs{"causal": graph.Bool(c.causal)}
			scale := 1 / math.Sqrt(float64(c.d))
			if c.scale != 0 {
				attrs["scale"] = graph.Float(c.scale)
				scale = c.scale
			}
			q, k, v := randTensor(r, f64, qs...), randTensor(r, f64, ks...), randTensor(r, f64, vs...)
			mask := tensor.New(f64, sh(c.sq, c.sk))
			for i := range c.sq {
				for j := range c.sk {
					if c.causal && j > i {
						mask.SetFloat64(i*c.sk+j, math.Inf(-1))
					}
				}
			}
			got, err := Run(attentionGraph(t, qs, ks, vs, attrs), map[string]*tensor.Tensor{"q": q, "k": k, "v": v})
			if err != nil {
				t.Fatal(err)
			}
			want, err := Run(composedGraph(t, qs, ks, vs), map[string]*tensor.Tensor{
				"q": q, "k": k, "v": v, "mask": mask, "scale": tt(f64, nil, scale)})
			if err != nil {
				t.Fatal(err)
			}
			expectTensor(t, "attention", got[0], f64, want[0].Shape, want[0].Float64s(), 1e-12)
		})
	}
}

// With the causal mask, query 0 sees only key 0, so its output is exactly v[0] in every batch.
func TestAttentionCausalFirstRow(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	q, k, v := randTensor(r, f32, 3, 4, 8), randTensor(r, f32, 3, 6, 8), randTensor(r, f32, 3, 6, 5)
	got, err := runOp("attention", graph.Attrs{"causal": graph.Bool(true)}, q, k, v)
	if err != nil {
		t.Fatal(err)
	}
	for b := range 3 {
		for c := range 5 {
			if g, w := got.Bits((b*4)*5+c), v.Bits((b*6)*5+c); g != w {
				t.Errorf("batch %d col %d: %v, want v[0] = %v", b, c, got.Float64((b*4)*5+c), v.Float64((b*6)*5+c))
			}
		}
	}
	// Without the mask the first row mixes all keys and must differ somewhere.
	free, err := runOp("attention", nil, q, k, v)
	if err != nil {
		t.Fatal(err)
	}
	if free.Bits(0) == v.Bits(0) && free.Bits(1) == v.Bits(1) {
		t.Error("non-causal first row equals v[0]: the mask has no effect")
	}
}

// A NaN in one query row poisons that row only; rows are independent.
func TestAttentionNaNStaysInRow(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	q, k, v := randTensor(r, f64, 3, 4), randTensor(r, f64, 5, 4), randTensor(r, f64, 5, 2)
	q.SetFloat64(1*4+2, math.NaN())
	got, err := runOp("attention", nil, q, k, v)
	if err != nil {
		t.Fatal(err)
	}
	for i, x := range got.Float64s() {
		if row := i / 2; math.IsNaN(x) != (row == 1) {
			t.Errorf("element %d (row %d) = %v", i, row, x)
		}
	}
}
