package ref

import "github.com/tessera-qa/tessera-qa/engine/graph"

// convCases are torch.nn.functional's cross-correlation written out by hand: out[i] =
// bias + sum over taps j of w[j] * x_padded[i*stride + j*dilation].
var convCases = []opCase{
	// x - x[i+2]: a difference kernel, no padding, length 5 - 3 + 1.
	{"conv1d/difference", "conv1d", nil, ins(tt(f64, sh(1, 1, 5), 1, 2, 3, 4, 5), tt(f64, sh(1, 1, 3), 1, 0, -1)),
		f64, sh(1, 1, 3), []float64{-2, -2, -2}, 0},
	// padded 0,1,2,3,4,5,0; taps 2 apart (span 3), every second position: 0+10*2, 2+10*4, 4+10*0, plus 0.5.
	{"conv1d/stride_pad_dilation_bias", "conv1d", graph.Attrs{"stride": graph.Ints(2), "padding": graph.Ints(1), "dilation": graph.Ints(2)},
		ins(tt(f32, sh(1, 1, 5), 1, 2, 3, 4, 5), tt(f32, sh(1, 1, 2), 1, 10), tt(f32, sh(1), 0.5)),
		f32, sh(1, 1, 3), []float64{20.5, 42.5, 4.5}, 0},
	// two groups of one channel: channel 0 summed pairwise, channel 1 differenced.
	{"conv1d/groups", "conv1d", graph.Attrs{"groups": graph.Int(2)},
		ins(tt(f64, sh(1, 2, 3), 1, 2, 3, 10, 20, 30), tt(f64, sh(2, 1, 2), 1, 1, 1, -1)),
		f64, sh(1, 2, 2), []float64{3, 5, -10, -10}, 0},
	// x[i,j] + x[i+1,j+1] on 1..9.
	{"conv2d/diagonal", "conv2d", nil, ins(tt(f64, sh(1, 1, 3, 3), 1, 2, 3, 4, 5, 6, 7, 8, 9), tt(f64, sh(1, 1, 2, 2), 1, 0, 0, 1)),
		f64, sh(1, 1, 2, 2), []float64{6, 8, 12, 14}, 0},
	// 1x1 kernels mix channels: out0 = c0 + c1, out1 = 2 c0 - c1.
	{"conv2d/channel_mix", "conv2d", nil,
		ins(tt(f64, sh(1, 2, 2, 2), 1, 2, 3, 4, 10, 20, 30, 40), tt(f64, sh(2, 2, 1, 1), 1, 1, 2, -1)),
		f64, sh(1, 2, 2, 2), []float64{11, 22, 33, 44, -8, -16, -24, -32}, 0},
	// padding (1, 0): a zero row above and below, none beside.
	{"conv2d/padding_per_axis", "conv2d", graph.Attrs{"padding": graph.Ints(1, 0)},
		ins(tt(f32, sh(1, 1, 2, 2), 1, 2, 3, 4), tt(f32, sh(1, 1, 1, 1), 1)),
		f32, sh(1, 1, 4, 2), []float64{0, 0, 1, 2, 3, 4, 0, 0}, 0},
}
