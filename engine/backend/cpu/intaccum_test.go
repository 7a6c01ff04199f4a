package cpu_test

import (
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/backend/cpu"
	"github.com/tessera-qa/tessera-qa/engine/compiler"
	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/engine/ref"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
)

// An int8 result accumulated in int32 wraps when it is narrowed, as integer arithmetic does
// everywhere (found by the property suite: it used to saturate to 127 through the store).
func TestWiderIntAccumulatorWrapsOnNarrowing(t *testing.T) {
	acc := graph.Attrs{"accum": graph.DTypeAttr(numerics.I32)}
	for _, tc := range []struct {
		name string
		op   func(b *graph.Builder, x *graph.Value) *graph.Value
	}{
		{"matmul", func(b *graph.Builder, x *graph.Value) *graph.Value {
			return b.Op("matmul", acc, x, b.Input("w", numerics.I8, 3, 2))
		}},
		{"reduce_sum", func(b *graph.Builder, x *graph.Value) *graph.Value {
			return b.Op("reduce_sum", graph.Attrs{"accum": graph.DTypeAttr(numerics.I32), "axes": graph.Ints(1)}, x)
		}},
	} {
		b := graph.NewBuilder("g")
		x := b.Input("x", numerics.I8, 2, 3)
		b.Output(tc.op(b, x))
		g, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		in := map[string]*tensor.Tensor{"x": tensor.FromFloat64(numerics.I8, []int{2, 3}, []float64{100, 100, 100, 127, 127, 1})}
		if tc.name == "matmul" {
			in["w"] = tensor.FromFloat64(numerics.I8, []int{3, 2}, []float64{1, 1, 1, 1, 1, 1})
		}
		want, err := ref.Run(g, in)
		if err != nil {
			t.Fatal(err)
		}
		p, err := compiler.Compile(g, compiler.Options{})
		if err != nil {
			t.Fatal(err)
		}
		got, err := (&cpu.Backend{}).Run(p, in)
		if err != nil {
			t.Fatal(err)
		}
		if got[0].Digest() != want[0].Digest() {
			t.Errorf("%s: got %v, golden model %v (300 wraps to 44 in int8, it must not saturate to 127)", tc.name, got[0].Float64s(), want[0].Float64s())
		}
		if v := want[0].Float64s(); v[0] != 44 {
			t.Fatalf("%s: test premise: golden model gives %v", tc.name, v)
		}
	}
}
