package ref

import (
	"math"
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
)

func TestEveryRegisteredOpHasImpl(t *testing.T) {
	ops := graph.Ops()
	if len(ops) == 0 {
		t.Fatal("graph registry is empty")
	}
	for _, d := range ops {
		if !Has(d.Name) {
			t.Errorf("op %s is registered in graph but has no reference implementation", d.Name)
		}
	}
	for name := range impls {
		if _, ok := graph.Lookup(name); !ok {
			t.Errorf("ref implements %s, which the graph registry does not know", name)
		}
	}
	if Has("no_such_op") {
		t.Error("Has reports an unknown op")
	}
}

func addGraph(t *testing.T) *graph.Graph {
	t.Helper()
	b := graph.NewBuilder("addg")
	x := b.Input("x", f32, 2, 3)
	y := b.Input("y", f32, 3)
	b.Output(b.Op("add", nil, x, y))
	g, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func TestRunRejectsBadInputs(t *testing.T) {
	g := addGraph(t)
	x, y := tensor.New(f32, sh(2, 3)), tensor.New(f32, sh(3))
	short := tensor.New(f32, sh(3))
	short.Data = short.Data[:8]
	for _, c := range []struct {
		name string
		in   map[string]*tensor.Tensor
		code errs.Code
	}{
		{"missing", map[string]*tensor.Tensor{"x": x}, errs.Input},
		{"nil_tensor", map[string]*tensor.Tensor{"x": x, "y": nil}, errs.Input},
		{"extra", map[string]*tensor.Tensor{"x": x, "y": y, "z": y}, errs.Input},
		{"wrong_dtype", map[string]*tensor.Tensor{"x": x, "y": tensor.New(f64, sh(3))}, errs.DType},
		{"wrong_shape", map[string]*tensor.Tensor{"x": tensor.New(f32, sh(3, 2)), "y": y}, errs.Shape},
		{"short_data", map[string]*tensor.Tensor{"x": x, "y": short}, errs.Input},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Run(g, c.in)
			if got := errs.CodeOf(err); got != c.code {
				t.Fatalf("code %q, want %q (err: %v)", got, c.code, err)
			}
		})
	}
	if _, err := Run(nil, nil); errs.CodeOf(err) != errs.Input {
		t.Errorf("nil graph: %v", err)
	}
	if outs, err := Run(g, map[string]*tensor.Tensor{"x": x, "y": y}); err != nil || len(outs) != 1 {
		t.Fatalf("valid inputs: %v", err)
	}
}

// Intermediate values must be stored in their dtype: with x = 1+3*2^-10 in f16, x*x rounds to
// 1+6*2^-10 (the 9*2^-20 tail is below half an ulp), so x*x-1 is exactly 6*2^-10. Keeping x*x
// in float64 instead would leave 6*2^-10+8*2^-20 after the final rounding.
func TestRunRoundsEveryNode(t *testing.T) {
	b := graph.NewBuilder("chain")
	x := b.Input("x", f16, 1)
	one := b.Input("one", f16, 1)
	b.Output(b.Op("sub", nil, b.Op("mul", nil, x, x), one))
	g, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	outs, err := Run(g, map[string]*tensor.Tensor{"x": tt(f16, sh(1), 1+3.0/1024), "one": tt(f16, sh(1), 1)})
	if err != nil {
		t.Fatal(err)
	}
	expectTensor(t, "x*x-1", outs[0], f16, sh(1), []float64{6.0 / 1024}, 0)
}

// 2^53+1 is a tie that rounds to 2^53, so the sum depends on order: index order gives 1,
// reverse order would give 2.
func TestAccumulatesInIndexOrder(t *testing.T) {
	big := math.Exp2(53)
	vals := []float64{big, 1, -big, 1}
	got, err := runOp("reduce_sum", nil, tt(f64, sh(4), vals...))
	if err != nil {
		t.Fatal(err)
	}
	expectTensor(t, "reduce_sum", got, f64, nil, []float64{1}, 0)
	got, err = runOp("matmul", nil, tt(f64, sh(1, 4), vals...), tt(f64, sh(4, 1), 1, 1, 1, 1))
	if err != nil {
		t.Fatal(err)
	}
	expectTensor(t, "matmul", got, f64, sh(1, 1), []float64{1}, 0)
}

