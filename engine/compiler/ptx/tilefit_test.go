package ptx

import (
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/compiler"
	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

// Attention and its backward compile for the GPU at any head dims: the SIMT path keeps every
// tile register in shared memory, so the default schedule must shrink its tiles until one CTA's
// fit (found on the H200, 2026-12-03: the property suite drew f64 attention with a value dim
// of 257 and the compile was refused, "tile registers need 264704 bytes of shared memory").
func TestAttentionTilesFitSharedMemoryAtLargeHeadDims(t *testing.T) {
	simt := H100
	simt.SIMTOnly = true
	for _, dt := range []numerics.DType{numerics.F64, numerics.F32, numerics.BF16} {
		for _, a := range []attnShape{
			{1, 33, 1, 1, 257, false}, {1, 64, 64, 257, 1, false}, {2, 128, 128, 300, 300, true}, {1, 64, 64, 512, 512, false},
			{1, 1, 200, 1024, 8, false}, {1, 200, 1, 8, 1024, false}, {1, 64, 64, 128, 128, true},
		} {
			g := attnGraph(t, dt, a, nil)
			if _, err := compileFor(g, simt); err != nil {
				t.Errorf("attention %s %s: %v", dt, a, err)
			}
			gb := graph.NewBuilder("attn_grad")
			q, k, v := gb.Input("q", dt, a.bh, a.sq, a.d), gb.Input("k", dt, a.bh, a.sk, a.d), gb.Input("v", dt, a.bh, a.sk, a.dv)
			y := gb.Input("y", dt, a.bh, a.sq, a.dv)
			dy := gb.Input("dy", dt, a.bh, a.sq, a.dv)
			ldt := numerics.F32
			if dt == numerics.F64 {
				ldt = dt
			}
			lse := gb.Input("lse", ldt, a.bh, a.sq)
			for _, wrt := range []string{"q", "k", "v"} {
				gb.Output(gb.Op("attention_grad", graph.Attrs{"wrt": graph.String(wrt)}, q, k, v, y, dy, lse))
			}
			gg, err := gb.Build()
			if err != nil {
				t.Fatal(err)
			}
			if _, err := compileFor(gg, simt); err != nil {
				t.Errorf("attention_grad %s %s: %v", dt, a, err)
			}
		}
	}
}

func compileFor(g *graph.Graph, target Target) ([]*Module, error) {
	p, err := compiler.Compile(g, compiler.Options{})
	if err != nil {
		return nil, err
	}
	return GenerateProgram(p, target)
}
