package graph

import (
	"slices"
	"strings"
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

// The convolutions' text round-trip cases (TestRoundTripEveryOp), every attribute form.
func init() {
	opCases["conv1d"] = []opCase{
		{in: []Type{ty(f32, 2, 4, 17), ty(f32, 6, 2, 3)}, attrs: Attrs{"stride": Ints(2), "padding": Ints(1), "dilation": Ints(2), "groups": Int(2)}},
		{in: []Type{ty(numerics.F64, 1, 3, 9), ty(numerics.F64, 5, 3, 4), ty(numerics.F64, 5)}},
	}
	opCases["conv2d"] = []opCase{
		{in: []Type{ty(f32, 2, 3, 9, 7), ty(f32, 4, 3, 3, 2), ty(f32, 4)}, attrs: Attrs{"stride": Ints(2, 1), "padding": Ints(1, 0), "dilation": Ints(1, 2)}},
		{in: []Type{ty(bf16, 1, 4, 5, 5), ty(bf16, 2, 2, 3, 3)}, attrs: Attrs{"padding": Ints(1), "groups": Int(2)}},
	}
}

// Output sizes follow torch's floor((L + 2p - d(K-1) - 1)/s) + 1 on each spatial axis.
func TestConvOutputShape(t *testing.T) {
	for _, c := range []struct {
		op    string
		x, w  []int
		attrs Attrs
		want  []int
	}{
		{"conv1d", []int{2, 4, 17}, []int{6, 2, 3}, Attrs{"stride": Ints(2), "padding": Ints(1), "dilation": Ints(2), "groups": Int(2)}, []int{2, 6, 8}},
		{"conv1d", []int{1, 1, 1024}, []int{1, 1, 63}, nil, []int{1, 1, 962}},
		{"conv2d", []int{2, 3, 9, 7}, []int{4, 3, 3, 2}, Attrs{"stride": Ints(2, 1), "padding": Ints(1, 0), "dilation": Ints(1, 2)}, []int{2, 4, 5, 5}},
		{"conv2d", []int{1, 2, 5, 6}, []int{3, 2, 3, 3}, Attrs{"padding": Ints(1)}, []int{1, 3, 5, 6}},
	} {
		b := NewBuilder("g")
		y := b.Op(c.op, c.attrs, b.Input("x", f32, c.x...), b.Input("w", f32, c.w...))
		if b.Err() != nil {
			t.Fatalf("%s %v: %v", c.op, c.x, b.Err())
		}
		if !slices.Equal(y.Type.Shape, c.want) {
			t.Errorf("%s x%v w%v %v: shape %v, want %v", c.op, c.x, c.w, c.attrs, y.Type.Shape, c.want)
		}
	}
}

// A bad attribute value is E_INPUT, a shape mismatch E_SHAPE; both name the node and op.
func TestConvErrorCodes(t *testing.T) {
	b := NewBuilder("g")
	b.Named("y", "conv1d", Attrs{"stride": Ints(0)}, b.Input("x", f32, 1, 2, 8), b.Input("w", f32, 3, 2, 3))
	if errs.CodeOf(b.Err()) != errs.Input {
		t.Errorf("stride 0: %v", b.Err())
	}
	b = NewBuilder("g")
	b.Named("y", "conv2d", nil, b.Input("x", f32, 1, 2, 2, 2), b.Input("w", f32, 3, 2, 3, 3))
	if err := b.Err(); errs.CodeOf(err) != errs.Shape || !strings.Contains(err.Error(), "%y: conv2d") || !strings.Contains(err.Error(), "dilated kernel") {
		t.Errorf("kernel larger than input: %v", err)
	}
}