func TestOutputsAreCopies(t *testing.T) {
	b := graph.NewBuilder("passthrough")
	x := b.Input("x", f32, 2)
	r := b.Op("relu", nil, x)
	b.Output(x, r, r)
	g, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	in := tt(f32, sh(2), -1, 2)
	outs, err := Run(g, map[string]*tensor.Tensor{"x": in})
	if err != nil {
		t.Fatal(err)
	}
	outs[0].SetFloat64(0, 99)
	outs[1].SetFloat64(1, 99)
	if in.Float64(0) != -1 || outs[2].Float64(1) != 2 {
		t.Errorf("outputs alias each other or the input: in %v, outs %v %v", in.Float64s(), outs[1].Float64s(), outs[2].Float64s())
	}
}

func TestEvalErrors(t *testing.T) {
	a, b := tt(f32, sh(2), 1, 2), tt(f32, sh(3), 1, 2, 3)
	ia := tt(i32, sh(2), 1, 2)
	short := tt(f32, sh(2), 1, 2)
	short.Data = short.Data[:4]
	declared := &graph.Node{Op: "relu", Attrs: nil, Output: &graph.Value{Name: "r", Type: graph.Type{DType: f32, Shape: sh(3)}}}
	for _, c := range []struct {
		name string
		node *graph.Node
		in   []*tensor.Tensor
		code errs.Code
	}{
		{"nil_node", nil, nil, errs.Input},
		{"unknown_op", &graph.Node{Op: "frobnicate"}, ins(a), errs.Unsupported},
		{"arity", &graph.Node{Op: "add"}, ins(a), errs.Input},
		{"nil_tensor", &graph.Node{Op: "relu"}, ins(nil), errs.Input},
		{"short_data", &graph.Node{Op: "relu"}, ins(short), errs.Input},
		{"no_broadcast", &graph.Node{Op: "add"}, ins(a, b), errs.Shape},
		{"float_only", &graph.Node{Op: "div"}, ins(ia, ia), errs.DType},
		{"mixed_dtypes", &graph.Node{Op: "add"}, ins(a, ia), errs.DType},
		{"declared_type_differs", declared, ins(a), errs.Shape},
		{"gelu_bad_approx", &graph.Node{Op: "gelu", Attrs: graph.Attrs{"approx": graph.String("poly")}}, ins(a), errs.Input},
		{"missing_attr", &graph.Node{Op: "transpose"}, ins(a), errs.Input},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, err := Eval(c.node, c.in)
			if got := errs.CodeOf(err); got != c.code {
				t.Fatalf("code %q, want %q (err: %v, out: %v)", got, c.code, err, out)
			}
		})
	}
	out, err := Eval(&graph.Node{Op: "add"}, ins(a, a))
	if err != nil {
		t.Fatal(err)
	}
	expectTensor(t, "Eval add", out, f32, sh(2), []float64{2, 4}, 0)
}

