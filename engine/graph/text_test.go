package graph

import (
	"math"
	"strings"
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

// opCase is a small valid use of one op: input types and attributes. Attributes are set
// explicitly (often to non-defaults) so the round trip exercises every attribute kind.
type opCase struct {
	in    []Type
	attrs Attrs
}

func ty(dt numerics.DType, shape ...int) Type { return Type{DType: dt, Shape: shape} }

var (
	f32, bf16, i32 = numerics.F32, numerics.BF16, numerics.I32
)

// opCases holds at least one case per registered op; TestRoundTripEveryOp fails when an op
// is registered without one here.
var opCases = map[string][]opCase{
	"neg":     {{in: []Type{ty(i32, 3)}}, {in: []Type{ty(f32)}}},
	"abs":     {{in: []Type{ty(numerics.I8, 2, 2)}}},
	"relu":    {{in: []Type{ty(f32, 4, 16)}}},
	"exp":     {{in: []Type{ty(numerics.F16, 5)}}},
	"log":     {{in: []Type{ty(numerics.F64, 2, 3)}}},
	"sqrt":    {{in: []Type{ty(bf16, 7)}}},
	"rsqrt":   {{in: []Type{ty(numerics.F8E4M3, 4)}}},
	"tanh":    {{in: []Type{ty(numerics.F8E5M2, 1, 2, 3)}}},
	"sigmoid": {{in: []Type{ty(f32, 2)}}},
	"silu":    {{in: []Type{ty(f32, 2, 2)}}},
	"gelu": {
		{in: []Type{ty(f32, 8)}, attrs: Attrs{"approx": String("tanh")}},
		{in: []Type{ty(f32, 8)}, attrs: Attrs{"approx": String("none")}}, // PyTorch's spelling, kept as written
	},
	"add":     {{in: []Type{ty(f32, 4, 1), ty(f32, 3)}}},
	"sub":     {{in: []Type{ty(i32, 2, 3), ty(i32, 2, 3)}}},
	"mul":     {{in: []Type{ty(f32), ty(f32, 2)}}},
	"div":     {{in: []Type{ty(numerics.F64, 3), ty(numerics.F64, 1)}}},
	"maximum": {{in: []Type{ty(bf16, 2), ty(bf16, 2)}}},
	"minimum": {{in: []Type{ty(numerics.I8, 2), ty(numerics.I8, 2)}}},
	"cast": {
		{in: []Type{ty(f32, 4, 16)}, attrs: Attrs{"to": DTypeAttr(bf16)}},
		{in: []Type{ty(numerics.Bool, 2)}, attrs: Attrs{"to": DTypeAttr(numerics.F8E4M3)}},
	},
	"reduce_sum": {
		{in: []Type{ty(f32, 2, 3, 4)}, attrs: Attrs{"axes": Ints(0, -1), "keepdims": Bool(true), "accum": DTypeAttr(numerics.F64)}},
		{in: []Type{ty(i32, 5)}},
	},
	"reduce_max":  {{in: []Type{ty(f32, 2, 3)}, attrs: Attrs{"axes": Ints(1)}}},
	"reduce_mean": {{in: []Type{ty(numerics.F16, 4, 4)}, attrs: Attrs{"keepdims": Bool(false)}}},
	"softmax":     {{in: []Type{ty(f32, 2, 8)}, attrs: Attrs{"axis": Int(0), "accum": DTypeAttr(f32)}}},
	"log_softmax": {{in: []Type{ty(bf16, 3, 5)}, attrs: Attrs{"axis": Int(-1)}}},
	"layernorm": {
		{in: []Type{ty(f32, 4, 8), ty(f32, 8), ty(f32, 8)}, attrs: Attrs{"eps": Float(1e-5)}},
		{in: []Type{ty(f32, 4, 8), ty(f32, 8), ty(f32, 8)}, attrs: Attrs{"eps": Float(2)}},
	},
	"rmsnorm": {{in: []Type{ty(bf16, 2, 16), ty(bf16, 16)}, attrs: Attrs{"eps": Float(0)}}},
	"matmul": {
		{in: []Type{ty(f32, 4, 8), ty(f32, 16, 8)}, attrs: Attrs{"transpose_b": Bool(true), "tile": Ints(32, 32, 16)}},
		{in: []Type{ty(i32, 2, 3), ty(i32, 3, 4)}, attrs: Attrs{"accum": DTypeAttr(i32)}},
	},
	"scaled_matmul": {
		{in: []Type{ty(numerics.F8E4M3, 4, 32), ty(numerics.F8E4M3, 16, 32), ty(f32), ty(f32, 1)}},
		{in: []Type{ty(numerics.F8E4M3, 3, 5), ty(numerics.F8E4M3, 7, 5), ty(f32, 1), ty(f32)}, attrs: Attrs{"out_dtype": DTypeAttr(f32), "tile": Ints(64, 64, 128)}},
	},
	"batch_matmul": {{in: []Type{ty(numerics.F16, 2, 8, 4), ty(numerics.F16, 2, 8, 4)}, attrs: Attrs{"transpose_a": Bool(true)}}},
	"attention": {
		{in: []Type{ty(f32, 2, 4, 8), ty(f32, 2, 6, 8), ty(f32, 2, 6, 3)}, attrs: Attrs{"causal": Bool(true), "scale": Float(0.125)}},
		{in: []Type{ty(f32, 4, 8), ty(f32, 4, 8), ty(f32, 4, 8)}, attrs: Attrs{"scale": Float(math.NaN())}},
		{in: []Type{ty(f32, 4, 8), ty(f32, 4, 8), ty(f32, 4, 8)}, attrs: Attrs{"scale": Float(math.Inf(-1))}},
		{in: []Type{ty(f32, 4, 8), ty(f32, 4, 8), ty(f32, 4, 8)}, attrs: Attrs{"scale": Float(math.Copysign(0, -1))}},
		{in: []Type{ty(f32, 4, 8), ty(f32, 4, 8), ty(f32, 4, 8)}, attrs: Attrs{"scale": Float(5e-324)}},
		{in: []Type{ty(f32, 4, 8), ty(f32, 4, 8), ty(f32, 4, 8)}, attrs: Attrs{"scale": Float(1e21)}},
	},
	"full_like": {
		{in: []Type{ty(f32, 2, 3)}, attrs: Attrs{"value": Float(0.5)}}, {in: []Type{ty(i32, 4)}, attrs: Attrs{"value": Float(-3)}},
		{in: []Type{ty(numerics.F16, 3)}, attrs: Attrs{"value": Float(math.NaN())}}, {in: []Type{ty(f32)}, attrs: Attrs{"value": Float(math.Copysign(0, -1))}},
		{in: []Type{ty(numerics.F8E4M3, 2)}, attrs: Attrs{"value": Float(math.Inf(-1))}},
	},
	"sign": {{in: []Type{ty(f32, 2, 3)}}, {in: []Type{ty(numerics.I8, 5)}}},
	"erf":  {{in: []Type{ty(bf16, 7)}}, {in: []Type{ty(numerics.F64)}}},
	"attention_lse": {
		{in: []Type{ty(f32, 2, 4, 8), ty(f32, 2, 6, 8)}, attrs: Attrs{"causal": Bool(true)}},
		{in: []Type{ty(bf16, 4, 8), ty(bf16, 5, 8)}, attrs: Attrs{"scale": Float(0.25)}},
	},
	"attention_grad": {
		{in: []Type{ty(bf16, 2, 4, 8), ty(bf16, 2, 6, 8), ty(bf16, 2, 6, 3), ty(bf16, 2, 4, 3), ty(bf16, 2, 4, 3), ty(f32, 2, 4)}, attrs: Attrs{"causal": Bool(true), "wrt": String("k")}},
		{in: []Type{ty(numerics.F64, 4, 8), ty(numerics.F64, 4, 8), ty(numerics.F64, 4, 8), ty(numerics.F64, 4, 8), ty(numerics.F64, 4, 8), ty(numerics.F64, 4)}, attrs: Attrs{"wrt": String("q")}},
		// An f64 accumulator makes lse f64 for f16 inputs; Dv (5) differs from D (8).
		{in: []Type{ty(numerics.F16, 3, 2, 7, 8), ty(numerics.F16, 3, 2, 9, 8), ty(numerics.F16, 3, 2, 9, 5), ty(numerics.F16, 3, 2, 7, 5), ty(numerics.F16, 3, 2, 7, 5), ty(numerics.F64, 3, 2, 7)},
			attrs: Attrs{"wrt": String("v"), "scale": Float(0.125), "accum": DTypeAttr(numerics.F64)}},
	},
	"transpose": {
		{in: []Type{ty(f32, 2, 3, 4)}, attrs: Attrs{"perm": Ints(2, 0, 1)}},
		{in: []Type{ty(f32)}, attrs: Attrs{"perm": Ints()}},
	},
	"reshape": {
		{in: []Type{ty(f32, 2, 3, 4)}, attrs: Attrs{"shape": Ints(6, -1)}},
		{in: []Type{ty(f32, 1, 1)}, attrs: Attrs{"shape": Ints()}},
	},
	"slice":    {{in: []Type{ty(i32, 4, 5)}, attrs: Attrs{"starts": Ints(1, 0), "ends": Ints(3, 5)}}},
	"concat":   {{in: []Type{ty(f32, 2, 3), ty(f32, 2, 1), ty(f32, 2, 4)}, attrs: Attrs{"axis": Int(-1)}}},
	"mse_loss": {{in: []Type{ty(f32, 4, 4), ty(f32, 4, 4)}, attrs: Attrs{"accum": DTypeAttr(numerics.F64)}}},
}

// buildOpCase builds a one-node graph for the case with the Go builder.
func buildOpCase(t *testing.T, op string, c opCase) *Graph {
	t.Helper()
	b := NewBuilder("g_" + op)
	var ins []*Value
	for i, typ := range c.in {
		ins = append(ins, b.Input("in"+string(rune('a'+i)), typ.DType, typ.Shape...))
	}
	b.Output(b.Named("y", op, c.attrs, ins...))
	g, err := b.Build()
	if err != nil {
		t.Fatalf("%s: building the test case: %v", op, err)
	}
	return g
}

// roundTrip checks parse(print(g)) == g and print(parse(print(g))) == print(g).
func roundTrip(t *testing.T, g *Graph) {
	t.Helper()
	text := Print(g)
	g2, err := Parse(text, "roundtrip.tg")
	if err != nil {
		t.Fatalf("Parse(Print(g)): %v\n%s", err, text)
	}
	if d := Diff(g, g2); d != "" {
		t.Fatalf("Parse(Print(g)) differs: %s\n%s", d, text)
	}
	if text2 := Print(g2); text2 != text {
		t.Fatalf("printing is not stable:\n%s\nvs\n%s", text, text2)
	}
}

func TestRoundTripEveryOp(t *testing.T) {
	for _, d := range Ops() {
		cases, ok := opCases[d.Name]
		if !ok {
			t.Errorf("op %s is registered but has no case in opCases", d.Name)
			continue
		}
		for _, c := range cases {
			roundTrip(t, buildOpCase(t, d.Name, c))
		}
	}
	for name := range opCases {
		if _, ok := Lookup(name); !ok {
			t.Errorf("opCases names %s, which is not registered", name)
		}
	}
}

// TestRoundTripAllOpsInOneGraph puts every case into one graph so wiring by name, many inputs
// and many outputs travel together.
func TestRoundTripAllOpsInOneGraph(t *testing.T) {
	b := NewBuilder("all.ops")
	var outs []*Value
	for _, d := range Ops() {
		for ci, c := range opCases[d.Name] {
			var ins []*Value
			for i, typ := range c.in {
				ins = append(ins, b.Input(d.Name+"_"+string(rune('a'+ci))+string(rune('a'+i)), typ.DType, typ.Shape...))
			}
			outs = append(outs, b.Op(d.Name, c.attrs, ins...))
		}
	}
	b.Output(outs...)
	g, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	roundTrip(t, g)
}

func TestPrintCanonical(t *testing.T) {
	b := NewBuilder("mlp")
	x := b.Input("x", f32, 4, 8)
	w := b.Input("w", f32, 8, 16)
	s := b.Input("s", f32)
	h := b.Named("h", "matmul", Attrs{"transpose_b": Bool(false), "tile": Ints(32, 32, 16)}, x, w)
	hs := b.Named("hs", "mul", nil, h, s)
	y := b.Named("y", "layernorm", Attrs{"eps": Float(1)}, hs, b.Input("gamma", f32, 16), b.Input("beta", f32, 16))
	z := b.Named("z", "cast", Attrs{"to": DTypeAttr(bf16)}, y)
	b.Output(z, h)
	g, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	want := `graph mlp {
  input %x: f32[4,8]
  input %w: f32[8,16]
  input %s: f32[]
  input %gamma: f32[16]
  input %beta: f32[16]
  %h: f32[4,16] = matmul(%x, %w) {tile=[32,32,16], transpose_b=false}
  %hs: f32[4,16] = mul(%h, %s)
  %y: f32[4,16] = layernorm(%hs, %gamma, %beta) {eps=1.0}
  %z: bf16[4,16] = cast(%y) {to=bf16}
  output %z, %h
}
`
	if got := Print(g); got != want {
		t.Fatalf("Print:\n%s\nwant:\n%s", got, want)
	}
	if g.String() != want {
		t.Fatal("String() differs from Print")
	}
	for range 20 { // map iteration order must not leak into the text
		if Print(g.Clone()) != want {
			t.Fatal("Print is not deterministic")
		}
	}
}

func TestFormatAttr(t *testing.T) {
	for _, c := range []struct {
		a    Attr
		want string
	}{
		{Float(2), "2.0"}, {Float(-3), "-3.0"}, {Float(1e-5), "1e-05"}, {Float(0.5), "0.5"},
		{Float(1e21), "1e+21"}, {Float(123456789), "1.23456789e+08"}, {Float(100000), "100000.0"},
		{Float(math.Copysign(0, -1)), "-0.0"}, {Float(math.Inf(1)), "inf"}, {Float(math.Inf(-1)), "-inf"},
		{Float(math.NaN()), "nan"}, {Int(-1), "-1"}, {Int(math.MinInt64), "-9223372036854775808"},
		{Bool(true), "true"}, {Ints(), "[]"}, {Ints(1, -2), "[1,-2]"}, {String("a\"b"), `"a\"b"`},
		{DTypeAttr(numerics.F8E5M2), "fp8e5m2"},
	} {
		if got := FormatAttr(c.a); got != c.want {
			t.Errorf("FormatAttr(%+v) = %q, want %q", c.a, got, c.want)
		}
	}
}

func TestPrintNeverPanicsOnBrokenGraphs(t *testing.T) {
	g := &Graph{Name: "broken", Nodes: []*Node{{Op: "relu", Inputs: []*Value{nil}, Attrs: Attrs{"k": {}}}}}
	text := Print(g)
	if !strings.Contains(text, "%<nil>: <nil> = relu(%<nil>) {k=<attrkind(0)>}") {
		t.Fatalf("unexpected rendering of a broken graph:\n%s", text)
	}
	if _, err := Parse(text, "broken.tg"); err == nil {
		t.Fatal("a broken graph's text parsed")
	}
	if Print(nil) != "" {
		t.Fatal("Print(nil) should be empty")
	}
}
