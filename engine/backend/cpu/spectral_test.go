package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
)

func uniformTensor(dt numerics.DType, seed uint64, shape ...int) *tensor.Tensor {
	r := rand.New(rand.NewPCG(seed, 26))
	x := tensor.New(dt, shape)
	for i := range x.Len() {
		x.SetFloat64(i, r.Float64()-0.5)
	}
	return x
}

// relErr is the relative L2 error of got against want.
func relErr(got, want *tensor.Tensor) float64 {
	var num, den float64
	for i := range want.Len() {
		d := got.Float64(i) - want.Float64(i)
		num += d * d
		den += want.Float64(i) * want.Float64(i)
	}
	return math.Sqrt(num / max(den, 1e-300))
}

// Every spectral op against the definition (engine/ref), lengths smooth, prime (Bluestein),
// padded and cropped, along inner and outer axes, every norm, f32 and f64.
func TestSpectralOpsMatchReference(t *testing.T) {
	type c struct {
		op    string
		shape []int
		attrs graph.Attrs
	}
	cases := []c{
		{"fft", []int{3, 8, 2}, nil}, {"fft", []int{2, 12, 2}, nil}, {"fft", []int{2, 17, 2}, nil},
		{"fft", []int{1, 97, 2}, nil}, {"fft", []int{2, 1, 2}, nil}, {"fft", []int{4, 60, 2}, graph.Attrs{"norm": graph.String("ortho")}},
		{"fft", []int{5, 3, 2}, graph.Attrs{"dim": graph.Int(0)}}, {"fft", []int{2, 7, 3, 2}, graph.Attrs{"dim": graph.Int(1), "n": graph.Int(11)}},
		{"fft", []int{2, 16, 2}, graph.Attrs{"n": graph.Int(10), "norm": graph.String("forward")}},
		{"ifft", []int{3, 15, 2}, nil}, {"ifft", []int{3, 23, 2}, graph.Attrs{"norm": graph.String("ortho")}},
		{"ifft", []int{3, 9, 2}, graph.Attrs{"norm": graph.String("forward"), "n": graph.Int(12)}},
		{"rfft", []int{4, 16}, nil}, {"rfft", []int{4, 15}, nil}, {"rfft", []int{2, 31}, graph.Attrs{"norm": graph.String("ortho")}},
		{"rfft", []int{6, 5}, graph.Attrs{"dim": graph.Int(0)}}, {"rfft", []int{3, 10}, graph.Attrs{"n": graph.Int(7)}},
		{"irfft", []int{4, 9, 2}, nil}, {"irfft", []int{4, 8, 2}, graph.Attrs{"n": graph.Int(15)}},
		{"irfft", []int{3, 5, 2}, graph.Attrs{"n": graph.Int(13), "norm": graph.String("forward")}},
		{"irfft", []int{4, 3, 2}, graph.Attrs{"dim": graph.Int(0)}},
		{"fft2", []int{2, 6, 5, 2}, nil}, {"ifft2", []int{3, 4, 2}, graph.Attrs{"norm": graph.String("ortho")}},
		{"rfft2", []int{2, 6, 7}, nil}, {"irfft2", []int{2, 6, 4, 2}, nil}, {"irfft2", []int{6, 4, 2}, graph.Attrs{"s": graph.Ints(5, 7)}},
		{"fft2", []int{4, 4, 2}, graph.Attrs{"s": graph.Ints(6, 3)}},
	}
	for i, tc := range cases {
		for _, dt := range []numerics.DType{numerics.F32, numerics.F64} {
			t.Run(fmt.Sprintf("%s%v%v-%s", tc.op, tc.shape, tc.attrs, dt), func(t *testing.T) {
				x := uniformTensor(dt, uint64(i), tc.shape...)
				got, want := runBoth(t, tc.op, tc.attrs, x)
				if got.TypeString() != want.TypeString() {
					t.Fatalf("type %s, ref %s", got.TypeString(), want.TypeString())
				}
				bound := 2e-6
				if dt == numerics.F64 {
					bound = 1e-14
				}
				if e := relErr(got, want); e > bound || math.IsNaN(e) {
					t.Errorf("relative L2 error %.3g > %.3g", e, bound)
				}
			})
		}
	}
}
