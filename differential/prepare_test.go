package differential

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
)

func build(t *testing.T, f func(b *graph.Builder) *graph.Value) *graph.Graph {
	t.Helper()
	b := graph.NewBuilder("g")
	b.Output(f(b))
	g, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func TestPrepareFillsDefaultsAndWritesScalarShapes(t *testing.T) {
	g := build(t, func(b *graph.Builder) *graph.Value {
		x := b.Input("x", numerics.F32, 3, 4)
		s := b.Op("softmax", nil, x)
		return b.Op("reduce_sum", nil, s) // all axes: a scalar
	})
	in := map[string]*tensor.Tensor{"x": tensor.New(numerics.F32, []int{3, 4})}
	p, err := Prepare("c", g, in)
	if err != nil {
		t.Fatal(err)
	}
	if p.Transport != Native {
		t.Errorf("transport %v for an f32 graph", p.Transport)
	}
	sm, sum := p.Case.Nodes[0], p.Case.Nodes[1]
	if sm.Attrs["axis"] != int64(-1) {
		t.Errorf("softmax axis default not filled in: %v", sm.Attrs)
	}
	if _, set := sm.Attrs["accum"]; set {
		t.Errorf("an optional attribute without a value was sent: %v", sm.Attrs)
	}
	if sum.Attrs["keepdims"] != false {
		t.Errorf("keepdims default not filled in: %v", sum.Attrs)
	}
	b, err := json.Marshal(p.Case)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "null") {
		t.Errorf("a scalar shape or empty list went out as null: %s", b)
	}
	if !strings.Contains(string(b), `"shape":[]`) {
		t.Errorf("the scalar output has no [] shape: %s", b)
	}
}

func TestPrepareFP8Transports(t *testing.T) {
	e4 := numerics.F8E4M3
	x := tensor.FromFloat64(e4, []int{2, 2}, []float64{1, -2, 448, 0.5})

	// Movement only: the bytes travel unchanged as uint8 and come back relabelled.
	mv := build(t, func(b *graph.Builder) *graph.Value {
		return b.Op("transpose", graph.Attrs{"perm": graph.Ints(1, 0)}, b.Input("x", e4, 2, 2))
	})
	p, err := Prepare("mv", mv, map[string]*tensor.Tensor{"x": x})
	if err != nil {
		t.Fatal(err)
	}
	if p.Transport != FP8Bits || p.Case.Inputs[0].DType != WireUint8 || p.Case.Nodes[0].DType != WireUint8 {
		t.Fatalf("movement graph: transport %v, input %s, node %s", p.Transport, p.Case.Inputs[0].DType, p.Case.Nodes[0].DType)
	}
	out, err := p.Decode(WireResult{Outputs: []WireTensor{{Name: mv.Outputs[0].Name, DType: WireUint8, Shape: []int{2, 2}, Data: []byte{0x7f, 1, 2, 3}}}})
	if err != nil {
		t.Fatal(err)
	}
	if out[0].DType != e4 || out[0].Bits(0) != 0x7f {
		t.Errorf("fp8 bits not passed through: %s %x", out[0].TypeString(), out[0].Data)
	}

	// Arithmetic: exact f32 values out, f32 back, rounded (and saturated) by numerics.Encode.
	ar := build(t, func(b *graph.Builder) *graph.Value {
		return b.Op("cast", graph.Attrs{"to": graph.DTypeAttr(numerics.F8E5M2)}, b.Input("x", e4, 2, 2))
	})
	p, err = Prepare("ar", ar, map[string]*tensor.Tensor{"x": x})
	if err != nil {
		t.Fatal(err)
	}
	if p.Transport != FP8Upcast || p.Case.Inputs[0].DType != "f32" || p.Case.Nodes[0].Attrs["to"] != "f32" {
		t.Fatalf("arithmetic graph: transport %v, input %s, attrs %v", p.Transport, p.Case.Inputs[0].DType, p.Case.Nodes[0].Attrs)
	}
	if got := (&tensor.Tensor{DType: numerics.F32, Shape: []int{4}, Data: p.Case.Inputs[0].Data}).Float64s(); got[2] != 448 || got[3] != 0.5 {
		t.Errorf("fp8 inputs not decoded exactly: %v", got)
	}
	back := tensor.FromFloat64(numerics.F32, []int{2, 2}, []float64{1e6, -0.3, 3, 57344})
	out, err = p.Decode(WireResult{Outputs: []WireTensor{WireOf(ar.Outputs[0].Name, back)}})
	if err != nil {
		t.Fatal(err)
	}
	if v := out[0].Float64s(); v[0] != 57344 || v[2] != 3 {
		t.Errorf("f32 -> fp8e5m2 decode %v: 1e6 must saturate to 57344 as numerics.Encode does", v)
	}
	if out[0].Bits(1) != numerics.Encode(numerics.F8E5M2, float64(float32(-0.3))) {
		t.Errorf("decode does not round with numerics.Encode")
	}

	// An fp8 intermediate computed by arithmetic cannot be rounded inside the oracle.
	mid := build(t, func(b *graph.Builder) *graph.Value {
		y := b.Op("exp", nil, b.Input("x", e4, 2, 2))
		return b.Op("cast", graph.Attrs{"to": graph.DTypeAttr(numerics.F32)}, y)
	})
	_, err = Prepare("mid", mid, map[string]*tensor.Tensor{"x": x})
	if errs.CodeOf(err) != errs.Unsupported || !strings.Contains(err.Error(), "fp8 intermediate") {
		t.Errorf("fp8 intermediate: %v, want E_UNSUPPORTED naming it", err)
	}
}

