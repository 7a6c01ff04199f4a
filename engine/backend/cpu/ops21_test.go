package cpu

import (
	"math"
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/backend"
	"github.com/tessera-qa/tessera-qa/engine/compiler"
	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/engine/ref"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
)

func runBoth(t *testing.T, op string, attrs graph.Attrs, in ...*tensor.Tensor) (cpuOut, refOut *tensor.Tensor) {
	t.Helper()
	b := graph.NewBuilder("t")
	m := map[string]*tensor.Tensor{}
	var vs []*graph.Value
	for i, x := range in {
		name := string(rune('a' + i))
		vs = append(vs, b.Input(name, x.DType, x.Shape...))
		m[name] = x
	}
	b.Output(b.Op(op, attrs, vs...))
	g, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	p, err := compiler.Compile(g, compiler.Options{})
	if err != nil {
		t.Fatal(err)
	}
	be, _ := backend.Get("cpu")
	got, err := be.Run(p, m)
	if err != nil {
		t.Fatal(err)
	}
	want, err := ref.Run(g, m)
	if err != nil {
		t.Fatal(err)
	}
	return got[0], want[0]
}

// Scalars: softmax is 1 and log_softmax 0 (NaN for ±Inf and NaN, as torch), a reduction over
// dim 0 / -1 is the element.
func TestScalarDims(t *testing.T) {
	for _, v := range []float64{2.5, -7, inf, -inf, nan} {
		x := tt(numerics.F32, []int{}, v)
		for op, want := range map[string]float64{"softmax": 1, "log_softmax": 0} {
			if math.IsInf(v, 0) || math.IsNaN(v) {
				want = nan
			}
			for _, ax := range []int64{0, -1} {
				got, gold := runBoth(t, op, graph.Attrs{"axis": graph.Int(ax)}, x)
				if !sameValue(got.Float64(0), want) || !sameValue(gold.Float64(0), want) {
					t.Errorf("%s(%g) axis %d: cpu %g, ref %g, want %g", op, v, ax, got.Float64(0), gold.Float64(0), want)
				}
			}
		}
		for _, op := range []string{"reduce_sum", "reduce_max", "reduce_mean"} {
			got, gold := runBoth(t, op, graph.Attrs{"axes": graph.Ints(-1), "keepdims": graph.Bool(true)}, x)
			if len(got.Shape) != 0 || !sameValue(got.Float64(0), v) || !sameValue(gold.Float64(0), v) {
				t.Errorf("%s(%g): cpu %v %g, ref %g", op, v, got.Shape, got.Float64(0), gold.Float64(0))
			}
		}
	}
}

// axes=[] folds every element (keepdims: all ones), and mse_loss's reductions, against
// hand values.
func TestEmptyAxesAndMSEReductions(t *testing.T) {
	x := tt(numerics.F32, []int{2, 3}, 1, 2, 3, 4, 5, 6)
	for op, want := range map[string]float64{"reduce_sum": 21, "reduce_max": 6, "reduce_mean": 3.5} {
		got, gold := runBoth(t, op, graph.Attrs{"axes": graph.Ints(), "keepdims": graph.Bool(true)}, x)
		if len(got.Shape) != 2 || got.Shape[0] != 1 || got.Shape[1] != 1 || got.Float64(0) != want || gold.Float64(0) != want {
			t.Errorf("%s axes=[]: cpu %v %g, ref %g, want %g", op, got.Shape, got.Float64(0), gold.Float64(0), want)
		}
	}
	a, b := tt(numerics.F32, []int{2, 2}, 1, 2, 3, 4), tt(numerics.F32, []int{2, 2}, 0, 4, 3, 1)
	for red, want := range map[string][]float64{"mean": {14.0 / 4}, "sum": {14}, "none": {1, 4, 0, 9}} {
		got, gold := runBoth(t, "mse_loss", graph.Attrs{"reduction": graph.String(red)}, a, b)
		for i, w := range want {
			if got.Len() != len(want) || got.Float64(i) != w || gold.Float64(i) != w {
				t.Errorf("mse_loss %s: cpu %v, ref %v, want %v", red, got.Float64s(), gold.Float64s(), want)
				break
			}
		}
	}
}
