package cpu

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/compiler"
	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/engine/ref"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
)

// graphCase is one small graph compiled with the real compiler and run against engine/ref.
type graphCase struct {
	name  string
	build func(b *graph.Builder)
	// rtol is the relative tolerance; accumulations in f32 over K terms need more than one ulp.
	rtol, atol float64
}

func in(b *graph.Builder, name string, dt numerics.DType, shape ...int) *graph.Value {
	return b.Input(name, dt, shape...)
}

var (
	f32, f64, f16, bf16 = numerics.F32, numerics.F64, numerics.F16, numerics.BF16
)

var graphCases = []graphCase{
	{"matmul/f32/ragged", func(b *graph.Builder) {
		b.Output(b.Op("matmul", nil, in(b, "a", f32, 37, 70), in(b, "b", f32, 70, 45)))
	}, 1e-5, 1e-5},
	{"matmul/f64/transpose", func(b *graph.Builder) {
		b.Output(b.Op("matmul", graph.Attrs{"transpose_a": graph.Bool(true), "transpose_b": graph.Bool(true)},
			in(b, "a", f64, 33, 20), in(b, "b", f64, 17, 33)))
	}, 1e-12, 1e-12},
	{"matmul/bf16", func(b *graph.Builder) {
		b.Output(b.Op("matmul", nil, in(b, "a", bf16, 16, 64), in(b, "b", bf16, 64, 24)))
	}, 1.6e-2, 1e-2},
	{"matmul/f16/accum-f16", func(b *graph.Builder) {
		b.Output(b.Op("matmul", graph.Attrs{"accum": graph.DTypeAttr(f16)}, in(b, "a", f16, 8, 16), in(b, "b", f16, 16, 8)))
	}, 1e-2, 2e-2},
	{"matmul/int32", func(b *graph.Builder) {
		b.Output(b.Op("matmul", nil, in(b, "a", numerics.I32, 9, 13), in(b, "b", numerics.I32, 13, 5)))
	}, 0, 0},
	{"batch_matmul/f32", func(b *graph.Builder) {
		b.Output(b.Op("batch_matmul", nil, in(b, "a", f32, 3, 10, 12), in(b, "b", f32, 3, 12, 9)))
	}, 1e-5, 1e-5},
	{"scaled_matmul/bf16/ragged", func(b *graph.Builder) {
		b.Output(b.Op("scaled_matmul", nil, in(b, "a", numerics.F8E4M3, 37, 70), in(b, "b", numerics.F8E4M3, 45, 70),
			in(b, "sa", f32), in(b, "sb", f32, 1)))
	}, 1.6e-2, 1e-3},
	{"scaled_matmul/f32", func(b *graph.Builder) {
		b.Output(b.Op("scaled_matmul", graph.Attrs{"out_dtype": graph.DTypeAttr(f32)}, in(b, "a", numerics.F8E4M3, 16, 96),
			in(b, "b", numerics.F8E4M3, 24, 96), in(b, "sa", f32, 1), in(b, "sb", f32)))
	}, 1e-5, 1e-5},
	{"elementwise/fused", func(b *graph.Builder) {
		x, y := in(b, "x", f32, 4, 300), in(b, "y", f32, 300)
		s := b.Op("add", nil, x, y)
		b.Output(b.Op("gelu", graph.Attrs{"approx": graph.String("tanh")}, b.Op("mul", nil, s, b.Op("sigmoid", nil, s))))
	}, 2e-6, 1e-6},
	{"elementwise/f16", func(b *graph.Builder) {
		x, y := in(b, "x", f16, 5, 7), in(b, "y", f16, 5, 1)
		b.Output(b.Op("maximum", nil, b.Op("exp", nil, x), b.Op("tanh", nil, y)))
	}, 1e-3, 1e-5},
	{"elementwise/int8-wrap", func(b *graph.Builder) {
		x := in(b, "x", numerics.I8, 50)
		b.Output(b.Op("mul", nil, b.Op("add", nil, x, x), x))
	}, 0, 0},
	{"softmax/f32", func(b *graph.Builder) {
		b.Output(b.Op("softmax", nil, in(b, "x", f32, 9, 300)))
	}, 1e-5, 1e-7},
	{"log_softmax/f64/axis0", func(b *graph.Builder) {
		b.Output(b.Op("log_softmax", graph.Attrs{"axis": graph.Int(0)}, in(b, "x", f64, 20, 3)))
	}, 1e-12, 1e-12},
	{"layernorm/f32", func(b *graph.Builder) {
		b.Output(b.Op("layernorm", nil, in(b, "x", f32, 6, 270), in(b, "g", f32, 270), in(b, "be", f32, 270)))
	}, 1e-4, 1e-5},
	{"rmsnorm/bf16", func(b *graph.Builder) {
		b.Output(b.Op("rmsnorm", nil, in(b, "x", bf16, 6, 40), in(b, "g", bf16, 40)))
	}, 1.6e-2, 1e-5},
	{"reduce_sum/f32/axes", func(b *graph.Builder) {
		b.Output(b.Op("reduce_sum", graph.Attrs{"axes": graph.Ints(0, 2)}, in(b, "x", f32, 7, 5, 40)))
	}, 1e-5, 1e-5},
	{"reduce_max/int32", func(b *graph.Builder) {
		b.Output(b.Op("reduce_max", nil, in(b, "x", numerics.I32, 300)))
	}, 0, 0},
	{"reduce_mean/f64", func(b *graph.Builder) {
		b.Output(b.Op("reduce_mean", graph.Attrs{"axes": graph.Ints(-1)}, in(b, "x", f64, 3, 1000)))
	}, 1e-12, 1e-12},
	{"attention/f32/causal", func(b *graph.Builder) {
		b.Output(b.Op("attention", graph.Attrs{"causal": graph.Bool(true)},
			in(b, "q", f32, 2, 70, 16), in(b, "k", f32, 2, 70, 16), in(b, "v", f32, 2, 70, 8)))
	}, 1e-4, 1e-5},
	{"attention/bf16", func(b *graph.Builder) {
		b.Output(b.Op("attention", nil, in(b, "q", bf16, 33, 8), in(b, "k", bf16, 20, 8), in(b, "v", bf16, 20, 8)))
	}, 3e-2, 1e-2},
	{"movement/transpose+slice+concat", func(b *graph.Builder) {
		x := in(b, "x", f32, 3, 4, 5)
		t := b.Op("transpose", graph.Attrs{"perm": graph.Ints(2, 0, 1)}, x)
		s := b.Op("slice", graph.Attrs{"starts": graph.Ints(1, 0, 1), "ends": graph.Ints(4, 3, 3)}, t)
		b.Output(b.Op("concat", graph.Attrs{"axis": graph.Int(2)}, s, b.Op("reshape", graph.Attrs{"shape": graph.Ints(3, 3, 2)}, s)))
	}, 0, 0},
	{"mse_loss/f32", func(b *graph.Builder) {
		b.Output(b.Op("mse_loss", nil, in(b, "a", f32, 50, 41), in(b, "b", f32, 50, 41)))
	}, 1e-5, 1e-6},
	{"cast/f32->fp8+int8", func(b *graph.Builder) {
		x := in(b, "x", f32, 64)
		b.Output(b.Op("cast", graph.Attrs{"to": graph.DTypeAttr(numerics.F8E4M3)}, x),
			b.Op("cast", graph.Attrs{"to": graph.DTypeAttr(numerics.I8)}, b.Op("mul", nil, x, x)))
	}, 0, 0},
}

