package differential

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/engine/ref"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
)

// mlpGraph is matmul -> gelu, then two heads: reduce_sum(softmax(h) * c) (a scalar) and
// layernorm(h, gamma, beta). Input u is declared and never used.
func mlpGraph(t *testing.T, dt numerics.DType) *graph.Graph {
	t.Helper()
	b := graph.NewBuilder("mlp_" + dt.String())
	x := b.Input("x", dt, 2, 3)
	w := b.Input("w", dt, 3, 4)
	gamma := b.Input("gamma", dt, 4)
	beta := b.Input("beta", dt, 4)
	c := b.Input("c", dt, 2, 4)
	b.Input("u", dt, 3)
	h := b.Op("gelu", nil, b.Op("matmul", nil, x, w))
	l := b.Named("l", "reduce_sum", nil, b.Op("mul", nil, b.Op("softmax", nil, h), c))
	n := b.Named("n", "layernorm", nil, h, gamma, beta)
	b.Output(l, n)
	g, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// randomTensors draws normal values for every input of g, rounded to its dtype.
func randomTensors(g *graph.Graph, seed uint64) map[string]*tensor.Tensor {
	r := rand.New(rand.NewPCG(seed, 7))
	out := map[string]*tensor.Tensor{}
	for _, v := range g.Inputs {
		vals := make([]float64, tensor.NumElems(v.Type.Shape))
		for i := range vals {
			vals[i] = r.NormFloat64()
		}
		out[v.Name] = tensor.FromFloat64(v.Type.DType, v.Type.Shape, vals)
	}
	return out
}

// cotangentsFor draws one cotangent per output of g.
func cotangentsFor(g *graph.Graph, seed uint64) []*tensor.Tensor {
	r := rand.New(rand.NewPCG(seed, 11))
	var out []*tensor.Tensor
	for _, v := range g.Outputs {
		vals := make([]float64, tensor.NumElems(v.Type.Shape))
		for i := range vals {
			vals[i] = r.NormFloat64()
		}
		out = append(out, tensor.FromFloat64(v.Type.DType, v.Type.Shape, vals))
	}
	return out
}

// upcast returns every tensor as f64 (exact).
func upcast(in map[string]*tensor.Tensor) map[string]*tensor.Tensor {
	out := map[string]*tensor.Tensor{}
	for k, t := range in {
		out[k] = tensor.FromFloat64(numerics.F64, t.Shape, t.Float64s())
	}
	return out
}

func upcastAll(ts []*tensor.Tensor) []*tensor.Tensor {
	var out []*tensor.Tensor
	for _, t := range ts {
		out = append(out, tensor.FromFloat64(numerics.F64, t.Shape, t.Float64s()))
	}
	return out
}

// finiteDifference is the gradient of phi = sum_j <cots[j], output j of g> with respect to
// input name, by central differences on the float64 golden model.
func finiteDifference(t *testing.T, g *graph.Graph, inputs map[string]*tensor.Tensor, cots []*tensor.Tensor, name string) []float64 {
	t.Helper()
	phi := func(in map[string]*tensor.Tensor) float64 {
		outs, err := ref.Run(g, in)
		if err != nil {
			t.Fatal(err)
		}
		s := 0.0
		for j, o := range outs {
			for i := range o.Len() {
				s += cots[j].Float64(i) * o.Float64(i)
			}
		}
		return s
	}
	x := inputs[name]
	grad := make([]float64, x.Len())
	for i := range grad {
		in := map[string]*tensor.Tensor{}
		for k, v := range inputs {
			in[k] = v.Clone()
		}
		x0 := x.Float64(i)
		h := 1e-5 * max(1, math.Abs(x0))
		in[name].SetFloat64(i, x0+h)
		up := phi(in)
		in[name].SetFloat64(i, x0-h)
		down := phi(in)
		grad[i] = (up - down) / (2 * h)
	}
	return grad
}

func TestTorchVJPMatchesFiniteDifferences(t *testing.T) {
	o := startTorch(t)
	g := mlpGraph(t, numerics.F64)
	in := randomTensors(g, 1)
	cots := cotangentsFor(g, 2)
	wrt := []string{"x", "w", "gamma", "beta", "u"}
	outs, grads, mode, err := o.VJP(Target{Device: "cpu"}, g, in, cots, wrt)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(mode, "vjp in f64") || !strings.Contains(mode, "%u") {
		t.Errorf("mode %q: want the f64 mode, naming the unused input %%u", mode)
	}
	want, err := ref.Run(g, in)
	if err != nil {
		t.Fatal(err)
	}
	for j := range outs {
		for i := range outs[j].Len() {
			if a, e := outs[j].Float64(i), want[j].Float64(i); math.Abs(a-e) > 1e-12*(1+math.Abs(e)) {
				t.Errorf("output %s[%d] = %v, golden model %v", g.Outputs[j].Name, i, a, e)
			}
		}
	}
	for k, name := range wrt {
		if grads[k].DType != numerics.F64 || !slices.Equal(grads[k].Shape, in[name].Shape) {
			t.Fatalf("gradient of %%%s is %s, want f64%v", name, grads[k].TypeString(), in[name].Shape)
		}
		fd := finiteDifference(t, g, in, cots, name)
		for i, e := range fd {
			if a := grads[k].Float64(i); math.Abs(a-e) > 1e-7*(1+math.Abs(e)) {
				t.Errorf("d/d%s[%d]: torch %v, finite difference %v", name, i, a, e)
			}
		}
	}
	for i := range grads[4].Len() {
		if v := grads[4].Float64(i); v != 0 {
			t.Errorf("the unused input's gradient [%d] is %v, want 0", i, v)
		}
	}
}

// In the default mode the gradient of a f32 or bf16 graph is the f64 gradient at the same
// values, rounded once: bit for bit what the f64 graph's gradient rounds to.
func TestTorchVJPRoundsTheF64GradientOnce(t *testing.T) {
	o := startTorch(t)
	wrt := []string{"x", "w", "gamma", "beta"}
	for _, dt := range []numerics.DType{numerics.F32, numerics.BF16} {
		g := mlpGraph(t, dt)
		in := randomTensors(g, 3)
		cots := cotangentsFor(g, 4)
		outs, grads, _, err := o.VJP(Target{Device: "cpu"}, g, in, cots, wrt)
		if err != nil {
			t.Fatal(err)
		}
		outs64, grads64, _, err := o.VJP(Target{Device: "cpu"}, mlpGraph(t, numerics.F64), upcast(in), upcastAll(cots), wrt)
		if err != nil {
			t.Fatal(err)
		}
		same := func(what string, got, exact *tensor.Tensor) {
			if got.DType != dt {
				t.Fatalf("%s %s is %s, want %s", dt, what, got.TypeString(), dt)
			}
			for i := range got.Len() {
				if want := numerics.Encode(dt, exact.Float64(i)); got.Bits(i) != want {
					t.Errorf("%s %s[%d] = %v, the f64 answer %v rounds to %v", dt, what, i, got.Float64(i), exact.Float64(i), numerics.Decode(dt, want))
				}
			}
		}
		for j := range outs {
			same("output "+g.Outputs[j].Name, outs[j], outs64[j])
		}
		for k, name := range wrt {
			same("gradient of "+name, grads[k], grads64[k])
		}
		if dt != numerics.F32 {
			continue
		}
		// Native: torch's autograd in f32, close to the f64 answer.
		_, native, mode, err := o.VJP(Target{Device: "cpu", Native: true}, g, in, cots, wrt)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(mode, "vjp native") {
			t.Errorf("native mode %q", mode)
		}
		for k := range wrt {
			for i := range native[k].Len() {
				if a, e := native[k].Float64(i), grads64[k].Float64(i); math.Abs(a-e) > 1e-4*(1+math.Abs(e)) {
					t.Errorf("native f32 d/d%s[%d] = %v, f64 %v", wrt[k], i, a, e)
				}
			}
		}
	}
}

// sameFloat is equality with NaN equal to NaN and -0 equal to +0.
func sameFloat(a, b float64) bool {
	return a == b || (math.IsNaN(a) && math.IsNaN(b)) || math.Abs(a-b) <= 1e-15*math.Abs(b)
}

// Each rule of TorchGradRules, measured again on the installed torch.
func TestTorchGradRules(t *testing.T) {
	o := startTorch(t)
	for _, rule := range TorchGradRules {
		b := graph.NewBuilder("rule_" + rule.Op)
		var args []*graph.Value
		var wrt []string
		in := map[string]*tensor.Tensor{}
		for i, vals := range rule.Inputs {
			name := string(rune('a' + i))
			args = append(args, b.Input(name, numerics.F64, len(vals)))
			in[name] = tensor.FromFloat64(numerics.F64, []int{len(vals)}, vals)
			wrt = append(wrt, name)
		}
		b.Output(b.Op(rule.Op, nil, args...))
		g, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		ones := tensor.New(numerics.F64, g.Outputs[0].Type.Shape)
		for i := range ones.Len() {
			ones.SetFloat64(i, 1)
		}
		_, grads, _, err := o.VJP(Target{Device: "cpu"}, g, in, []*tensor.Tensor{ones}, wrt)
		if err != nil {
			t.Fatal(err)
		}
		for k, want := range rule.Grads {
			if got := grads[k].Float64s(); !slices.EqualFunc(got, want, sameFloat) {
				t.Errorf("%s%v: d/d%s = %v, TorchGradRules says %v (%s)", rule.Op, rule.Inputs, wrt[k], got, want, rule.Note)
			}
		}
	}
}

func TestVJPBadRequestsAreCodedErrors(t *testing.T) {
	g := mlpGraph(t, numerics.F32)
	in := randomTensors(g, 5)
	cots := cotangentsFor(g, 6)
	_, err := PrepareVJP("bad", g, in, cots, []string{"x", "nope"})
	wantCode(t, err, errs.Input, "wrt names %nope", "not an input", "%x, %w")
	_, err = PrepareVJP("bad", g, in, cots, []string{"x", "x"})
	wantCode(t, err, errs.Input, "%x twice")
	_, err = PrepareVJP("bad", g, in, cots[:1], []string{"x"})
	wantCode(t, err, errs.Input, "1 cotangents for 2 outputs")
	_, err = PrepareVJP("bad", g, in, []*tensor.Tensor{cots[0], nil}, []string{"x"})
	wantCode(t, err, errs.Input, "cotangent 1 (for output %n) is missing")
	_, err = PrepareVJP("bad", g, in, []*tensor.Tensor{cots[0], tensor.New(numerics.F32, []int{4, 2})}, []string{"x"})
	wantCode(t, err, errs.Shape, "cotangent 1 (for output %n) is f32[4,2]", "f32[2,4]")
	_, err = PrepareVJP("bad", g, in, []*tensor.Tensor{tensor.New(numerics.F64, nil), cots[1]}, []string{"x"})
	wantCode(t, err, errs.DType, "cotangent 0 (for output %l) is f64[]")

	b := graph.NewBuilder("ints")
	x := b.Input("x", numerics.I32, 2)
	b.Output(b.Op("add", nil, x, x))
	gi, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	xi := tensor.New(numerics.I32, []int{2})
	_, err = PrepareVJP("bad", gi, map[string]*tensor.Tensor{"x": xi}, []*tensor.Tensor{xi}, []string{"x"})
	wantCode(t, err, errs.DType, "wrt input %x is int32")
}

// The oracle checks a gradient case itself too: a hand-written wire case gets a per-case
// error naming what is wrong, and the request goes on.
func TestTorchOracleRejectsBadGradientCases(t *testing.T) {
	o := startTorch(t)
	g := mlpGraph(t, numerics.F32)
	p, err := PrepareVJP("good", g, randomTensors(g, 5), cotangentsFor(g, 6), []string{"x"})
	if err != nil {
		t.Fatal(err)
	}
	shape := p.Case
	shape.Name = "shape"
	shape.Grad = &WireGrad{WRT: []string{"x"}, Cotangents: slices.Clone(p.Case.Grad.Cotangents)}
	shape.Grad.Cotangents[1].Shape = []int{4, 2}
	unknown := p.Case
	unknown.Name = "unknown"
	unknown.Grad = &WireGrad{WRT: []string{"nope"}, Cotangents: p.Case.Grad.Cotangents}
	ints := p.Case
	ints.Name = "count"
	ints.Grad = &WireGrad{WRT: []string{"x"}, Cotangents: p.Case.Grad.Cotangents[:1]}
	res, err := o.Eval(Target{Device: "cpu"}, []WireCase{shape, unknown, ints, p.Case})
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []string{"cotangent 1 (for output %n) is f32[4,2], the output is f32[2,4]",
		"wrt names %nope, which is not an input", "1 cotangents for 2 outputs"} {
		if !strings.Contains(res[i].Error, "bad gradient request: "+want) {
			t.Errorf("case %s: %+v, want %q", res[i].Name, res[i].Error, want)
		}
	}
	if _, grads, err := p.DecodeVJP(res[3]); err != nil || len(grads) != 1 {
		t.Errorf("the good case beside them: %v", err)
	}
}

// A protocol-1 oracle (an older script) still answers forward cases; a gradient case is
// E_UNSUPPORTED before anything is sent.
func TestProtocolOneOracleRefusesGradients(t *testing.T) {
	// The fake says hello and exits on its first line, which must be the quit of Close.
	py := fakePython(t, "echo '"+fakeHello+"'\nread line\ncase \"$line\" in *quit*) exit 0;; esac\nexit 9")
	o, err := Start(Config{Framework: "torch", Python: py, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	g := mlpGraph(t, numerics.F32)
	_, _, _, err = o.VJP(Target{Device: "cpu"}, g, randomTensors(g, 1), cotangentsFor(g, 2), []string{"x"})
	wantCode(t, err, errs.Unsupported, "protocol 1", "needs protocol 2")
}

// ---- the ops ahead of the registry, through hand-written wire cases

func wnode(op string, inputs []string, out string, dt numerics.DType, shape []int, attrs map[string]any) WireNode {
	if attrs == nil {
		attrs = map[string]any{}
	}
	return WireNode{Op: op, Inputs: inputs, Output: out, DType: dt.String(), Shape: shape, Attrs: attrs}
}

func wcase(name string, node WireNode, inputs ...WireTensor) WireCase {
	return WireCase{Name: name, Inputs: inputs, Nodes: []WireNode{node}, Outputs: []string{node.Output}}
}

// evalOne sends cases and returns each one's single output, failing on any per-case error.
func evalOne(t *testing.T, o *Oracle, tg Target, cases ...WireCase) []*tensor.Tensor {
	t.Helper()
	res, err := o.Eval(tg, cases)
	if err != nil {
		t.Fatal(err)
	}
	var out []*tensor.Tensor
	for i, r := range res {
		if r.Error != "" {
			t.Fatalf("case %s: %s", r.Name, r.Error)
		}
		n := cases[i].Nodes[len(cases[i].Nodes)-1]
		dt, err := numerics.Parse(n.DType)
		if err != nil {
			t.Fatal(err)
		}
		x, err := FromWire(r.Outputs[0], dt, n.Shape)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, x)
	}
	return out
}

func TestTorchOracleNewOpsByWire(t *testing.T) {
	o := startTorch(t)
	cpu := Target{Device: "cpu"}
	t.Run("full_like", func(t *testing.T) {
		bf := WireOf("x", tensor.New(numerics.BF16, []int{3}))
		i8 := WireOf("x", tensor.New(numerics.I8, []int{2}))
		f32 := WireOf("x", tensor.New(numerics.F32, []int{2, 1}))
		odd := 1 + math.Ldexp(1, -8) + math.Ldexp(1, -30) // bf16 rounds it to 1+2^-7; via f32, to 1
		outs := evalOne(t, o, cpu,
			wcase("bf16", wnode("full_like", []string{"x"}, "y", numerics.BF16, []int{3}, map[string]any{"value": odd}), bf),
			wcase("int8 high", wnode("full_like", []string{"x"}, "y", numerics.I8, []int{2}, map[string]any{"value": 300.0}), i8),
			wcase("int8 trunc", wnode("full_like", []string{"x"}, "y", numerics.I8, []int{2}, map[string]any{"value": -3.7}), i8),
			wcase("f32", wnode("full_like", []string{"x"}, "y", numerics.F32, []int{2, 1}, map[string]any{"value": 0.1}), f32))
		for i, want := range [][]float64{{1.0078125, 1.0078125, 1.0078125}, {127, 127}, {-3, -3}, {float64(float32(0.1)), float64(float32(0.1))}} {
			if got := outs[i].Float64s(); !slices.Equal(got, want) {
				t.Errorf("case %d: %v, want %v", i, got, want)
			}
		}
	})
	t.Run("sign", func(t *testing.T) {
		vals := []float64{math.NaN(), math.Copysign(0, -1), 0, -2, 3, math.Inf(-1)}
		var cases []WireCase
		for _, dt := range []numerics.DType{numerics.F32, numerics.F16, numerics.BF16, numerics.F64} {
			cases = append(cases, wcase(dt.String(), wnode("sign", []string{"x"}, "y", dt, []int{6}, nil), WireOf("x", tensor.FromFloat64(dt, []int{6}, vals))))
		}
		cases = append(cases, wcase("int8", wnode("sign", []string{"x"}, "y", numerics.I8, []int{3}, nil),
			WireOf("x", tensor.FromFloat64(numerics.I8, []int{3}, []float64{-128, 0, 5}))))
		outs := evalOne(t, o, cpu, cases...)
		for _, y := range outs[:4] {
			got := y.Float64s()
			if !math.IsNaN(got[0]) || !slices.Equal(got[1:], []float64{0, 0, -1, 1, -1}) || math.Signbit(got[1]) {
				t.Errorf("%s sign%v = %v (sign bit of sign(-0): %v), want [NaN +0 +0 -1 1 -1]", y.DType, vals, got, math.Signbit(got[1]))
			}
		}
		if got := outs[4].Float64s(); !slices.Equal(got, []float64{-1, 0, 1}) {
			t.Errorf("int8 sign = %v", got)
		}
		// torch by itself: sign(NaN) = 0 on 1.13.
		native := evalOne(t, o, Target{Device: "cpu", Native: true}, cases[0])
		t.Logf("torch %s's own sign(NaN) = %v", o.Hello().Version, native[0].Float64(0))
	})
	t.Run("attention_lse", func(t *testing.T) {
		r := rand.New(rand.NewPCG(9, 9))
		q := randn(r, numerics.F64, 2, 3, 4)
		k := randn(r, numerics.F64, 2, 5, 4)
		for _, causal := range []bool{false, true} {
			for _, scale := range []float64{0, 0.3} {
				attrs := map[string]any{"causal": causal}
				s := 0.5 // 1/sqrt(4)
				if scale != 0 {
					attrs["scale"], s = scale, scale
				}
				outs := evalOne(t, o, cpu, wcase("lse", wnode("attention_lse", []string{"q", "k"}, "lse", numerics.F64, []int{2, 3}, attrs),
					WireOf("q", q), WireOf("k", k)))
				want := goLSE(q, k, 2, 3, 5, 4, causal, s)
				for i, w := range want {
					if a := outs[0].Float64(i); math.Abs(a-w) > 1e-13*(1+math.Abs(w)) {
						t.Errorf("causal=%v scale=%v: lse[%d] = %v, want %v", causal, scale, i, a, w)
					}
				}
			}
		}
		// bf16 q and k: the output is f32.
		qb, kb := tensor.FromFloat64(numerics.BF16, q.Shape, q.Float64s()), tensor.FromFloat64(numerics.BF16, k.Shape, k.Float64s())
		outs := evalOne(t, o, cpu, wcase("lse bf16", wnode("attention_lse", []string{"q", "k"}, "lse", numerics.F32, []int{2, 3}, map[string]any{"causal": true}),
			WireOf("q", qb), WireOf("k", kb)))
		for i, w := range goLSE(qb, kb, 2, 3, 5, 4, true, 0.5) {
			if a := outs[0].Float64(i); math.Abs(a-w) > 1e-5*(1+math.Abs(w)) {
				t.Errorf("bf16: lse[%d] = %v, want %v", i, a, w)
			}
		}
	})
	t.Run("attention_grad", func(t *testing.T) {
		r := rand.New(rand.NewPCG(10, 10))
		in := map[string]*tensor.Tensor{"q": randn(r, numerics.F64, 1, 3, 4), "k": randn(r, numerics.F64, 1, 5, 4), "v": randn(r, numerics.F64, 1, 5, 2)}
		do := randn(r, numerics.F64, 1, 3, 2)
		wires := []WireTensor{WireOf("q", in["q"]), WireOf("k", in["k"]), WireOf("v", in["v"]),
			WireOf("o", tensor.New(numerics.F64, []int{1, 3, 2})), WireOf("do", do), WireOf("lse", tensor.New(numerics.F64, []int{1, 3}))}
		for _, causal := range []bool{false, true} {
			b := graph.NewBuilder("attention")
			b.Output(b.Op("attention", graph.Attrs{"causal": graph.Bool(causal)}, b.Input("q", numerics.F64, 1, 3, 4), b.Input("k", numerics.F64, 1, 5, 4), b.Input("v", numerics.F64, 1, 5, 2)))
			g, err := b.Build()
			if err != nil {
				t.Fatal(err)
			}
			for _, wrt := range []string{"q", "k", "v"} {
				shape := in[wrt].Shape
				outs := evalOne(t, o, cpu, wcase("grad", wnode("attention_grad", []string{"q", "k", "v", "o", "do", "lse"}, "d"+wrt, numerics.F64, shape,
					map[string]any{"causal": causal, "wrt": wrt}), wires...))
				for i, e := range finiteDifference(t, g, in, []*tensor.Tensor{do}, wrt) {
					if a := outs[0].Float64(i); math.Abs(a-e) > 1e-7*(1+math.Abs(e)) {
						t.Errorf("causal=%v d%s[%d] = %v, finite difference %v", causal, wrt, i, a, e)
					}
				}
			}
		}
		// bf16: lse travels as f32, the gradient comes back as bf16.
		bf := func(x *tensor.Tensor) *tensor.Tensor { return tensor.FromFloat64(numerics.BF16, x.Shape, x.Float64s()) }
		outs := evalOne(t, o, cpu, wcase("grad bf16", wnode("attention_grad", []string{"q", "k", "v", "o", "do", "lse"}, "dk", numerics.BF16, []int{1, 5, 4},
			map[string]any{"causal": true, "wrt": "k"}),
			WireOf("q", bf(in["q"])), WireOf("k", bf(in["k"])), WireOf("v", bf(in["v"])), WireOf("o", tensor.New(numerics.BF16, []int{1, 3, 2})),
			WireOf("do", bf(do)), WireOf("lse", tensor.New(numerics.F32, []int{1, 3}))))
		if outs[0].DType != numerics.BF16 {
			t.Errorf("bf16 attention_grad: %s", outs[0].TypeString())
		}
	})
	t.Run("gradients through the new ops", func(t *testing.T) {
		// d/dq sum_i lse_i = scale * sum_j p_ij k_j; sign and full_like pass no gradient.
		r := rand.New(rand.NewPCG(12, 12))
		q, k := randn(r, numerics.F64, 3, 4), randn(r, numerics.F64, 5, 4)
		x := randn(r, numerics.F64, 3)
		c := WireCase{Name: "lse-grad",
			Inputs: []WireTensor{WireOf("q", q), WireOf("k", k), WireOf("x", x)},
			Nodes: []WireNode{wnode("attention_lse", []string{"q", "k"}, "lse", numerics.F64, []int{3}, map[string]any{"causal": true}),
				wnode("sign", []string{"x"}, "s", numerics.F64, []int{3}, nil),
				wnode("full_like", []string{"x"}, "f", numerics.F64, []int{3}, map[string]any{"value": 2.0})},
			Outputs: []string{"lse", "s", "f"},
			Grad: &WireGrad{WRT: []string{"q", "x"}, Cotangents: []WireTensor{
				WireOf("lse", tensor.FromFloat64(numerics.F64, []int{3}, []float64{1, 1, 1})),
				WireOf("s", tensor.FromFloat64(numerics.F64, []int{3}, []float64{1, 2, 3})),
				WireOf("f", tensor.FromFloat64(numerics.F64, []int{3}, []float64{1, 2, 3}))}}}
		res, err := o.Eval(cpu, []WireCase{c})
		if err != nil || res[0].Error != "" {
			t.Fatalf("%v %+v", err, res)
		}
		dq, err := FromWire(res[0].Grads[0], numerics.F64, []int{3, 4})
		if err != nil {
			t.Fatal(err)
		}
		want := goLSEGrad(q, k, 3, 5, 4, true, 0.5)
		for i, w := range want {
			if a := dq.Float64(i); math.Abs(a-w) > 1e-13*(1+math.Abs(w)) {
				t.Errorf("d lse/dq[%d] = %v, want %v", i, a, w)
			}
		}
		dx, err := FromWire(res[0].Grads[1], numerics.F64, []int{3})
		if err != nil {
			t.Fatal(err)
		}
		if got := dx.Float64s(); !slices.Equal(got, []float64{0, 0, 0}) {
			t.Errorf("gradient through sign and full_like: %v, want zeros", got)
		}
		t.Logf("mode %q, unused %v", res[0].Mode, res[0].Unused)
	})
}

func randn(r *rand.Rand, dt numerics.DType, shape ...int) *tensor.Tensor {
	vals := make([]float64, tensor.NumElems(shape))
	for i := range vals {
		vals[i] = r.NormFloat64()
	}
	return tensor.FromFloat64(dt, shape, vals)
}

// goScores is row i of q k^T * scale for one batch entry, masked keys as -Inf.
func goScores(q, k *tensor.Tensor, b, i, sq, sk, d int, causal bool, scale float64) []float64 {
	s := make([]float64, sk)
	for j := range sk {
		if causal && j > i {
			s[j] = math.Inf(-1)
			continue
		}
		for e := range d {
			s[j] += q.Float64((b*sq+i)*d+e) * k.Float64((b*sk+j)*d+e)
		}
		s[j] *= scale
	}
	return s
}

func goLSE(q, k *tensor.Tensor, batch, sq, sk, d int, causal bool, scale float64) []float64 {
	var out []float64
	for b := range batch {
		for i := range sq {
			s := goScores(q, k, b, i, sq, sk, d, causal, scale)
			m := slices.Max(s)
			sum := 0.0
			for _, x := range s {
				sum += math.Exp(x - m)
			}
			out = append(out, m+math.Log(sum))
		}
	}
	return out
}

// goLSEGrad is d(sum_i lse_i)/dq for one batch entry: scale * sum_j softmax_ij k_j.
func goLSEGrad(q, k *tensor.Tensor, sq, sk, d int, causal bool, scale float64) []float64 {
	out := make([]float64, sq*d)
	lse := goLSE(q, k, 1, sq, sk, d, causal, scale)
	for i := range sq {
		s := goScores(q, k, 0, i, sq, sk, d, causal, scale)
		for j := range sk {
			p := math.Exp(s[j] - lse[i])
			for e := range d {
				out[i*d+e] += scale * p * k.Float64(j*d+e)
			}
		}
	}
	return out
}
