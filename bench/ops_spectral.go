package bench

import (
	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/harness"
)

// Issue 26's rows: batched one-axis FFTs against torch.fft (cuFFT on a GPU) and conv2d against
// torch.nn.functional.conv2d (cuDNN).

// distHalf is the FFT accuracy convention's input distribution (golden's spectral cases).
var distHalf = harness.Dist{Kind: harness.DistUniform, Lo: -0.5, Hi: 0.5}

// fftDef is a forward FFT over the last axis of R lines of N points, unnormalised: c2c reads
// complex f32 [R,N,2] (torch.view_as_real's layout, docs/spectral.md), r2c real [R,N]. Both are
// memory-bound (about 5 log2 N / 16 FLOP per byte for c2c), so they carry no flop count and
// the table gives their share of the copy bandwidth. f32 only: cuFFT's and the type.
func fftDef(name, op string) opDef {
	complexIn := op == "fft"
	shape := func(s []int, rows int) []int {
		if complexIn {
			return []int{rows, s[1], 2}
		}
		return []int{rows, s[1]}
	}
	return opDef{
		name: name, dims: []string{"R", "N"}, dtypes: []numerics.DType{f32}, ownDTypes: true,
		shapes: [][]int{{16384, 1024}, {4096, 4096}},
		inputs: func(s []int) []input { return []input{{"x", shape(s, s[0]), distHalf}} },
		build:  one(op, nil),
		flops:  none,
		// Each bin sums N terms, like golden's FFT cases (tolReduce(n)).
		reduce: func(s []int) int { return s[1] }, tol: tolReduce,
		slice: func(s []int, r int) [][]int { return [][]int{shape(s, r)} },
	}
}

// conv2dDef is a stride-1 conv2d with "same" padding (K/2 each side), no bias, one group:
// x [B,C,H,W], w [CO,C,K,K]. The defaults are ResNet-50 stages' 3x3 layers.
func conv2dDef() opDef {
	out := func(s []int) (ho, wo int) {
		p := s[5] / 2
		return s[2] + 2*p - s[5] + 1, s[3] + 2*p - s[5] + 1
	}
	return opDef{
		name: "conv2d", dims: []string{"B", "C", "H", "W", "CO", "K"}, dtypes: []numerics.DType{bf16},
		shapes: [][]int{{32, 64, 56, 56, 64, 3}, {32, 256, 14, 14, 256, 3}},
		inputs: func(s []int) []input {
			return []input{{"x", []int{s[0], s[1], s[2], s[3]}, distNormal}, {"w", []int{s[4], s[1], s[5], s[5]}, distNormal}}
		},
		build: func(b *graph.Builder, in []*graph.Value) *graph.Value {
			k := in[1].Type.Shape[2]
			return b.Op("conv2d", graph.Attrs{"padding": graph.Ints(int64(k / 2))}, in...)
		},
		flops: func(s []int) float64 {
			ho, wo := out(s)
			return 2 * float64(s[0]) * float64(s[4]) * float64(s[1]) * float64(s[5]*s[5]) * float64(ho*wo)
		},
		reduce: func(s []int) int { return s[1] * s[5] * s[5] }, tol: tolReduce,
		// The reference keeps the first r images, with every weight.
		slice:   func(s []int, r int) [][]int { return [][]int{{r, s[1], s[2], s[3]}, {s[4], s[1], s[5], s[5]}} },
		rowsDim: "B",
	}
}
