package rounding

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/tessera-qa/tessera-qa/engine/compiler"
	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
)

// Combo is one accumulator the verifier accepts for an op on inputs of one dtype.
type Combo struct {
	Op    string
	In    numerics.DType
	Accum numerics.DType
}

func (c Combo) String() string { return fmt.Sprintf("%s/%s/accum=%s", c.Op, c.In, c.Accum) }

// ReferenceOps are the accumulating ops Accum has a bit-exact model of.
var ReferenceOps = []string{"matmul", "batch_matmul", "reduce_sum", "reduce_mean", "reduce_max"}

// AccumCombos lists every (op, input dtype, accum) the verifier accepts, for the ops of
// ReferenceOps, in registry order: found by verifying a one-node graph for each candidate, so
// that a combination the registry starts to accept is drawn and checked without a change here.
func AccumCombos() []Combo {
	var out []Combo
	for _, d := range graph.Ops() {
		if !slices.Contains(ReferenceOps, d.Name) {
			continue
		}
		for _, in := range d.DTypes {
			for _, acc := range numerics.All {
				c := Combo{Op: d.Name, In: in, Accum: acc}
				if _, err := c.graph(Shape{M: 2, N: 2, K: 3, Rows: 2, Cols: 3}); err == nil {
					out = append(out, c)
				}
			}
		}
	}
	return out
}

// Shape sizes an accumulation case: M x K times K x N (Batch of them for batch_matmul), or
// Rows x Cols reduced along Cols (All: over every axis). TileHint, when set, is a matmul's
// tile attribute; the order of the K sum must not depend on it.
type Shape struct {
	Batch, M, N, K int
	TransA, TransB bool
	TileHint       []int64
	Rows, Cols     int
	All            bool
}

func (c Combo) graph(s Shape) (*graph.Graph, error) {
	b := graph.NewBuilder("accum_" + c.Op)
	attrs := graph.Attrs{"accum": graph.DTypeAttr(c.Accum)}
	switch c.Op {
	case "matmul", "batch_matmul":
		as, bs := []int{s.M, s.K}, []int{s.K, s.N}
		if s.TransA {
			as = []int{s.K, s.M}
		}
		if s.TransB {
			bs = []int{s.N, s.K}
		}
		if c.Op == "batch_matmul" {
			as, bs = append([]int{max(s.Batch, 1)}, as...), append([]int{max(s.Batch, 1)}, bs...)
		}
		if s.TransA {
			attrs["transpose_a"] = graph.Bool(true)
		}
		if s.TransB {
			attrs["transpose_b"] = graph.Bool(true)
		}
		if s.TileHint != nil {
			attrs["tile"] = graph.Ints(s.TileHint...)
		}
		b.Output(b.Op(c.Op, attrs, b.Input("a", c.In, as...), b.Input("b", c.In, bs...)))
	default:
		if !s.All {
			attrs["axes"] = graph.Ints(1)
		}
		b.Output(b.Op(c.Op, attrs, b.Input("x", c.In, s.Rows, s.Cols)))
	}
	return b.Build()
}

// AccumCase builds combo c on shape s with values from seed and computes the bits Tile IR's
// rules give (Accum), reading the reduce tile width from the schedule the compiler chose.
func AccumCase(c Combo, s Shape, seed uint64) (Case, error) {
	g, err := c.graph(s)
	if err != nil {
		return Case{}, err
	}
	r := rand.New(rand.NewPCG(seed, 0xacc))
	in := map[string]*tensor.Tensor{}
	vals := map[string][]float64{}
	for _, v := range g.Inputs {
		t, xs := accumInput(c.In, v.Type.Shape, r)
		in[v.Name], vals[v.Name] = t, xs
	}
	a := Accum{DType: c.Accum}
	out := g.Outputs[0].Type.DType
	var want []uint64
	store := func(v float64) {
		if out.IsInt() {
			want = append(want, WrapDType(out, int64(v)))
			return
		}
		want = append(want, EncodeDType(out, v))
	}
	switch c.Op {
	case "matmul", "batch_matmul":
		batch := max(s.Batch, 1)
		if c.Op == "matmul" {
			batch = 1
		}
		A, B := vals["a"], vals["b"]
		for bi := range batch {
			for i := range s.M {
				for j := range s.N {
					xs, ys := make([]float64, s.K), make([]float64, s.K)
					for k := range s.K {
						if s.TransA {
							xs[k] = A[bi*s.M*s.K+k*s.M+i]
						} else {
							xs[k] = A[bi*s.M*s.K+i*s.K+k]
						}
						if s.TransB {
							ys[k] = B[bi*s.K*s.N+j*s.K+k]
						} else {
							ys[k] = B[bi*s.K*s.N+k*s.N+j]
						}
					}
					store(a.Dot(xs, ys))
				}
			}
		}
	default:
		p, err := compiler.Compile(g, compiler.Options{})
		if err != nil {
			return Case{}, err
		}
		w := 0
		for _, sc := range p.Schedules {
			if sc.Kind == "reduce" {
				w = sc.BN
			}
		}
		if w == 0 {
			return Case{}, fmt.Errorf("%s: no reduce schedule", c)
		}
		fill := 0.0
		if c.Op == "reduce_max" {
			fill = math.Inf(-1)
			if c.Accum.IsInt() {
				fill = -numerics.MaxFinite(c.Accum) - 1
			}
		}
		x := vals["x"]
		rows, cols := s.Rows, s.Cols
		if s.All {
			rows, cols = 1, s.Rows*s.Cols
		}
		for i := range rows {
			store(a.ReduceRow(c.Op, x[i*cols:(i+1)*cols], w, fill))
		}
	}
	return Case{Name: "accum/" + c.String(), Graph: g, Inputs: in, Out: out, Want: want,
		Describe: func(i int) string { return fmt.Sprintf("output element %d", i) }}, nil
}

// accumInput fills a tensor of dtype d with values that make a narrow accumulator round:
// N(0,1) scaled by 2^e for e in [-4, 4] (ints: small values of both signs), and a stretch of
// equal positive values, on which a short accumulator stagnates. It returns the tensor and
// the exact values of its patterns.
func accumInput(d numerics.DType, shape []int, r *rand.Rand) (*tensor.Tensor, []float64) {
	t := tensor.New(d, shape)
	xs := make([]float64, t.Len())
	for i := range xs {
		var v float64
		switch {
		case d.IsInt():
			v = float64(r.IntN(17) - 8)
		case i%7 < 2:
			v = 1.5 // the stagnating stretch
		default:
			v = math.Ldexp(r.NormFloat64(), r.IntN(9)-4)
		}
		var bits uint64
		if d.IsInt() {
			bits = WrapDType(d, int64(v))
		} else {
			bits = EncodeDType(d, v)
		}
		t.SetBits(i, bits)
		xs[i] = DecodeDType(d, bits)
	}
	return t, xs
}

// AccumCases is one case per accepted combination, each crossing tiles: K = 70 (three K tiles
// of 32, the last ragged), rows of 300 (two reduce tiles of 256).
func AccumCases() ([]Case, error) {
	var out []Case
	for i, c := range AccumCombos() {
		s := Shape{Batch: 2, M: 3, N: 5, K: 70, Rows: 3, Cols: 300}
		cs, err := AccumCase(c, s, uint64(i))
		if err != nil {
			return nil, err
		}
		out = append(out, cs)
	}
	return out, nil
}