func buildGraph(t *testing.T, name string, f func(b *graph.Builder)) *graph.Graph {
	t.Helper()
	b := graph.NewBuilder("g")
	f(b)
	g, err := b.Build()
	if err != nil {
		t.Fatalf("%s: build: %v", name, err)
	}
	return g
}

func randInputs(g *graph.Graph, seed uint64) map[string]*tensor.Tensor {
	rng := rand.New(rand.NewPCG(seed, 7))
	feed := map[string]*tensor.Tensor{}
	for _, v := range g.Inputs {
		feed[v.Name] = randTensor(rng, v.Type.DType, v.Type.Shape...)
	}
	return feed
}

func TestCompiledGraphsMatchRef(t *testing.T) {
	be := &Backend{}
	for _, c := range graphCases {
		t.Run(c.name, func(t *testing.T) {
			g := buildGraph(t, c.name, c.build)
			p, err := compiler.Compile(g, compiler.Options{})
			if err != nil {
				t.Fatalf("compile: %v", err)
			}
			feed := randInputs(g, 1)
			got, err := be.Run(p, feed)
			if err != nil {
				t.Fatalf("run: %v", err)
			}
			want, err := ref.Run(g, feed)
			if err != nil {
				t.Fatalf("ref: %v", err)
			}
			for i := range want {
				closeTo(t, g.Outputs[i].Name, got[i], want[i], c.rtol, c.atol)
				if nonzero(want[i]) == 0 && want[i].Len() > 4 {
					t.Errorf("reference output %d is all zero: the comparison would be meaningless", i)
				}
			}
		})
	}
}

func nonzero(t *tensor.Tensor) int {
	n := 0
	for i := range t.Len() {
		if v := t.Float64(i); v != 0 && !math.IsNaN(v) {
			n++
		}
	}
	return n
}

// The compiler materializes transposed GEMM operands (pass gemm-operands); the bits must be
// those of the flagged matmul, which reads the operand through strides.
func TestMaterializedTransposesKeepTheMatmulBits(t *testing.T) {
	b := graph.NewBuilder("mmT")
	b.Output(b.Op("batch_matmul", graph.Attrs{"transpose_a": graph.Bool(true), "transpose_b": graph.Bool(true)},
		in(b, "a", bf16, 2, 29, 37), in(b, "b", bf16, 2, 41, 29)))
	g, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(7, 7))
	inputs := map[string]*tensor.Tensor{}
	for _, v := range g.Inputs {
		x := tensor.New(v.Type.DType, v.Type.Shape)
		for i := range x.Len() {
			x.SetFloat64(i, r.NormFloat64())
		}
		inputs[v.Name] = x
	}
	var digests []string
	for _, skip := range [][]string{nil, {"gemm-operands"}} {
		p, err := compiler.Compile(g, compiler.Options{Skip: skip})
		if err != nil {
			t.Fatal(err)
		}
		out, err := (&Backend{}).Run(p, inputs)
		if err != nil {
			t.Fatal(err)
		}
		digests = append(digests, out[0].Digest())
	}
	if digests[0] != digests[1] {
		t.Fatalf("materialized %s, flagged %s", digests[0], digests[1])
	}
}
