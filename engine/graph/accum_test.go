package graph

import (
	"strings"
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

// accumNode builds op on inputs of dtype dt (shapes every accumulating op takes) with the
// given accum attribute.
func accumNode(op string, dt, acc numerics.DType) error {
	b := NewBuilder("accum")
	at := Attrs{"accum": DTypeAttr(acc)}
	x := func(name string, s ...int) *Value { return b.Input(name, dt, s...) }
	switch op {
	case "softmax", "log_softmax", "reduce_sum":
		b.Output(b.Op(op, at, x("x", 2, 3)))
	case "layernorm":
		b.Output(b.Op(op, at, x("x", 2, 3), x("g", 3), x("b", 3)))
	case "rmsnorm":
		b.Output(b.Op(op, at, x("x", 2, 3), x("g", 3)))
	case "mse_loss":
		b.Output(b.Op(op, at, x("a", 3), x("b", 3)))
	case "matmul":
		b.Output(b.Op(op, at, x("a", 2, 3), x("b", 3, 2)))
	case "attention":
		b.Output(b.Op(op, at, x("q", 2, 4), x("k", 3, 4), x("v", 3, 4)))
	}
	_, err := b.Build()
	return err
}

// Every accumulating op refuses an accumulator of the other kind than its inputs (issue 21:
// softmax, the norms and mse_loss took accum=int32 and bool on f32), with one line naming the
// node, and keeps taking every float accumulator for float inputs, narrower ones included.
func TestAccumMustMatchTheInputKind(t *testing.T) {
	f32, i32, i8 := numerics.F32, numerics.I32, numerics.I8
	for _, tc := range []struct {
		op      string
		in, acc numerics.DType
		ok      bool
	}{
		{"softmax", f32, i32, false}, {"log_softmax", f32, numerics.Bool, false}, {"layernorm", f32, i8, false},
		{"rmsnorm", f32, numerics.Bool, false}, {"mse_loss", f32, i32, false}, {"reduce_sum", f32, i32, false},
		{"matmul", i8, f32, false}, {"attention", f32, i32, false},
		{"softmax", f32, numerics.BF16, true}, {"layernorm", numerics.F64, f32, true}, {"mse_loss", f32, numerics.F16, true},
		{"matmul", i8, i32, true}, {"reduce_sum", numerics.F64, numerics.F8E4M3, true},
	} {
		err := accumNode(tc.op, tc.in, tc.acc)
		switch {
		case tc.ok && err != nil:
			t.Errorf("%s %s accum=%s refused: %v", tc.op, tc.in, tc.acc, err)
		case !tc.ok && err == nil:
			t.Errorf("%s %s accum=%s accepted", tc.op, tc.in, tc.acc)
		case !tc.ok && (errs.CodeOf(err) != errs.DType || strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), "node %")):
			t.Errorf("%s %s accum=%s: %v, want one line of E_DTYPE naming the node", tc.op, tc.in, tc.acc, err)
		}
	}
}
