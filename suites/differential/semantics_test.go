package differential_test

import (
	"fmt"
	"math"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/tessera-qa/tessera-qa/differential"
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/engine/ref"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
	"github.com/tessera-qa/tessera-qa/golden"
	"github.com/tessera-qa/tessera-qa/harness"
)

// One spec per place where Tessera's contract and torch's behaviour differ (the Notes of
// differential.Mapping): each shows what torch does by itself (a native request) and that the
// oracle's mapping agrees with the engine.

var (
	f32  = numerics.F32
	cpu  = differential.Target{Device: "cpu"}
	raw  = differential.Target{Device: "cpu", Native: true}
	inf  = math.Inf(1)
	nan  = math.NaN()
	ftol = harness.DefaultTolerance(numerics.F32)
)

func buildGraph(f func(b *graph.Builder) *graph.Value) *graph.Graph {
	b := graph.NewBuilder("semantics")
	b.Output(f(b))
	g, err := b.Build()
	Expect(err).NotTo(HaveOccurred())
	return g
}

func vec(dt numerics.DType, vs ...float64) *tensor.Tensor {
	return tensor.FromFloat64(dt, []int{len(vs)}, vs)
}

func onEngine(g *graph.Graph, in map[string]*tensor.Tensor) *tensor.Tensor {
	outs, err := differential.RunEngine(engine("cpu"), g, in)
	Expect(err).NotTo(HaveOccurred())
	return outs[0]
}

func onTorch(t differential.Target, g *graph.Graph, in map[string]*tensor.Tensor) *tensor.Tensor {
	outs, _, err := torchOracle.get().RunGraph(t, g, in)
	Expect(err).NotTo(HaveOccurred())
	return outs[0]
}

func unaryGraph(op string, dt numerics.DType, attrs graph.Attrs, n int) *graph.Graph {
	return buildGraph(func(b *graph.Builder) *graph.Value { return b.Op(op, attrs, b.Input("x", dt, n)) })
}

func castGraph(from, to numerics.DType, n int) *graph.Graph {
	return unaryGraph("cast", from, graph.Attrs{"to": graph.DTypeAttr(to)}, n)
}

