package compiler

import (
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/graph"
)

// A program never holds a kernel for an empty output (its grid would be 0, which
// cuLaunchKernel refuses) nor a zero-length param; a non-empty output read from an empty
// operand is one fill kernel.
func TestEmptyOutputsHaveNoKernelAndEmptyOperandsAFill(t *testing.T) {
	for _, c := range []struct {
		body    string
		kernels int
		fills   int
	}{
		{"input %x: f32[3,0]\n  %y = relu(%x)\n  output %y", 0, 0},
		{"input %x: f32[0,4]\n  input %z: f32[4]\n  %y = mul(%x, %z)\n  %w = softmax(%y)\n  output %w", 0, 0},
		{"input %a: f32[0,4]\n  input %b: f32[4,3]\n  %y = matmul(%a, %b)\n  output %y", 0, 0},
		{"input %x: f32[3,0]\n  %y = reduce_sum(%x) {axes=[1]}\n  output %y", 1, 1},
		{"input %x: f32[3,0]\n  %y = reduce_mean(%x)\n  %z = exp(%y)\n  output %z", 2, 1},
		{"input %a: f32[2,0]\n  input %b: f32[0,3]\n  %y = matmul(%a, %b)\n  output %y", 1, 1},
		{"input %q: f32[2,5,4]\n  input %k: f32[2,0,4]\n  input %v: f32[2,0,3]\n  %y = attention(%q, %k, %v)\n  output %y", 1, 1},
		{"input %x: f32[0,3]\n  input %z: f32[2,3]\n  %y = concat(%x, %z, %x) {axis=0}\n  output %y", 1, 0},
		{"input %x: f32[0,3]\n  %s = reduce_sum(%x) {axes=[0]}\n  %y = reshape(%x) {shape=[3,0]}\n  output %s, %y", 1, 1},
		// The softmax/matmul/matmul chain fuses to attention first; with 0 keys it is a fill.
		{"input %q: f32[5,4]\n  input %k: f32[0,4]\n  input %v: f32[0,3]\n  %s = matmul(%q, %k) {transpose_b=true}\n  %p = softmax(%s)\n  %y = matmul(%p, %v)\n  output %y", 1, 1},
	} {
		g, err := graph.Parse("graph e {\n  "+c.body+"\n}\n", "e.tg")
		if err != nil {
			t.Fatalf("%s: %v", c.body, err)
		}
		p, err := Compile(g, Options{})
		if err != nil {
			t.Errorf("%s: %v", c.body, err)
			continue
		}
		if len(p.Kernels) != c.kernels || len(p.Schedules) != len(p.Kernels) {
			t.Errorf("%s: %d kernels (%d schedules), want %d:\n%s", c.body, len(p.Kernels), len(p.Schedules), c.kernels, FormatTile(p))
		}
		fills := 0
		for i, k := range p.Kernels {
			if p.Schedules[i].Kind == "fill" {
				fills++
			}
			for _, d := range k.Grid {
				if d < 1 {
					t.Errorf("%s: kernel %s has grid %v", c.body, k.Name, k.Grid)
				}
			}
			for _, pa := range k.Params {
				if pa.Len < 1 {
					t.Errorf("%s: kernel %s param %s has length %d", c.body, k.Name, pa.Name, pa.Len)
				}
			}
		}
		if fills != c.fills {
			t.Errorf("%s: %d fill kernels, want %d", c.body, fills, c.fills)
		}
		for i, o := range p.Outputs {
			if !p.Buffers[o].Type.Equal(g.Outputs[i].Type) {
				t.Errorf("%s: output %d is buffer %s, want %s", c.body, i, p.Buffers[o].Type, g.Outputs[i].Type)
			}
		}
	}
}
