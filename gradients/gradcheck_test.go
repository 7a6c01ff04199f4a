package gradients

import (
	"fmt"
	"math"
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

// Finite differences stay discriminating where they apply: along a smooth direction they give
// the derivative to well within FDTol, with a small slack, so a rule off by a factor is caught;
// on a kink they say so instead of giving a number.
func TestFiniteDifferences(t *testing.T) {
	for _, tc := range []struct {
		name   string
		op     string
		x      []float64
		deriv  func(x float64) float64 // of op, elementwise
		smooth bool
	}{
		{"exp", "exp", []float64{-1, 0.5, 3}, math.Exp, true},
		{"log near its pole", "log", []float64{1e-3, 2, 5}, func(x float64) float64 { return 1 / x }, true},
		{"tanh", "tanh", []float64{-2, 0.1, 1}, func(x float64) float64 { return 1 - math.Tanh(x)*math.Tanh(x) }, true},
		{"relu on its kink", "relu", []float64{0, 1, -1}, nil, false},
		{"sign on its jump", "sign", []float64{0, 1, -1}, nil, false},
	} {
		gb := graph.NewBuilder("fd_" + tc.op)
		gb.Output(gb.Op(tc.op, nil, gb.Input("x", numerics.F64, len(tc.x))))
		g, err := gb.Build()
		if err != nil {
			t.Fatal(err)
		}
		x := tensor.FromFloat64(numerics.F64, []int{len(tc.x)}, tc.x)
		c := tensor.FromFloat64(numerics.F64, []int{len(tc.x)}, []float64{0.7, -1.3, 0.4})
		cots := map[string]*tensor.Tensor{"d_" + g.Outputs[0].Name: c}
		u := []float64{1, -0.5, 2}
		scaleDirection(u, tc.x)
		fd, err := finiteDiff(g, map[string]*tensor.Tensor{"x": x}, cots, "x", u)
		if err != nil {
			t.Fatal(err)
		}
		if !tc.smooth {
			if !fd.nonSmooth(1) {
				t.Errorf("%s: %+v is not flagged", tc.name, fd)
			}
			continue
		}
		want, scale := 0.0, 0.0
		for k, v := range tc.x {
			want += c.Float64(k) * tc.deriv(v) * fd.dir[k]
			scale += math.Abs(c.Float64(k) * tc.deriv(v) * fd.dir[k])
		}
		if fd.nonSmooth(scale) || math.Abs(fd.value()-want) > 1e-9*scale || fd.slack() > 1e-8*scale {
			t.Errorf("%s: value %v, want %v (scale %v), slack %v, non-smooth %v", tc.name, fd.value(), want, scale, fd.slack(), fd.nonSmooth(scale))
		}
		// A rule off by 1% would miss the finite differences by far more than FDTol.
		if math.Abs(1.01*want-fd.value())-fd.slack() <= FDTol*scale {
			t.Errorf("%s: a 1%% error would pass", tc.name)
		}
	}
}
