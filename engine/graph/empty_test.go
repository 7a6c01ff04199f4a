package graph

import (
	"slices"
	"strings"
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/errs"
)

// Empty tensors (a dim of size 0) parse, print back to the same text, and infer PyTorch's
// shapes; the rules that refuse them name the node, the shape and the reason.

func TestEmptyDimsParseInferAndRoundTrip(t *testing.T) {
	for _, c := range []struct{ body, want string }{
		{"input %x: f32[3,0]\n  %y = reduce_sum(%x) {axes=[1]}", "f32[3]"},
		{"input %x: f32[3,0]\n  %y = reduce_mean(%x) {axes=[1], keepdims=true}", "f32[3,1]"},
		{"input %x: f32[0,3]\n  %y = reduce_max(%x) {axes=[1]}", "f32[0]"}, // the empty axis is kept, not reduced
		{"input %x: f32[3,0]\n  %y = softmax(%x)", "f32[3,0]"},
		{"input %a: f32[2,0]\n  input %b: f32[0,3]\n  %y = matmul(%a, %b)", "f32[2,3]"},
		{"input %a: f32[0,4]\n  input %b: f32[4,3]\n  %y = matmul(%a, %b)", "f32[0,3]"},
		{"input %x: f32[0,3]\n  input %z: f32[1,3]\n  %y = add(%x, %z)", "f32[0,3]"}, // 1 broadcasts to 0
		{"input %x: f32[3,0,2]\n  %y = reshape(%x) {shape=[-1,2]}", "f32[0,2]"},
		{"input %x: f32[3,0,2]\n  %y = reshape(%x) {shape=[0,5]}", "f32[0,5]"},
		{"input %x: f32[4,3]\n  %y = slice(%x) {starts=[2,0], ends=[2,3]}", "f32[0,3]"}, // x[2:2]
		{"input %x: f32[0,3]\n  input %z: f32[2,3]\n  %y = concat(%x, %z, %x) {axis=0}", "f32[2,3]"},
		{"input %q: f32[2,0,4]\n  input %k: f32[2,0,4]\n  input %v: f32[2,0,3]\n  %y = attention(%q, %k, %v)", "f32[2,0,3]"},
		{"input %q: f32[2,5,4]\n  input %k: f32[2,0,4]\n  input %v: f32[2,0,3]\n  %y = attention(%q, %k, %v)", "f32[2,5,3]"},
		{"input %x: f32[0]\n  input %z: f32[0]\n  %y = mse_loss(%x, %z)", "f32[]"},
	} {
		src := "graph e {\n  " + c.body + "\n  output %y\n}\n"
		g, err := Parse(src, "e.tg")
		if err != nil {
			t.Errorf("%s: %v", c.body, err)
			continue
		}
		if got := g.Outputs[0].Type.String(); got != c.want {
			t.Errorf("%s: infers %s, want %s (torch's shape)", c.body, got, c.want)
		}
		back, err := Parse(Print(g), "e.tg")
		if err != nil || !Equal(g, back) {
			t.Errorf("%s: print/parse does not round-trip: %v\n%s", c.body, err, Print(g))
		}
	}
}

// TestEmptyDimsRefusedWhereTorchRefuses covers the rules that empty tensors added or changed:
// each must fail with its code, naming the node and the shape.
func TestEmptyDimsRefusedWhereTorchRefuses(t *testing.T) {
	for _, c := range []struct {
		body string
		code errs.Code
		want []string
	}{
		// torch: "amax(): Expected reduction dim 1 to have non-zero size."
		{"input %x: f32[3,0]\n  %y = reduce_max(%x) {axes=[1]}", errs.Shape, []string{"node %y", "f32[3,0]", "axis 1 of size 0", "max has no identity"}},
		// torch: "max(): Expected reduction dim to be specified for input.numel() == 0."
		{"input %x: f32[0,4]\n  %y = reduce_max(%x)", errs.Shape, []string{"node %y", "f32[0,4]", "axis 0 of size 0"}},
		{"input %x: int32[2,0,3]\n  %y = reduce_max(%x) {axes=[-2], keepdims=true}", errs.Shape, []string{"node %y", "axis 1 of size 0"}},
		// torch: "the unspecified dimension size -1 can be any value and is ambiguous"
		{"input %x: f32[3,0]\n  %y = reshape(%x) {shape=[0,-1]}", errs.Shape, []string{"node %y", "-1 is ambiguous"}},
		{"input %x: f32[3,0]\n  %y = reshape(%x) {shape=[-2,0]}", errs.Shape, []string{"node %y", "dims must be >= 0"}},
		{"input %x: f32[0,3]\n  %y = reshape(%x) {shape=[0,268435457]}", errs.Shape, []string{"node %y", "more than"}},
		{"input %x: f32[4,3]\n  %y = slice(%x) {starts=[3,0], ends=[2,3]}", errs.Shape, []string{"node %y", "[3:2]", "reversed"}},
		{"input %x: f32[4,3]\n  %y = slice(%x) {starts=[5,0], ends=[5,3]}", errs.Shape, []string{"node %y", "[5:5] outside 0..4"}},
		// torch: "The size of tensor a (0) must match the size of tensor b (2)"
		{"input %x: f32[0,3]\n  input %z: f32[2,3]\n  %y = add(%x, %z)", errs.Shape, []string{"node %y", "do not broadcast"}},
		{"input %a: f32[2,0]\n  input %b: f32[3,4]\n  %y = matmul(%a, %b)", errs.Shape, []string{"node %y", "K=0 vs 3"}},
		{"input %q: f32[2,5,0]\n  input %k: f32[2,3,0]\n  input %v: f32[2,3,4]\n  %y = attention(%q, %k, %v)", errs.Shape, []string{"node %y", "head dim D = 0"}},
		{"input %q: f32[5,0]\n  input %k: f32[3,0]\n  %y = attention_lse(%q, %k)", errs.Shape, []string{"node %y", "head dim D = 0"}},
	} {
		src := "graph e {\n  " + c.body + "\n  output %y\n}\n"
		_, err := Parse(src, "e.tg")
		if errs.CodeOf(err) != c.code {
			t.Errorf("%s: got %v, want %s", c.body, err, c.code)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %q does not say %q", c.body, err, w)
			}
		}
	}
}

// The builder applies the same rules: an empty batch builds, a max over it does not.
func TestBuilderAcceptsEmptyAndRefusesMaxOverEmpty(t *testing.T) {
	b := NewBuilder("e")
	x := b.Input("x", f32, 0, 4)
	b.Output(b.Op("reduce_sum", Attrs{"axes": Ints(0)}, x))
	g, err := b.Build()
	if err != nil || !slices.Equal(g.Outputs[0].Type.Shape, []int{4}) {
		t.Fatalf("sum over an empty batch: %v, %v", g, err)
	}
	b = NewBuilder("e")
	x = b.Input("x", f32, 0, 4)
	b.Output(b.Op("reduce_max", Attrs{"axes": Ints(0)}, x))
	if _, err := b.Build(); errs.CodeOf(err) != errs.Shape || !strings.Contains(err.Error(), "size 0") {
		t.Fatalf("max over an empty batch: got %v, want E_SHAPE", err)
	}
}
