package compiler

import (
	"math"

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
		g, ok := convFFTCandidate(n)
		if !ok {
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

// convFFTCandidate reports whether the rewrite applies to n and returns its geometry.
func convFFTCandidate(n *graph.Node) (graph.ConvGeom, bool) {
	if n.Def().Kind != graph.KindConv {
		return graph.ConvGeom{}, false
	}
	g, err := graph.ConvDims(n, types(n.Inputs))
	if err != nil || g.Stride != [2]int{1, 1} || g.Dil != [2]int{1, 1} {
		return g, false
	}
	if dt := n.Inputs[0].Type.DType; dt != numerics.F32 && dt != numerics.F64 {
		return g, false
	}
	return g, ConvFFTPays(g)
}

// Cost model, in units of one direct multiply-add on the CPU backend. The constants are
// estimates, NOT yet fitted to a measurement (no direct-vs-FFT benchmark exists yet): a transform of a line of n points costs
// fftPerPoint * n * log2(n), each complex product of the channel sum complexMulCost, each
// point an op touches besides (padding, crop, reduction, reshape copies) copyCost.
const (
	fftPerPoint    = 2.0
	complexMulCost = 24.0
	copyCost       = 2.0
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

// ConvFFTCost is the modelled cost of the rewritten form: the forward transforms of the
// N*C_in input and C_out*C_in/G weight planes, the N*C_out inverse ones, the
// N*C_out*(C_in/G) complex products over the half spectrum, and the copies around them.
func ConvFFTCost(g graph.ConvGeom) float64 {
	l := ConvFFTLengths(g)
	pts := float64(l[0] * l[1])
	half := float64(l[0] * (l[1]/2 + 1))
	planes := float64(g.N*g.C + g.Co*g.Cg + g.N*g.Co)
	fft := fftPerPoint * planes * pts * math.Log2(max(pts, 2))
	mul := complexMulCost * float64(g.N*g.Co*g.Cg) * half
	cp := copyCost * (planes*pts + 2*float64(g.N*g.Co*g.Cg)*half)
	return fft + mul + cp
}

// ConvFFTPays reports whether the FFT form is modelled cheaper than the direct one.
func ConvFFTPays(g graph.ConvGeom) bool { return ConvFFTCost(g) < float64(g.MACs()) }

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