var _ = Describe("semantic differences with torch", Label("cpu", "torch"), func() {
	It("gelu: approx=erf is torch's 'none', approx=tanh its 'tanh', and the two forms differ", func() {
		x := harness.RandomTensor(f32, []int{401}, 7, harness.Dist{Kind: harness.DistUniform, Lo: -4, Hi: 4})
		in := map[string]*tensor.Tensor{"x": x}
		out := map[string][2]*tensor.Tensor{}
		for _, approx := range []string{"erf", "tanh"} {
			g := unaryGraph("gelu", f32, graph.Attrs{"approx": graph.String(approx)}, 401)
			eng, orc := onEngine(g, in), onTorch(cpu, g, in)
			c := harness.Check(eng, orc, ftol)
			Expect(c.Pass).To(BeTrue(), "gelu approx=%s: %s", approx, c.Reason)
			out[approx] = [2]*tensor.Tensor{eng, orc}
		}
		cross := harness.Check(out["erf"][0], out["tanh"][1], ftol)
		Expect(cross.Pass).To(BeFalse(), "ours with approx=erf matches torch's tanh form: the forms are mixed up")
		Expect(cross.MaxAbs).To(BeNumerically(">", 1e-4))
	})

	It("softmax and log_softmax of an all -Inf row are NaN in both; other rows are unaffected", func() {
		vals := []float64{1, 2, 3, 4, -inf, -inf, -inf, -inf, 0.5, -inf, 2, 0}
		in := map[string]*tensor.Tensor{"x": tensor.FromFloat64(f32, []int{3, 4}, vals)}
		for _, op := range []string{"softmax", "log_softmax"} {
			g := buildGraph(func(b *graph.Builder) *graph.Value { return b.Op(op, nil, b.Input("x", f32, 3, 4)) })
			eng, orc := onEngine(g, in), onTorch(cpu, g, in)
			for i := 4; i < 8; i++ {
				Expect(math.IsNaN(eng.Float64(i))).To(BeTrue(), "%s: ours at row 1: %v", op, eng.Float64(i))
				Expect(math.IsNaN(orc.Float64(i))).To(BeTrue(), "%s: torch at row 1: %v", op, orc.Float64(i))
			}
			for _, i := range []int{0, 3, 8, 10} {
				Expect(math.IsNaN(eng.Float64(i))).To(BeFalse(), "%s: NaN leaked into another row at %d", op, i)
			}
			c := harness.Check(eng, orc, ftol)
			Expect(c.Pass).To(BeTrue(), "%s: %s", op, c.Reason)
		}
	})

	It("reductions: axes=[] reduces every axis, as torch.sum(x, dim=[]); zero-size dims sum to 0 in both", func() {
		b := graph.NewBuilder("empty_axes")
		b.Output(b.Op("reduce_sum", graph.Attrs{"axes": graph.Ints()}, b.Input("x", f32, 2, 3)))
		g, err := b.Build()
		Expect(err).NotTo(HaveOccurred())
		Expect(g.Outputs[0].Type.Rank()).To(Equal(0), "axes=[] is every axis")

		b = graph.NewBuilder("zero_dim")
		b.Output(b.Op("reduce_sum", graph.Attrs{"axes": graph.Ints(0)}, b.Input("x", f32, 0, 3)))
		_, err = b.Build()
		Expect(err).NotTo(HaveOccurred(), "an empty tensor is everyday torch (issue 21)")

		o := torchOracle.get()
		ones := vec(f32, 1, 2, 3, 4, 5, 6)
		sum := func(axes []int64, shape, out []int, data []byte) differential.WireCase {
			return differential.WireCase{Name: "sum",
				Inputs:  []differential.WireTensor{{Name: "x", DType: "f32", Shape: shape, Data: data}},
				Nodes:   []differential.WireNode{{Op: "reduce_sum", Inputs: []string{"x"}, Output: "y", DType: "f32", Shape: out, Attrs: map[string]any{"axes": axes, "keepdims": false}}},
				Outputs: []string{"y"}}
		}
		res, err := o.Eval(raw, []differential.WireCase{sum([]int64{}, []int{2, 3}, []int{}, ones.Data), sum([]int64{0}, []int{0, 3}, []int{3}, nil)})
		Expect(err).NotTo(HaveOccurred())
		Expect(res[0].Error).To(BeEmpty())
		all, err := differential.FromWire(res[0].Outputs[0], f32, []int{})
		Expect(err).NotTo(HaveOccurred())
		Expect(all.Float64(0)).To(Equal(21.0), "torch's sum over axes=[] is the sum of every element")
		Expect(res[1].Error).To(BeEmpty())
		zero, err := differential.FromWire(res[1].Outputs[0], f32, []int{3})
		Expect(err).NotTo(HaveOccurred())
		Expect(zero.Float64s()).To(Equal([]float64{0, 0, 0}))

		res, err = o.Eval(cpu, []differential.WireCase{sum([]int64{}, []int{2, 3}, []int{}, ones.Data)})
		Expect(err).NotTo(HaveOccurred())
		Expect(res[0].Unsupported).To(BeFalse(), "the mapping reads axes=[] as every axis, as the engine does")
		mapped, err := differential.FromWire(res[0].Outputs[0], f32, []int{})
		Expect(err).NotTo(HaveOccurred())
		Expect(mapped.Float64(0)).To(Equal(21.0))
	})

	It("bf16: torch's own kernels may round intermediates; the mapping computes in f32 and rounds once, as the engine does", func() {
		for _, name := range []string{"gelu/bf16/7x13-tanh", "silu/bf16/1031", "layernorm/bf16/3x1031", "reduce_sum/bf16/13x19x7-axes0+2-keep", "reduce_mean/bf16/3x1031-axis1"} {
			sp := specNamed(name)
			in, err := sp.Inputs()
			Expect(err).NotTo(HaveOccurred())
			want, err := ref.Run(sp.Graph, in)
			Expect(err).NotTo(HaveOccurred())
			eng := onEngine(sp.Graph, in)
			mapped, native := onTorch(cpu, sp.Graph, in), onTorch(raw, sp.Graph, in)
			c := harness.Check(eng, mapped, sp.Tolerances[0])
			Expect(c.Pass).To(BeTrue(), "%s: engine vs the f32 mapping: %s", name, c.Reason)
			mappedULP := harness.Check(mapped, want[0], sp.Tolerances[0]).MaxULP
			nativeULP := harness.Check(native, want[0], sp.Tolerances[0]).MaxULP
			AddReportEntry(name, fmt.Sprintf("max ulp from the golden model: mapping %d, torch's own bf16 kernel %d", mappedULP, nativeULP))
			Expect(mappedULP).To(BeNumerically("<=", 1), "%s: one rounding of an f32 result is at most 1 ulp off", name)
			Expect(nativeULP).To(BeNumerically(">=", mappedULP), "%s: torch's own kernel is closer than one rounding", name)
		}
	})

	It("int arithmetic wraps at the dtype's width in both", func() {
		i8, i32 := numerics.I8, numerics.I32
		cases := []struct {
			op     string
			dt     numerics.DType
			a, b   []float64
			expect []float64
		}{
			{"add", i8, []float64{100, -128, 127}, []float64{100, -1, 1}, []float64{-56, 127, -128}},
			{"sub", i8, []float64{-128, 0}, []float64{1, -128}, []float64{127, -128}},
			{"mul", i32, []float64{65536, 46341}, []float64{65536, 46341}, []float64{0, -2147479015}},
			{"neg", i8, []float64{-128, 5}, nil, []float64{-128, -5}},
			{"abs", i8, []float64{-128, -5}, nil, []float64{-128, 5}},
			{"reduce_sum", i8, []float64{100, 100, 100}, nil, []float64{44}},
		}
		for _, c := range cases {
			n := len(c.a)
			in := map[string]*tensor.Tensor{"a": vec(c.dt, c.a...)}
			g := buildGraph(func(b *graph.Builder) *graph.Value {
				a := b.Input("a", c.dt, n)
				if c.b == nil {
					return b.Op(c.op, nil, a)
				}
				return b.Op(c.op, nil, a, b.Input("b", c.dt, n))
			})
			if c.b != nil {
				in["b"] = vec(c.dt, c.b...)
			}
			eng, orc := onEngine(g, in), onTorch(cpu, g, in)
			Expect(eng.Float64s()).To(Equal(c.expect), "%s/%s ours", c.op, c.dt)
			Expect(orc.Float64s()).To(Equal(c.expect), "%s/%s torch", c.op, c.dt)
		}
	})

	It("fp8: ours saturate out-of-range values; the mapping rounds torch's f32 result with numerics.Encode", func() {
		for _, to := range []numerics.DType{numerics.F8E4M3, numerics.F8E5M2} {
			g := castGraph(f32, to, 6)
			in := map[string]*tensor.Tensor{"x": vec(f32, 1000, -1e6, 464, inf, -inf, 1.5)}
			eng, orc := onEngine(g, in), onTorch(cpu, g, in)
			top := numerics.MaxFinite(to)
			thousand := 1024.0 // e5m2's nearest; e4m3 saturates
			if to == numerics.F8E4M3 {
				thousand = top
			}
			Expect(eng.Float64s()).To(Equal([]float64{thousand, -top, 448, top, -top, 1.5}), "ours, %s", to)
			Expect(harness.Check(eng, orc, harness.Bitwise()).Pass).To(BeTrue(), "mapping vs ours, %s", to)
		}
	})

	It("fp8: torch's own float8 casts give NaN (e4m3fn) or Inf (e5m2) where ours saturate", func() {
		o := torchOracle.get()
		if !o.Hello().Float8 {
			Skip(o.Describe() + " has no float8 dtypes")
		}
		for _, c := range []struct {
			to     numerics.DType
			x      float64
			isNaN  bool
			theirs float64
		}{{numerics.F8E4M3, 1000, true, 0}, {numerics.F8E5M2, 1e6, false, inf}} {
			wc := differential.WireCase{Name: "cast",
				Inputs:  []differential.WireTensor{differential.WireOf("x", vec(f32, c.x))},
				Nodes:   []differential.WireNode{{Op: "cast", Inputs: []string{"x"}, Output: "y", DType: c.to.String(), Shape: []int{1}, Attrs: map[string]any{"to": c.to.String()}}},
				Outputs: []string{"y"}}
			res, err := o.Eval(raw, []differential.WireCase{wc})
			Expect(err).NotTo(HaveOccurred())
			Expect(res[0].Error).To(BeEmpty())
			t, err := differential.FromWire(res[0].Outputs[0], c.to, []int{1})
			Expect(err).NotTo(HaveOccurred())
			if c.isNaN {
				Expect(math.IsNaN(t.Float64(0))).To(BeTrue(), "torch %s of %g", c.to, c.x)
			} else {
				Expect(t.Float64(0)).To(Equal(c.theirs), "torch %s of %g", c.to, c.x)
			}
			Expect(numerics.Decode(c.to, numerics.Encode(c.to, c.x))).To(Equal(numerics.MaxFinite(c.to)))
		}
	})

	It("float->int casts: ours saturate and send NaN to 0, torch's own cast wraps", func() {
		g := castGraph(f32, numerics.I8, 6)
		in := map[string]*tensor.Tensor{"x": vec(f32, 200, -200, 3e9, nan, 127.9, -128.9)}
		eng, mapped, native := onEngine(g, in), onTorch(cpu, g, in), onTorch(raw, g, in)
		Expect(eng.Float64s()).To(Equal([]float64{127, -128, 127, 0, 127, -128}))
		Expect(mapped.Float64s()).To(Equal(eng.Float64s()))
		Expect(native.Float64(0)).NotTo(Equal(127.0), "torch's own cast of 200.0 to int8 saturated: the mapping's emulation note is stale")
		AddReportEntry("torch's own float->int8 cast", fmt.Sprint(native.Float64s()))

		g = castGraph(numerics.F64, numerics.I32, 2)
		in = map[string]*tensor.Tensor{"x": vec(numerics.F64, 3e9, -3e9)}
		Expect(onEngine(g, in).Float64s()).To(Equal([]float64{math.MaxInt32, math.MinInt32}))
		Expect(onTorch(cpu, g, in).Float64s()).To(Equal([]float64{math.MaxInt32, math.MinInt32}))
	})

	It("f64 -> f16/bf16 casts: ours round once, torch's own cast rounds through f32", func() {
		for _, c := range []struct {
			to       numerics.DType
			x, once  float64
			twiceVia float64
		}{
			{numerics.BF16, 1 + 0x1p-8 + 0x1p-30, 1 + 0x1p-7, 1},
			{numerics.F16, 1 + 0x1p-11 + 0x1p-40, 1 + 0x1p-10, 1},
		} {
			g := castGraph(numerics.F64, c.to, 1)
			in := map[string]*tensor.Tensor{"x": vec(numerics.F64, c.x)}
			Expect(onEngine(g, in).Float64(0)).To(Equal(c.once), "ours, %s", c.to)
			Expect(onTorch(cpu, g, in).Float64(0)).To(Equal(c.once), "the mapping, %s", c.to)
			Expect(onTorch(raw, g, in).Float64(0)).To(Equal(c.twiceVia), "torch's own cast, %s", c.to)
		}
	})

	It("signed zeros: relu(-0) and maximum(-0, +0) are +0 here and -0 in torch, which only a bitwise check sees", func() {
		in := map[string]*tensor.Tensor{"x": vec(f32, math.Copysign(0, -1), 2)}
		g := unaryGraph("relu", f32, nil, 2)
		eng, orc := onEngine(g, in), onTorch(raw, g, in)
		Expect(eng.Bits(0)).To(Equal(uint64(0)))
		Expect(orc.Bits(0)).To(Equal(uint64(0x80000000)))
		Expect(harness.Check(eng, orc, ftol.NoGuard()).Pass).To(BeTrue())
		Expect(harness.Check(eng, orc, harness.Bitwise()).Pass).To(BeFalse())

		g = buildGraph(func(b *graph.Builder) *graph.Value {
			return b.Op("maximum", nil, b.Input("a", f32, 2), b.Input("b", f32, 2))
		})
		in = map[string]*tensor.Tensor{"a": vec(f32, math.Copysign(0, -1), 1), "b": vec(f32, 0, 2)}
		eng, orc = onEngine(g, in), onTorch(raw, g, in)
		Expect(eng.Bits(0)).To(Equal(uint64(0)))
		Expect(math.Signbit(orc.Float64(0))).To(BeTrue(), "torch's maximum(-0, +0) returns its first operand")
	})

	It("NaN propagates through relu, maximum, minimum and reduce_max in both", func() {
		in := map[string]*tensor.Tensor{"a": vec(f32, nan, 1, -2), "b": vec(f32, 0, nan, 3)}
		for _, op := range []string{"maximum", "minimum"} {
			g := buildGraph(func(b *graph.Builder) *graph.Value {
				return b.Op(op, nil, b.Input("a", f32, 3), b.Input("b", f32, 3))
			})
			eng, orc := onEngine(g, in), onTorch(cpu, g, in)
			for i, isNaN := range []bool{true, true, false} {
				Expect(math.IsNaN(eng.Float64(i))).To(Equal(isNaN), "%s ours [%d]", op, i)
				Expect(math.IsNaN(orc.Float64(i))).To(Equal(isNaN), "%s torch [%d]", op, i)
			}
		}
		x := map[string]*tensor.Tensor{"x": vec(f32, nan, 1, -2)}
		for _, op := range []string{"relu", "reduce_max"} {
			g := unaryGraph(op, f32, nil, 3)
			eng, orc := onEngine(g, x), onTorch(cpu, g, x)
			Expect(math.IsNaN(eng.Float64(0))).To(BeTrue(), "%s ours", op)
			Expect(math.IsNaN(orc.Float64(0))).To(BeTrue(), "%s torch", op)
		}
	})
})

