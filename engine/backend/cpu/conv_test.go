package cpu

import (
	"fmt"
	"math"
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
)

// The direct conv kernel (compiler lower_conv.go, through Tile IR) against the float64
// definition (engine/ref): ragged tiles, every attribute, groups, bias, f32 and f64.
func TestConvMatchesReference(t *testing.T) {
	ints := func(v ...int64) graph.Attr { return graph.Ints(v...) }
	cases := []struct {
		op    string
		x, w  []int
		bias  bool
		attrs graph.Attrs
	}{
		{"conv1d", []int{2, 3, 17}, []int{5, 3, 4}, false, nil},
		{"conv1d", []int{1, 4, 40}, []int{6, 2, 5}, true, graph.Attrs{"stride": ints(3), "padding": ints(2), "dilation": ints(2), "groups": graph.Int(2)}},
		{"conv1d", []int{3, 1, 7}, []int{2, 1, 9}, true, graph.Attrs{"padding": ints(4)}},
		{"conv1d", []int{1, 2, 200}, []int{3, 2, 63}, false, graph.Attrs{"padding": ints(31)}},
		{"conv1d", []int{1, 6, 11}, []int{6, 1, 3}, false, graph.Attrs{"groups": graph.Int(6), "padding": ints(1)}},
		{"conv2d", []int{2, 3, 9, 7}, []int{4, 3, 3, 2}, true, graph.Attrs{"stride": ints(2, 1), "padding": ints(1, 0), "dilation": ints(1, 2)}},
		{"conv2d", []int{1, 4, 13, 11}, []int{70, 2, 3, 3}, false, graph.Attrs{"padding": ints(1), "groups": graph.Int(2)}},
		{"conv2d", []int{1, 1, 20, 18}, []int{2, 1, 9, 7}, true, graph.Attrs{"padding": ints(4, 3), "stride": ints(2)}},
	}
	for i, tc := range cases {
		for _, dt := range []numerics.DType{numerics.F32, numerics.F64} {
			t.Run(fmt.Sprintf("%s-x%v-w%v-%v-%s", tc.op, tc.x, tc.w, tc.attrs, dt), func(t *testing.T) {
				in := []*tensor.Tensor{uniformTensor(dt, uint64(2*i), tc.x...), uniformTensor(dt, uint64(2*i+1), tc.w...)}
				if tc.bias {
					in = append(in, uniformTensor(dt, 99, tc.w[0]))
				}
				got, want := runBoth(t, tc.op, tc.attrs, in...)
				if got.TypeString() != want.TypeString() {
					t.Fatalf("type %s, ref %s", got.TypeString(), want.TypeString())
				}
				// A sum of K terms in f32: a few units of roundoff times sqrt(K) in relative L2.
				k := tc.w[1]
				for _, d := range tc.w[2:] {
					k *= d
				}
				bound := 4 * 0x1p-24 * math.Sqrt(float64(k))
				if dt == numerics.F64 {
					bound = 4 * 0x1p-53 * math.Sqrt(float64(k))
				}
				if e := relErr(got, want); e > bound || math.IsNaN(e) {
					t.Errorf("relative L2 error %.3g > %.3g", e, bound)
				}
			})
		}
	}
}
