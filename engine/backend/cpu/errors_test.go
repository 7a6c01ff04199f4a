package cpu

import (
	"strings"
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/compiler"
	"github.com/tessera-qa/tessera-qa/engine/compiler/tile"
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
)

// bogus is an instruction no backend knows (it borrows Full's marker method), used to drive
// the interpreter into its last-resort recover.
type bogus struct{ tile.Full }

// Broken kernels are E_INTERNAL errors that name the kernel and the instruction, never panics.
func TestBrokenKernelsAreCodedErrors(t *testing.T) {
	x := func() *tensor.Tensor { return tensor.New(numerics.F32, []int{4}) }
	good := row(0, 4)
	cases := []struct {
		name   string
		params []tile.Param
		body   []tile.Instr
		want   []string
	}{
		{"undefined register", nil, []tile.Instr{tile.Store{Src: 0, At: good}},
			[]string{"instr 1", "r0"}},
		{"bad param index", nil, []tile.Instr{tile.Load{Dst: 0, At: row(3, 4)}},
			[]string{"instr 1", "param 3"}},
		{"shape mismatch", nil, []tile.Instr{
			tile.Full{Dst: 0, Rows: 2, Cols: 3, Value: 1}, tile.Full{Dst: 1, Rows: 3, Cols: 2, Value: 1},
			tile.Binary{Dst: 2, A: 0, B: 1, Op: tile.Add, DType: numerics.F32}},
			[]string{"instr 3", "broadcast"}},
		{"param dtype differs from buffer", []tile.Param{{Buffer: 0, Name: "x", DType: numerics.F64, Len: 4, Output: true}},
			[]tile.Instr{tile.Load{Dst: 0, At: good}}, []string{"param 0", "f32[4]"}},
		{"param buffer out of range", []tile.Param{{Buffer: 9, Name: "x", DType: numerics.F32, Len: 4}},
			[]tile.Instr{tile.Load{Dst: 0, At: good}}, []string{"buffer 9"}},
		{"unknown unary op", nil, []tile.Instr{tile.Full{Dst: 0, Rows: 1, Cols: 1}, tile.Unary{Dst: 1, Src: 0, Op: "cube", DType: numerics.F32}},
			[]string{"instr 2", "cube"}},
		{"binary with invalid dtype", nil, []tile.Instr{tile.Full{Dst: 0, Rows: 1, Cols: 1}, tile.Binary{Dst: 1, A: 0, B: 0, Op: tile.Add}},
			[]string{"instr 2", "invalid"}},
		{"variable out of range", nil, []tile.Instr{tile.Load{Dst: 0, At: tile.Access{Param: 0, Base: tile.V(-1, 1), RowDims: []int{1}, RowStrides: []int{0},
			ColDims: []int{4}, ColStrides: []int{1}, RowStart: tile.C(0), ColStart: tile.C(0), Rows: 1, Cols: 4, Mask: true}}},
			[]string{"instr 1", "v-1"}},
		{"softmax state aliased", nil, []tile.Instr{tile.Full{Dst: 0, Rows: 1, Cols: 1}, tile.Full{Dst: 1, Rows: 1, Cols: 4},
			tile.OnlineSoftmax{M: 0, L: 0, X: 1, P: 2, Alpha: 3, DType: numerics.F32}},
			[]string{"instr 3", "differ"}},
		{"unknown instruction", nil, []tile.Instr{tile.Full{Dst: 0, Rows: 1, Cols: 1}, bogus{}},
			[]string{"instr 2"}},
	}
	for _, c := range cases {
		buf := x()
		ps := c.params
		if ps == nil {
			ps = params([]*tensor.Tensor{buf}, 0)
		}
		err := runTile(kernel([]int{3}, ps, 4, 1, c.body...), 2, buf)
		if errs.CodeOf(err) != errs.Internal {
			t.Errorf("%s: error %v, want E_INTERNAL", c.name, err)
			continue
		}
		for _, w := range append(c.want, "kernel kt") {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q does not mention %q", c.name, err, w)
			}
		}
	}
}

// A panic inside the interpreter becomes an E_INTERNAL error naming the instruction, and the
// grid point reported is the lowest failing one whatever the number of workers.
func TestPanicsAreRecoveredDeterministically(t *testing.T) {
	body := []tile.Instr{tile.Full{Dst: 0, Rows: 1, Cols: 1}, tile.For{Var: 1, Count: 2, Body: []tile.Instr{tile.Full{Dst: 0, Rows: 1, Cols: 1}}}}
	k := kernel([]int{9}, nil, 1, 2, body...)
	p, err := newPlan(k, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	p.body[1].body[0].in = bogus{} // past verification: only the recover can catch it
	for _, workers := range []int{1, 2, 4, 9} {
		err := runPlan(p, newWorkers(workers))
		if errs.CodeOf(err) != errs.Internal || !strings.Contains(err.Error(), "instr 3") ||
			!strings.Contains(err.Error(), "grid point [0]") || !strings.Contains(err.Error(), "panic") {
			t.Errorf("workers %d: %v", workers, err)
		}
	}
}

// Program-level inconsistencies are E_INTERNAL too.
func TestBrokenProgramsAreCodedErrors(t *testing.T) {
	_, p := compile(t, "prog", func(b *graph.Builder) {
		b.Output(b.Op("neg", nil, b.Input("x", numerics.F32, 2)))
	})
	feed := map[string]*tensor.Tensor{"x": tensor.New(numerics.F32, []int{2})}
	bad := *p
	bad.Inputs = []int{7}
	if _, err := (&Backend{}).Run(&bad, feed); errs.CodeOf(err) != errs.Internal || !strings.Contains(err.Error(), "%x") {
		t.Errorf("input mapped out of range: %v", err)
	}
	bad = *p
	bad.Buffers = append([]compiler.Buffer{}, p.Buffers...)
	bad.Buffers[p.Outputs[0]].Type = graph.Type{DType: numerics.F64, Shape: []int{2}}
	if _, err := (&Backend{}).Run(&bad, feed); errs.CodeOf(err) != errs.Internal {
		t.Errorf("output buffer of the wrong type: %v", err)
	}
}
