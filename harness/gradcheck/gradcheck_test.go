package gradcheck

import (
	"fmt"
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/backend"
	_ "github.com/tessera-qa/tessera-qa/engine/backend/all"
	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
)

func TestCatalogueGradients(t *testing.T) {
	b, err := backend.Get("cpu")
	if err != nil {
		t.Fatal(err)
	}
	cs, err := Cases(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cs {
		r := Check(b, c)
		if !r.Pass {
			t.Errorf("%s: %s %+v", c.Name, r.Err, r.Inputs)
		} else if testing.Verbose() {
			fmt.Printf("ok %s %v %+v %s\n", c.Name, r.DType, r.Inputs, r.NoGrad)
		}
	}
}

// sign at 0 jumps: both one-sided differences are ~1/h and agree, so only halving the step
// shows that finite differences do not apply there; the direction is then judged against the
// float64 rule (zero) only.
func TestJumpIsJudgedAgainstTheRule(t *testing.T) {
	b, err := backend.Get("cpu")
	if err != nil {
		t.Fatal(err)
	}
	gb := graph.NewBuilder("sign_at_zero")
	gb.Output(gb.Op("sign", nil, gb.Input("x", numerics.F32, 4)))
	g, err := gb.Build()
	if err != nil {
		t.Fatal(err)
	}
	c := Case{Name: "sign_at_zero", Op: "sign", DType: numerics.F32, Graph: g, Seed: 1,
		Inputs: map[string]*tensor.Tensor{"x": tensor.FromFloat64(numerics.F32, []int{4}, []float64{0, 1, -2, 0})}}
	r := Check(b, c)
	if !r.Pass || len(r.Inputs) != 1 || !r.Inputs[0].Kink {
		t.Fatalf("%+v", r)
	}
}
