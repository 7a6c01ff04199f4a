package autodiff

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/backend"
	_ "github.com/tessera-qa/tessera-qa/engine/backend/cpu"
	"github.com/tessera-qa/tessera-qa/engine/compiler"
	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/ref"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
)

// Gradients through empty tensors, as torch 1.13 (/usr/bin/python3) gives them: an empty
// input's gradient is empty, and a weight that met only an empty batch gets zeros (its
// gradient is a matmul with K = 0), even where the loss itself is NaN (mse_loss over no
// elements). Checked on the golden model and the CPU backend.
func TestGradientsThroughEmptyTensorsAreEmptyOrZeroAsTorch(t *testing.T) {
	for _, c := range []struct {
		name, body string
		loss       float64
	}{
		{"mse over an empty batch", "input %x: f32[0,4]\n  input %w: f32[4,3]\n  input %y: f32[0,3]\n  %h = matmul(%x, %w)\n  %l = mse_loss(%h, %y)\n  output %l", math.NaN()},
		{"sum over an empty batch", "input %x: f32[0,4]\n  input %w: f32[4,3]\n  %h = matmul(%x, %w)\n  %l = reduce_sum(%h)\n  output %l", 0},
		{"attention over no keys", "input %q: f32[2,5,4]\n  input %k: f32[2,0,4]\n  input %v: f32[2,0,3]\n  %o = attention(%q, %k, %v)\n  %l = reduce_sum(%o)\n  output %l", 0},
		{"layernorm of an empty batch", "input %x: f32[0,4]\n  input %g: f32[4]\n  input %b: f32[4]\n  %h = layernorm(%x, %g, %b)\n  %l = reduce_sum(%h)\n  output %l", 0},
	} {
		g, err := graph.Parse("graph e {\n  "+c.body+"\n}\n", "e.tg")
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		gg, err := Grad(g, "")
		if err != nil {
			t.Errorf("%s: Grad: %v", c.name, err)
			continue
		}
		in := map[string]*tensor.Tensor{}
		rng := rand.New(rand.NewPCG(7, 7))
		for _, v := range g.Inputs {
			vals := make([]float64, v.Type.NumElems())
			for i := range vals {
				vals[i] = rng.NormFloat64()
			}
			in[v.Name] = tensor.FromFloat64(v.Type.DType, v.Type.Shape, vals)
		}
		want, err := ref.Run(gg, in)
		if err != nil {
			t.Errorf("%s: ref: %v", c.name, err)
			continue
		}
		p, err := compiler.Compile(gg, compiler.Options{})
		if err != nil {
			t.Errorf("%s: compile: %v", c.name, err)
			continue
		}
		cpu, _ := backend.Get("cpu")
		got, err := cpu.Run(p, in)
		if err != nil {
			t.Errorf("%s: cpu: %v", c.name, err)
			continue
		}
		for _, res := range [][]*tensor.Tensor{want, got} {
			if l := res[0].Float64(0); !(l == c.loss || math.IsNaN(l) && math.IsNaN(c.loss)) {
				t.Errorf("%s: loss %g, torch gives %g", c.name, l, c.loss)
			}
			for i, v := range g.Inputs {
				gr := res[1+i]
				if !slices.Equal(gr.Shape, v.Type.Shape) {
					t.Errorf("%s: grad of %%%s is %v, want %v", c.name, v.Name, gr.Shape, v.Type.Shape)
				}
				for _, e := range gr.Float64s() {
					if e != 0 {
						t.Errorf("%s: grad of %%%s holds %g, torch gives zeros", c.name, v.Name, e)
						break
					}
				}
			}
		}
	}
}