// Movement ops copy bits: a NaN payload and -0 survive transpose, slice, reshape and concat.
func TestMovementIsBitExact(t *testing.T) {
	payload := math.Float64frombits(0x7FF0000000000123)
	x := tt(f64, sh(2, 2), payload, negz, 1, 2)
	for _, c := range []struct {
		op    string
		attrs graph.Attrs
		pos   []int // where payload and -0 land
	}{
		{"transpose", graph.Attrs{"perm": graph.Ints(1, 0)}, []int{0, 2}},
		{"reshape", graph.Attrs{"shape": graph.Ints(4)}, []int{0, 1}},
		{"slice", graph.Attrs{"starts": graph.Ints(0, 0), "ends": graph.Ints(1, 2)}, []int{0, 1}},
		{"concat", graph.Attrs{"axis": graph.Int(1)}, []int{0, 1}},
	} {
		t.Run(c.op, func(t *testing.T) {
			inputs := ins(x)
			if c.op == "concat" {
				inputs = ins(x, x)
			}
			got, err := runOp(c.op, c.attrs, inputs...)
			if err != nil {
				t.Fatal(err)
			}
			if got.Bits(c.pos[0]) != 0x7FF0000000000123 || got.Bits(c.pos[1]) != 1<<63 {
				t.Errorf("bits %#x %#x, want NaN payload and -0", got.Bits(c.pos[0]), got.Bits(c.pos[1]))
			}
		})
	}
}

// Every op runs on every dtype it declares without error and with the inferred output type:
// catches an impl that forgot a dtype family (e.g. int inputs reaching a float-only path).
func TestEveryDeclaredDType(t *testing.T) {
	shapes := map[string][][]int{
		"matmul": {sh(2, 3), sh(3, 2)}, "batch_matmul": {sh(2, 2, 3), sh(2, 3, 2)},
		"attention": {sh(2, 3, 4), sh(2, 5, 4), sh(2, 5, 2)}, "layernorm": {sh(2, 3), sh(3), sh(3)},
		"rmsnorm": {sh(2, 3), sh(3)}, "concat": {sh(2, 3), sh(1, 3)},
		"attention_lse":  {sh(2, 3, 4), sh(2, 5, 4)},
		"scaled_matmul":  {sh(2, 3), sh(4, 3), sh(), sh(1)},
		"attention_grad": {sh(2, 3, 4), sh(2, 5, 4), sh(2, 5, 2), sh(2, 3, 2), sh(2, 3, 2), sh(2, 3)},
		// complex values: a trailing 2 (issue 26)
		"fft": {sh(2, 3, 2)}, "ifft": {sh(2, 3, 2)}, "irfft": {sh(2, 3, 2)}, "fft2": {sh(2, 3, 2)}, "ifft2": {sh(2, 3, 2)},
		"irfft2": {sh(2, 3, 2)}, "complex_mul": {sh(2, 3, 2), sh(3, 2)}, "conj": {sh(2, 3, 2)},
		"conv1d": {sh(2, 2, 3), sh(2, 2, 2)}, "conv2d": {sh(1, 2, 3, 3), sh(2, 2, 2, 2)},
	}
	attrs := map[string]graph.Attrs{
		"cast": {"to": graph.DTypeAttr(f32)}, "transpose": {"perm": graph.Ints(1, 0)}, "reshape": {"shape": graph.Ints(-1)},
		"slice": {"starts": graph.Ints(0, 1), "ends": graph.Ints(2, 3)}, "concat": {"axis": graph.Int(0)},
		"full_like": {"value": graph.Float(2)}, "attention_grad": {"wrt": graph.String("v")},
		"div": {"rounding_mode": graph.String("floor")}, // integers have no true division
	}
	for _, d := range graph.Ops() {
		for _, dt := range d.DTypes {
			in := shapes[d.Name]
			if in == nil {
				in = make([][]int, d.MinArgs)
				for i := range in {
					in[i] = sh(2, 3)
				}
			}
			ts := make([]*tensor.Tensor, len(in))
			for i, s := range in {
				idt := dt
				if d.SharedDTypeArgs > 0 && i >= d.SharedDTypeArgs { // attention_grad's lse
					idt = f32
					if dt == f64 {
						idt = dt
					}
				}
				ts[i] = tensor.New(idt, s)
				for j := range ts[i].Len() {
					ts[i].SetFloat64(j, float64(j%3))
				}
			}
			if _, err := runOp(d.Name, attrs[d.Name], ts...); err != nil {
				t.Errorf("%s on %s: %v", d.Name, dt, err)
			}
		}
	}
}
