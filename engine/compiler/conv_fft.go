package compiler

import (
	"github.com/tessera-qa/tessera-qa/engine/failpoint"
	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

// convFFT rewrites a convolution whose kernel is large enough to pay into
//
//	irfft(sum over C_in/groups of rfft(x) * conj(rfft(w))), cropped, + bias
//
// (rfft2/irfft2 for conv2d). A conv is a cross-correlation, and the correlation theorem
// gives its cyclic form as X * conj(W) with both zero-padded to n points per spatial axis.
// With n >= L + 2*padding (the padded input's length) no product of an output the conv
// keeps wraps onto real input: output i reads x[i - padding + k] for k < K, whose cyclic
// index lies in [0, L) exactly when the linear one does, so the cyclic result holds the conv
// at offset -padding mod n (the first `padding` outputs wrap to the end of the line), and the
// crop takes that cyclic window. The channel sum is a broadcasting complex_mul of
// x [N, G, 1, C_in/G, ..] and w [G, C_out/G, C_in/G, ..] and a reduce_sum over C_in/G, so
// only N*C_out lines go back through irfft.
//
// Taken only when convFFTPays, for stride 1, dilation 1 and f32/f64 (the FFTs' dtypes); a
// strided or dilated conv would waste most of the transform's outputs, and is left direct.
func convFFT(s *state) error {
	var out []*graph.Node
	fresh := freshNames(s.g)
	for _, n := range s.g.Nodes {
		g, ok, pays := convFFTCandidate(n)
		if !ok || !(pays || s.opts.ForceConvFFT) {
			out = append(out, n)
			continue
		}
		var err error
		add := graph.OpAdder(inserter(&out, fresh, n, &err))
		y := convByFFT(add, n, g)
		out = append(out, &graph.Node{Op: "reshape", Inputs: []*graph.Value{y}, Attrs: graph.Attrs{"shape": graph.Ints(ints64(n.Output.Type.Shape)...)}, Output: n.Output})
		if err != nil {
			return err
		}
	}
	s.g.Nodes = out
	return deadCode(s)
}

// convFFTCandidate reports whether the rewrite applies to n, its geometry, and whether the
// cost model says it pays.
func convFFTCandidate(n *graph.Node) (g graph.ConvGeom, ok, pays bool) {
	if n.Def().Kind != graph.KindConv {
		return graph.ConvGeom{}, false, false
	}
	g, err := graph.ConvDims(n, types(n.Inputs))
	if err != nil || g.Stride != [2]int{1, 1} || g.Dil != [2]int{1, 1} {
		return g, false, false
	}
	if dt := n.Inputs[0].Type.DType; dt != numerics.F32 && dt != numerics.F64 {
		return g, false, false
	}
	return g, true, ConvFFTPays(g)
}

// Cost model, in units of one multiply-add of the CPU backend's 4x8 micro-kernel, fitted to
// BenchmarkConvFFTCost (rewrite/convcost_bench_test.go; the table is
// testdata/conv_fft_cost.tsv, and TestConvFFTCostFit refits it and holds these constants to
// the fit). The direct side counts what the kernel does, not the conv's multiply-adds: every
// tile product runs its full BM x BK x BN (masked lanes too), its rows in fours through the
// micro-kernel and the BM mod 4 rows left over one dot product at a time (scalarMACCost
// each), and each product costs tileCost besides, plus gatherCost per element of its B
// operand (BK x BN, gathered through the tap-strided view). A count of useful multiply-adds
// cannot fit the measurement: per useful multiply-add the direct kernel ran 10x slower with
// one output channel than with 32.
//
// The FFT side: each line of n points a one-axis transform touches costs fftPerPoint *
// n * fftPasses(n) along w and fftStridedPerPoint * n * fftPasses(n) along h (its lines
// strided, about twice as dear), where a radix-3 pass costs fftRadix3 radix-2 ones and a
// radix-5 pass fftRadix5 (with log2 n instead, conv1d L=4096 K=255, transform length
// 4374 = 2 x 3^7, was modelled cheaper by FFT and measured 1.15-1.4x dearer);
// each complex product of the channel sum (and its share of the reduction)
// complexMulCost, and the form's 24 to 30 kernels against the direct one kernelOverhead in
// all. The copies of the spectra (reshape, conj, the complex helpers' slices, the crop) have
// no term of their own: they scale with the transformed planes' points as the transforms do,
// so the fit cannot tell the two apart (it gave them unstable and negative weights) and
// fftPerPoint carries both.
const (
	scalarMACCost      = 8.58
	tileCost           = 5.22e3
	gatherCost         = 6.41
	fftPerPoint        = 64.5
	fftStridedPerPoint = 149
	fftRadix3          = 2.75
	fftRadix5          = 4.25
	complexMulCost     = 957
	kernelOverhead     = 8.93e5
)

// ConvFFTLengths are the transform lengths per spatial axis (h, w): the smallest 2^a 3^b 5^c
// at least the padded input's length (the h length is 1 for a conv1d).
func ConvFFTLengths(g graph.ConvGeom) [2]int {
	l := [2]int{1, 1}
	for a := 2 - g.Dims; a < 2; a++ {
		l[a] = smoothAtLeast(g.Padded(a))
	}
	return l
}

// ConvDirectTerms are the direct kernel's multiply-adds through the micro-kernel and left
// over, its tile products and their gathered B elements, under its default schedule
// (convSchedule; an autotuned one may differ).
func ConvDirectTerms(g graph.ConvGeom) (vec, scalar, tiles, gather float64) {
	bm, bn, bk := fit(g.Cog, defConvBM), fit(g.Positions(), defConvBN), fit(g.Taps(), defConvBK)
	tiles = float64(g.N * g.G * ceilDiv(g.Cog, bm) * ceilDiv(g.Positions(), bn) * g.Cg * ceilDiv(g.Taps(), bk))
	return tiles * float64(bm/4*4*bn*bk), tiles * float64(bm%4*bn*bk), tiles, tiles * float64(bk*bn)
}

// ConvFFTTerms are the FFT form's counts: line points x passes (fftPasses) of the
// transforms along w (contiguous lines) and along h (a 2-D transform's second pass, over the
// half spectrum's columns, lines strided by a row), over the forward transforms of the
// N*C_in input and C_out*C_in/G weight planes and the inverse ones of the N*C_out output
// planes; and the N*C_out*(C_in/G) complex products over the half spectrum.
func ConvFFTTerms(g graph.ConvGeom) (fftW, fftH, mul float64) {
	return convFFTTerms(g, fftRadix3, fftRadix5)
}

func convFFTTerms(g graph.ConvGeom, radix3, radix5 float64) (fftW, fftH, mul float64) {
	l := ConvFFTLengths(g)
	bins := l[1]/2 + 1
	line := func(n int) float64 { return float64(n) * fftPasses(n, radix3, radix5) }
	// The w pass runs over the rows a plane has: the input's, the kernel's (both zero-filled
	// to l[0] only by the h pass), and all l[0] of an output spectrum.
	fftW = float64(g.N*g.C*g.In[0]+g.Co*g.Cg*g.K[0]+g.N*g.Co*l[0]) * line(l[1])
	if g.Dims == 2 {
		fftH = float64((g.N*g.C+g.Co*g.Cg+g.N*g.Co)*bins) * line(l[0])
	}
	return fftW, fftH, float64(g.N*g.Co*g.Cg) * float64(l[0]*bins)
}

// fftPasses is a transform's cost per point in radix-2 passes: n = 2^a 3^b 5^c takes a
// radix-2, b radix-3 and c radix-5 passes, and the latter cost radix3 and radix5 times a
// radix-2 one (log2 n would weigh them 1.58 and 2.32).
func fftPasses(n int, radix3, radix5 float64) float64 {
	var p float64
	for _, f := range []struct {
		r int
		w float64
	}{{2, 1}, {3, radix3}, {5, radix5}} {
		for n%f.r == 0 {
			n /= f.r
			p += f.w
		}
	}
	return p
}

// ConvDirectCost and ConvFFTCost are the modelled costs of the two forms.
func ConvDirectCost(g graph.ConvGeom) float64 {
	vec, scalar, tiles, gather := ConvDirectTerms(g)
	return vec + scalarMACCost*scalar + tileCost*tiles + gatherCost*gather
}

func ConvFFTCost(g graph.ConvGeom) float64 {
	fftW, fftH, mul := ConvFFTTerms(g)
	return fftPerPoint*fftW + fftStridedPerPoint*fftH + complexMulCost*mul + kernelOverhead
}

// ConvFFTPays reports whether the FFT form is modelled cheaper than the direct one.
func ConvFFTPays(g graph.ConvGeom) bool { return ConvFFTCost(g) < ConvDirectCost(g) }

func smoothAtLeast(n int) int {
	for m := max(n, 1); ; m++ {
		r := m
		for _, p := range []int{2, 3, 5} {
			for r%p == 0 {
				r /= p
			}
		}
		if r == 1 {
			return m
		}
	}
}

func ints64(s []int) []int64 {
	out := make([]int64, len(s))
	for i, v := range s {
		out[i] = int64(v)
	}
	return out
}

// convByFFT builds the rewritten form of conv node n with geometry g.
func convByFFT(add graph.OpAdder, n *graph.Node, g graph.ConvGeom) *graph.Value {
	x, w := n.Inputs[0], n.Inputs[1]
	l := ConvFFTLengths(g)
	norm := graph.String("backward")
	fwd := func(v *graph.Value) *graph.Value {
		if g.Dims == 1 {
			return add("rfft", graph.Attrs{"n": graph.Int(int64(l[1])), "norm": norm}, v)
		}
		return add("rfft2", graph.Attrs{"s": graph.Ints(int64(l[0]), int64(l[1])), "norm": norm}, v)
	}
	reshape := func(v *graph.Value, shape ...int) *graph.Value {
		return add("reshape", graph.Attrs{"shape": graph.Ints(ints64(shape)...)}, v)
	}
	// spec is the spectrum's trailing shape: (h,) bins, 2.
	spec := []int{l[1]/2 + 1, 2}
	if g.Dims == 2 {
		spec = []int{l[0], l[1]/2 + 1, 2}
	}
	xs := reshape(fwd(x), append([]int{g.N, g.G, 1, g.Cg}, spec...)...)
	ws := reshape(fwd(w), append([]int{g.G, g.Cog, g.Cg}, spec...)...)
	prod := add("complex_mul", nil, xs, add("conj", nil, ws))
	sum := reshape(add("reduce_sum", graph.Attrs{"axes": graph.Ints(3)}, prod), append([]int{g.N, g.Co}, spec...)...)
	var y *graph.Value
	if g.Dims == 1 {
		y = add("irfft", graph.Attrs{"n": graph.Int(int64(l[1])), "norm": norm}, sum)
	} else {
		y = add("irfft2", graph.Attrs{"s": graph.Ints(int64(l[0]), int64(l[1])), "norm": norm}, sum)
	}
	for a := 2 - g.Dims; a < 2; a++ {
		start := (l[a] - g.Pad[a]) % l[a]
		if failpoint.Enabled(failpoint.ConvFFTCropOffByOne) {
			start = (start + 1) % l[a]
		}
		y = cyclicCrop(add, y, a+g.Dims, start, g.Out[a])
	}
	if g.Bias {
		bshape := []int{g.Co, 1}
		if g.Dims == 2 {
			bshape = []int{g.Co, 1, 1}
		}
		y = add("add", nil, y, reshape(n.Inputs[2], bshape...))
	}
	return y
}

// cyclicCrop takes `count` points of axis ax starting at `start`, wrapping past the end.
func cyclicCrop(add graph.OpAdder, v *graph.Value, ax, start, count int) *graph.Value {
	l := v.Type.Shape[ax]
	if start+count <= l {
		return graph.SliceAxis(add, v, ax, start, start+count)
	}
	return add("concat", graph.Attrs{"axis": graph.Int(int64(ax))},
		graph.SliceAxis(add, v, ax, start, l), graph.SliceAxis(add, v, ax, 0, start+count-l))
}