func specNamed(name string) golden.Spec {
	for _, sp := range golden.Catalogue() {
		if sp.Name == name {
			return sp
		}
	}
	Fail("no catalogue spec " + name)
	return golden.Spec{}
}

// Empty tensors (issue 21): the catalogue's empty-* cases compare torch's answers (shapes,
// 0, NaN, -Inf) through the specs above. Here, the cases torch refuses: the verifier must
// refuse them too, with E_SHAPE, rather than invent a value.
var _ = Describe("empty tensors where torch raises", Label("cpu", "torch"), func() {
	It("max over an empty axis: torch raises, the graph is E_SHAPE naming the node and shape; max along a kept empty axis is empty in both", func() {
		max := func(axes []int64, shape, out []int) differential.WireCase {
			return differential.WireCase{Name: "max",
				Inputs:  []differential.WireTensor{{Name: "x", DType: "f32", Shape: shape, Data: nil}},
				Nodes:   []differential.WireNode{{Op: "reduce_max", Inputs: []string{"x"}, Output: "y", DType: "f32", Shape: out, Attrs: map[string]any{"axes": axes, "keepdims": false}}},
				Outputs: []string{"y"}}
		}
		o := torchOracle.get()
		res, err := o.Eval(cpu, []differential.WireCase{max([]int64{1}, []int{3, 0}, []int{3}), max([]int64{0, 1}, []int{0, 4}, []int{}), max([]int64{1}, []int{0, 4}, []int{0})})
		Expect(err).NotTo(HaveOccurred())
		Expect(res[0].Error).To(ContainSubstring("non-zero size"), "torch: amax(): Expected reduction dim 1 to have non-zero size")
		Expect(res[1].Error).NotTo(BeEmpty(), "torch refuses amax over every axis of an empty tensor")
		Expect(res[2].Error).To(BeEmpty())
		kept, err := differential.FromWire(res[2].Outputs[0], f32, []int{0})
		Expect(err).NotTo(HaveOccurred())
		Expect(kept.Len()).To(Equal(0))

		for _, c := range []struct {
			axes  []int64
			shape []int
		}{{[]int64{1}, []int{3, 0}}, {[]int64{0, 1}, []int{0, 4}}} {
			b := graph.NewBuilder("max_empty")
			b.Output(b.Named("y", "reduce_max", graph.Attrs{"axes": graph.Ints(c.axes...)}, b.Input("x", f32, c.shape...)))
			_, err := b.Build()
			Expect(errs.CodeOf(err)).To(Equal(errs.Shape), "%v", c.shape)
			Expect(err.Error()).To(And(ContainSubstring("node %y"), ContainSubstring("of size 0"), ContainSubstring("max has no identity")))
		}
		b := graph.NewBuilder("max_kept")
		b.Output(b.Op("reduce_max", graph.Attrs{"axes": graph.Ints(1)}, b.Input("x", f32, 0, 4)))
		_, err = b.Build()
		Expect(err).NotTo(HaveOccurred())
	})
})