func TestDecodeRejectsWrongAnswers(t *testing.T) {
	g := build(t, func(b *graph.Builder) *graph.Value { return b.Op("exp", nil, b.Input("x", numerics.F32, 2)) })
	p, err := Prepare("c", g, map[string]*tensor.Tensor{"x": f32s(1, 2)})
	if err != nil {
		t.Fatal(err)
	}
	name := g.Outputs[0].Name
	for _, c := range []struct {
		w    WireTensor
		want string
	}{
		{WireTensor{Name: name, DType: "f64", Shape: []int{2}, Data: make([]byte, 16)}, "is f64[2], want f32[2]"},
		{WireTensor{Name: name, DType: "f32", Shape: []int{1, 2}, Data: make([]byte, 8)}, "want f32[2]"},
		{WireTensor{Name: name, DType: "f32", Shape: []int{2}, Data: make([]byte, 7)}, "holds 7 bytes, needs 8"},
		{WireTensor{Name: "other", DType: "f32", Shape: []int{2}, Data: make([]byte, 8)}, "want %" + name},
	} {
		_, err := p.Decode(WireResult{Outputs: []WireTensor{c.w}})
		if errs.CodeOf(err) != errs.Input || !strings.Contains(err.Error(), c.want) {
			t.Errorf("decode %+v: %v, want E_INPUT with %q", c.w, err, c.want)
		}
	}
	if _, err := p.Decode(WireResult{}); err == nil {
		t.Error("an answer without outputs decoded")
	}
}

func TestPrepareRejectsNonFiniteFloatAttributes(t *testing.T) {
	g := build(t, func(b *graph.Builder) *graph.Value {
		x := b.Input("x", numerics.F32, 2, 3)
		return b.Op("rmsnorm", nil, x, b.Input("g", numerics.F32, 3))
	})
	g.Nodes[0].Attrs = graph.Attrs{"eps": graph.Float(1e-3)}
	in := map[string]*tensor.Tensor{"x": tensor.New(numerics.F32, []int{2, 3}), "g": tensor.New(numerics.F32, []int{3})}
	if _, err := Prepare("c", g, in); err != nil {
		t.Fatal(err)
	}
	// The graph verifier rejects eps = NaN itself; an Inf scale reaches Prepare.
	q := build(t, func(b *graph.Builder) *graph.Value {
		return b.Op("attention", graph.Attrs{"scale": graph.Float(posInf())}, b.Input("q", numerics.F32, 2, 2), b.Input("k", numerics.F32, 2, 2), b.Input("v", numerics.F32, 2, 2))
	})
	in = map[string]*tensor.Tensor{"q": tensor.New(numerics.F32, []int{2, 2}), "k": tensor.New(numerics.F32, []int{2, 2}), "v": tensor.New(numerics.F32, []int{2, 2})}
	_, err := Prepare("c", q, in)
	if errs.CodeOf(err) != errs.Input || !strings.Contains(err.Error(), "scale") {
		t.Errorf("Inf scale: %v, want E_INPUT naming the attribute", err)
	}
}
