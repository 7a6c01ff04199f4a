package graph

import (
	"strings"
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

// TestScaledMatmulChecks: the shape and dtype rules of scaled_matmul, each refusal coded and
// naming the node.
func TestScaledMatmulChecks(t *testing.T) {
	e4, f32 := numerics.F8E4M3, numerics.F32
	ty := func(dt numerics.DType, s ...int) Type { return Type{DType: dt, Shape: s} }
	cases := []struct {
		name  string
		in    []Type
		attrs Attrs
		want  Type
		code  errs.Code
		msg   string
	}{
		{"bf16 out by default", []Type{ty(e4, 5, 32), ty(e4, 7, 32), ty(f32), ty(f32, 1)}, nil, ty(numerics.BF16, 5, 7), "", ""},
		{"f32 out", []Type{ty(e4, 5, 32), ty(e4, 7, 32), ty(f32), ty(f32)}, Attrs{"out_dtype": DTypeAttr(f32)}, ty(f32, 5, 7), "", ""},
		{"b is [N,K]", []Type{ty(e4, 5, 32), ty(e4, 32, 7), ty(f32), ty(f32)}, nil, Type{}, errs.Shape, "inner dims differ"},
		{"e5m2 operands", []Type{ty(numerics.F8E5M2, 5, 32), ty(numerics.F8E5M2, 7, 32), ty(f32), ty(f32)}, nil, Type{}, errs.DType, "does not accept"},
		{"mixed operands", []Type{ty(e4, 5, 32), ty(numerics.BF16, 7, 32), ty(f32), ty(f32)}, nil, Type{}, errs.DType, ""},
		{"bf16 scale", []Type{ty(e4, 5, 32), ty(e4, 7, 32), ty(numerics.BF16), ty(f32)}, nil, Type{}, errs.DType, "scale_a must be an f32 scalar"},
		{"vector scale", []Type{ty(e4, 5, 32), ty(e4, 7, 32), ty(f32), ty(f32, 7)}, nil, Type{}, errs.DType, "scale_b must be an f32 scalar"},
		{"fp8 out", []Type{ty(e4, 5, 32), ty(e4, 7, 32), ty(f32), ty(f32)}, Attrs{"out_dtype": DTypeAttr(e4)}, Type{}, errs.DType, "out_dtype fp8e4m3"},
		{"rank 3", []Type{ty(e4, 2, 5, 32), ty(e4, 2, 7, 32), ty(f32), ty(f32)}, nil, Type{}, errs.Shape, "rank-2"},
	}
	for _, c := range cases {
		n := &Node{Op: "scaled_matmul", Attrs: c.attrs, Output: &Value{Name: "y"}}
		for i, typ := range c.in {
			n.Inputs = append(n.Inputs, &Value{Name: string(rune('a' + i)), Type: typ})
		}
		got, err := InferNode(n)
		if c.code == "" {
			if err != nil || got.String() != c.want.String() {
				t.Errorf("%s: got %v, %v; want %v", c.name, got, err, c.want)
			}
			continue
		}
		if errs.CodeOf(err) != c.code || !strings.Contains(err.Error(), "node %y") || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%s: got %v, want %s mentioning %q", c.name, err, c.code, c.msg)
		}
	}
}
