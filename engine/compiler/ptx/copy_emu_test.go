package ptx

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/compiler"
	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/engine/ref"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
)

// specialPatterns are bit patterns a decode and re-encode would change: fp8 e5m2 ±Inf (which
// the fp8 encoder saturates to ±57344), NaNs with payloads or a sign (canonicalised), -0.
var specialPatterns = map[numerics.DType][]uint64{
	numerics.F8E5M2: {0x7C, 0xFC, 0x7D, 0xFF, 0x80, 0x01},
	numerics.F8E4M3: {0xFF, 0x7F, 0x80, 0x01, 0x7E},
	numerics.F16:    {0x7C01, 0xFE00, 0x7C00, 0x8000, 0x0001},
	numerics.BF16:   {0x7F81, 0xFFC0, 0xFF80, 0x8000},
	numerics.F32:    {0x7F800001, 0xFFC00000, 0x7FC12345, 0x80000000},
	numerics.F64:    {0x7FF0000000000001, 0xFFF8000000000000, 0x8000000000000000},
	numerics.I8:     {0x80, 0x7F, 0xFF},
	numerics.I32:    {0x80000000, 0x7FFFFFFF},
	numerics.Bool:   {0, 1},
}

// TestMovementCopiesBitsEmulated runs the SIMT kernels of transpose, slice, reshape and concat
// (tile.Copy) in the PTX emulator: every element's bit pattern arrives unchanged, exactly as
// engine/ref copies it (issue 13: e5m2 ±Inf through a movement op used to become ±57344).
func TestMovementCopiesBitsEmulated(t *testing.T) {
	for _, dt := range numerics.All {
		pats := specialPatterns[dt]
		fill := func(tt *tensor.Tensor, salt int) {
			for i := range tt.Len() {
				tt.SetBits(i, pats[(i*7+salt)%len(pats)])
			}
		}
		for _, tc := range []struct {
			name  string
			build func(b *graph.Builder) []*graph.Value
		}{
			{"transpose", func(b *graph.Builder) []*graph.Value {
				return []*graph.Value{b.Op("transpose", graph.Attrs{"perm": graph.Ints(2, 0, 1)}, b.Input("x", dt, 3, 5, 7))}
			}},
			{"slice", func(b *graph.Builder) []*graph.Value {
				return []*graph.Value{b.Op("slice", graph.Attrs{"starts": graph.Ints(1, 2), "ends": graph.Ints(4, 9)}, b.Input("x", dt, 5, 11))}
			}},
			{"reshape", func(b *graph.Builder) []*graph.Value {
				return []*graph.Value{b.Op("reshape", graph.Attrs{"shape": graph.Ints(6, -1)}, b.Input("x", dt, 4, 9))}
			}},
			{"concat", func(b *graph.Builder) []*graph.Value {
				return []*graph.Value{b.Op("concat", graph.Attrs{"axis": graph.Int(1)}, b.Input("x", dt, 3, 4), b.Input("y", dt, 3, 2))}
			}},
		} {
			for _, stream := range []string{"on", "off"} { // the stream lowering, and the SIMT path's tile.Copy
				t.Run(fmt.Sprintf("%s/%s/stream=%s", tc.name, dt, stream), func(t *testing.T) {
					t.Setenv(streamEnv, stream)
					b := graph.NewBuilder("move")
					b.Output(tc.build(b)...)
					g, err := b.Build()
					if err != nil {
						t.Fatal(err)
					}
					in := map[string]*tensor.Tensor{}
					for i, v := range g.Inputs {
						in[v.Name] = tensor.New(dt, v.Type.Shape)
						fill(in[v.Name], i)
					}
					want, err := ref.Run(g, in)
					if err != nil {
						t.Fatal(err)
					}
					p, err := compiler.Compile(g, compiler.Options{})
					if err != nil {
						t.Fatal(err)
					}
					if len(p.Kernels) != 1 {
						t.Fatalf("%d kernels", len(p.Kernels))
					}
					got := emulateSIMT(t, p, in)
					if !bytes.Equal(got.Data, want[0].Data) {
						for i := range got.Len() {
							if got.Bits(i) != want[0].Bits(i) {
								t.Fatalf("element %d: got %#x, want %#x (a movement op must copy bits)", i, got.Bits(i), want[0].Bits(i))
							}
						}
					}
				})
			}
		}
	}
}

// emulateSIMT runs a one-kernel program's SIMT module (every CTA) in the emulator; the output
// buffer starts poisoned (0xFF bytes, or 0x00 where 0xFF is itself expected).
func emulateSIMT(t *testing.T, p *compiler.Program, in map[string]*tensor.Tensor) *tensor.Tensor {
	t.Helper()
	target := H100
	target.SIMTOnly = true
	out, _ := emulateWith(t, p, in, target)
	return out
}

// emulateWith runs a one-kernel program's module for target (every CTA) in the emulator.
func emulateWith(t *testing.T, p *compiler.Program, in map[string]*tensor.Tensor, target Target) (*tensor.Tensor, *Module) {
	t.Helper()
	k := p.Kernels[0]
	mod, err := Generate(k, target)
	if err != nil {
		t.Fatal(err)
	}
	m, err := emuParse(mod.PTX)
	if err != nil {
		t.Fatal(err)
	}
	byBuf := map[int]*tensor.Tensor{}
	for i, v := range p.Graph.Inputs {
		byBuf[p.Inputs[i]] = in[v.Name]
	}
	outBuf := p.Outputs[0]
	ot := p.Buffers[outBuf].Type
	out := tensor.New(ot.DType, ot.Shape)
	for i := range out.Data {
		out.Data[i] = 0xA5
	}
	global := make([][]byte, len(k.Params))
	for i, prm := range k.Params {
		switch {
		case prm.Buffer == outBuf:
			global[i] = out.Data
		case byBuf[prm.Buffer] != nil:
			global[i] = bytes.Clone(byBuf[prm.Buffer].Data)
		default:
			t.Fatalf("param %d (%s) is neither an input nor the output", i, prm.Name)
		}
	}
	if err := emuRun(m, mod, global); err != nil {
		t.Fatal(err)
	}
	return out, mod
}
