package graph

import (
	"strings"
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

func build1(op string, attrs Attrs, ins ...Type) (*Graph, error) {
	b := NewBuilder("t")
	var vs []*Value
	for i, t := range ins {
		vs = append(vs, b.Input(string(rune('a'+i)), t.DType, t.Shape...))
	}
	b.Output(b.Op(op, attrs, vs...))
	return b.Build()
}

// Issue 21: what the verifier accepts (as torch 1.13 does) and refuses, with the code.
func TestIssue21Rules(t *testing.T) {
	i8 := numerics.I8
	ok := []struct {
		op    string
		attrs Attrs
		in    []Type
		want  []int
	}{
		{"reduce_sum", Attrs{"axes": Ints()}, []Type{ty(f32, 2, 3)}, nil},
		{"reduce_max", Attrs{"axes": Ints(), "keepdims": Bool(true)}, []Type{ty(f32, 2, 3, 4)}, []int{1, 1, 1}},
		{"reduce_mean", Attrs{"axes": Ints(0)}, []Type{ty(f32)}, nil},
		{"reduce_sum", Attrs{"axes": Ints(-1), "keepdims": Bool(true)}, []Type{ty(f32)}, nil},
		{"reduce_sum", Attrs{"axes": Ints()}, []Type{ty(f32)}, nil},
		{"softmax", Attrs{"axis": Int(0)}, []Type{ty(f32)}, nil},
		{"log_softmax", Attrs{"axis": Int(-1)}, []Type{ty(f32)}, nil},
		{"div", Attrs{"rounding_mode": String("floor")}, []Type{ty(i8, 3), ty(i8, 2, 1)}, []int{2, 3}},
		{"div", Attrs{"rounding_mode": String("trunc")}, []Type{ty(f32, 3), ty(f32, 3)}, []int{3}},
		{"mse_loss", Attrs{"reduction": String("none")}, []Type{ty(f32, 2, 3), ty(f32, 2, 3)}, []int{2, 3}},
		{"mse_loss", Attrs{"reduction": String("sum")}, []Type{ty(f32, 2, 3), ty(f32, 2, 3)}, nil},
	}
	for _, c := range ok {
		g, err := build1(c.op, c.attrs, c.in...)
		if err != nil {
			t.Errorf("%s %v %v: %v", c.op, c.attrs, c.in, err)
			continue
		}
		if got := g.Outputs[0].Type.Shape; len(got) != len(c.want) || (len(got) > 0 && !equalInts(got, c.want)) {
			t.Errorf("%s %v %v: shape %v, want %v", c.op, c.attrs, c.in, got, c.want)
		}
	}
	bad := []struct {
		op    string
		attrs Attrs
		in    []Type
		code  errs.Code
		say   string
	}{
		{"reduce_sum", Attrs{"axes": Ints(1)}, []Type{ty(f32)}, errs.Shape, "rank 0 takes axis 0 or -1"},
		{"reduce_max", Attrs{"axes": Ints(-2)}, []Type{ty(f32)}, errs.Shape, "out of range for a scalar"},
		{"reduce_sum", Attrs{"axes": Ints(0, -1)}, []Type{ty(f32)}, errs.Shape, "repeated"},
		{"softmax", Attrs{"axis": Int(1)}, []Type{ty(f32)}, errs.Shape, "node %"},
		{"log_softmax", Attrs{"axis": Int(-2)}, []Type{ty(f32)}, errs.Shape, "f32[]"},
		{"concat", Attrs{"axis": Int(0)}, []Type{ty(f32), ty(f32)}, errs.Shape, "out of range"},
		{"layernorm", nil, []Type{ty(f32), ty(f32, 1), ty(f32, 1)}, errs.Shape, "rank >= 1"},
		{"div", nil, []Type{ty(i8, 3), ty(i8, 3)}, errs.DType, "rounding_mode"},
		{"div", Attrs{"rounding_mode": String("round")}, []Type{ty(f32, 3), ty(f32, 3)}, errs.Input, `"trunc", "floor"`},
		{"div", Attrs{"rounding_mode": Int(1)}, []Type{ty(f32, 3), ty(f32, 3)}, errs.Input, "must be string"},
		{"mse_loss", Attrs{"reduction": String("batchmean")}, []Type{ty(f32, 3), ty(f32, 3)}, errs.Input, `"mean", "sum", "none"`},
		{"mse_loss", Attrs{"reduction": String("none")}, []Type{ty(f32, 3), ty(f32, 2)}, errs.Shape, "shapes differ"},
		{"mse_loss", Attrs{"accum": DTypeAttr(numerics.I32)}, []Type{ty(f32, 3), ty(f32, 3)}, errs.DType, "accum"},
	}
	for _, c := range bad {
		_, err := build1(c.op, c.attrs, c.in...)
		if errs.CodeOf(err) != c.code || !strings.Contains(err.Error(), c.say) {
			t.Errorf("%s %v %v: got %v, want %s containing %q", c.op, c.attrs, c.in, err, c.code, c.say)
		}
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// The text format keeps the new attributes: parse(print(g)) == g.
func TestIssue21RoundTrip(t *testing.T) {
	src := `graph r {
  input %x: f32[2,3]
  input %s: f32[]
  input %i: int32[2,3]
  %a: f32[] = reduce_sum(%x) {axes=[]}
  %k: f32[1,1] = reduce_max(%x) {axes=[], keepdims=true}
  %m: f32[] = reduce_mean(%s) {axes=[-1]}
  %p: f32[] = softmax(%s) {axis=0}
  %q: int32[2,3] = div(%i, %i) {rounding_mode="floor"}
  %t: f32[2,3] = div(%x, %x) {rounding_mode="trunc"}
  %l: f32[2,3] = mse_loss(%x, %x) {reduction="none"}
  %u: f32[] = mse_loss(%x, %x) {reduction="sum"}
  output %a, %k, %m, %p, %q, %t, %l, %u
}
`
	g := mustParse(t, src)
	h := mustParse(t, Print(g))
	if d := Diff(g, h); d != "" {
		t.Fatalf("round trip: %s", d)
	}
	if Print(h) != Print(g) {
		t.Fatalf("printed twice differently:\n%s\n%s", Print(g), Print(h))
	}
}
