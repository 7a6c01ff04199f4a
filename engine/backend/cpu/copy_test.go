package cpu

import (
	"bytes"
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/compiler"
	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/engine/ref"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
)

// Movement ops copy bit patterns (tile.Copy): every pattern of an 8-bit format, fp8 e5m2 ±Inf
// (0x7C/0xFC) and NaNs with a sign included, arrives unchanged, as engine/ref moves it.
func TestMovementCopiesEveryPattern(t *testing.T) {
	for _, dt := range []numerics.DType{numerics.F8E5M2, numerics.F8E4M3, numerics.I8} {
		b := graph.NewBuilder("move")
		x := b.Input("x", dt, 16, 16)
		tr := b.Op("transpose", graph.Attrs{"perm": graph.Ints(1, 0)}, x)
		b.Output(b.Op("concat", graph.Attrs{"axis": graph.Int(1)}, b.Op("slice", graph.Attrs{"starts": graph.Ints(0, 3), "ends": graph.Ints(16, 16)}, tr), x))
		g, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		in := tensor.New(dt, []int{16, 16})
		for i := range 256 {
			in.SetBits(i, uint64(i))
		}
		want, err := ref.Run(g, map[string]*tensor.Tensor{"x": in})
		if err != nil {
			t.Fatal(err)
		}
		p, err := compiler.Compile(g, compiler.Options{})
		if err != nil {
			t.Fatal(err)
		}
		got, err := (&Backend{}).Run(p, map[string]*tensor.Tensor{"x": in.Clone()})
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got[0].Data, want[0].Data) {
			for i := range got[0].Len() {
				if got[0].Bits(i) != want[0].Bits(i) {
					t.Fatalf("%s: element %d is %#x, want %#x: movement must copy bits", dt, i, got[0].Bits(i), want[0].Bits(i))
				}
			}
		}
	}
}
