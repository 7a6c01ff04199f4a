package graph

import (
	"slices"

	"github.com/tessera-qa/tessera-qa/engine/failpoint"
)

// Gradient rules of conv1d and conv2d, written as convolutions so that the backward runs
// through the same lowering (and the conv-fft rewrite where it pays) on every backend. Per
// spatial axis, with stride s, padding p, dilation d and K taps, y[i] = sum_k w[k] xpad[i*s + k*d]:
//
//   - the weight's gradient, dw[k] = sum_{n,i} dy[i] xpad[k*d + i*s], is a convolution of the
//     input with dy as its kernel: stride and dilation exchanged, the same padding, batch and
//     channel roles swapped (the sum over the batch becomes the sum over the new channels);
//   - the input's gradient is the transposed convolution: dy with s-1 zeros after every
//     position, padded by d*(K-1)-p on both sides (cropped where that is negative), correlated
//     with the kernel flipped on every spatial axis and its channel roles exchanged per group.
//     A forward whose last window stops short of the padded input's end (a ragged stride tail)
//     never read those positions: their gradient is zero, which extra zeros behind dy give;
//   - the bias's gradient is dy summed over the batch and the positions.
func init() {
	for _, op := range []string{"conv1d", "conv2d"} {
		registry[op].Grad = gradOf(convVJP, false)
	}
}

func convVJP(b *Builder, n *Node, dy *Value, need []bool) []*Value {
	out := make([]*Value, len(n.Inputs))
	types := make([]Type, len(n.Inputs))
	for i, v := range n.Inputs {
		types[i] = v.Type
	}
	g, err := ConvDims(n, types)
	if err != nil {
		b.Fail(err)
		return out
	}
	if need[0] {
		out[0] = convInputGrad(b, n, g, dy)
	}
	if need[1] {
		out[1] = convWeightGrad(b, n, g, dy)
	}
	if g.Bias && need[2] {
		axes := []int64{0}
		for a := 2; a < dy.Type.Rank(); a++ {
			axes = append(axes, int64(a))
		}
		out[2] = b.Op("reduce_sum", Attrs{"axes": Ints(axes...)}, dy)
	}
	return out
}

// spatialInts is one entry per spatial axis of the op (h, w for conv2d; l for conv1d).
func spatialInts(g ConvGeom, v [2]int) Attr { return Ints(ints64(v[2-g.Dims:])...) }

func convAttrs(g ConvGeom, stride, pad, dil [2]int) Attrs {
	return Attrs{"stride": spatialInts(g, stride), "padding": spatialInts(g, pad), "dilation": spatialInts(g, dil), "groups": Int(int64(g.G))}
}

func convInputGrad(b *Builder, n *Node, g ConvGeom, dy *Value) *Value {
	w := n.Inputs[1]
	v := dy
	for a := 2 - g.Dims; a < 2; a++ {
		ax, s := a+g.Dims, g.Stride[a]
		if s > 1 {
			v = b.interleaveZeros(v, ax, s)
		}
		span := g.Dil[a] * (g.K[a] - 1)
		edge := span - g.Pad[a]
		tail := (g.Padded(a) - span - 1) % s // positions past the last window: never read
		after := edge + tail - (s - 1)       // the interleave already put s-1 zeros behind
		// Never empty after a crop: out*s - (pad - span) >= L + pad > 0 when after >= 0,
		// and the result's L + span > 0 otherwise, so PadAxis always has a block to copy.
		v = PadAxis(b.Op, v, ax, edge, after)
	}
	// w [C_out, C_in/G, K..] -> [C_in, C_out/G, K..]: per group, the in and out channels swap.
	k := b.reshapeTo(w, append([]int{g.G, g.Cog, g.Cg}, w.Type.Shape[2:]...))
	perm := []int{0, 2, 1}
	for a := 3; a < k.Type.Rank(); a++ {
		perm = append(perm, a)
	}
	k = b.reshapeTo(b.permute(k, perm), append([]int{g.C, g.Cog}, w.Type.Shape[2:]...))
	if !failpoint.Enabled(failpoint.GraphConvGradKernelNotFlipped) {
		for ax := 2; ax < k.Type.Rank(); ax++ {
			k = b.flipAxis(k, ax)
		}
	}
	one := [2]int{1, 1}
	return b.Op(n.Op, convAttrs(g, one, [2]int{}, g.Dil), v, k)
}

func convWeightGrad(b *Builder, n *Node, g ConvGeom, dy *Value) *Value {
	x := n.Inputs[0]
	sp := x.Type.Shape[2:]
	// x [N, C_in, ..] -> [C_in/G, G*N, ..]: the group's channels become the batch, the batch
	// within each group the channels that the product sums over.
	xr := b.reshapeTo(x, append([]int{g.N, g.G, g.Cg}, sp...))
	perm := []int{2, 1, 0}
	for a := 3; a < xr.Type.Rank(); a++ {
		perm = append(perm, a)
	}
	xr = b.reshapeTo(b.permute(xr, perm), append([]int{g.Cg, g.G * g.N}, sp...))
	swap := []int{1, 0}
	for a := 2; a < dy.Type.Rank(); a++ {
		swap = append(swap, a)
	}
	k := b.permute(dy, swap) // [C_out, N, out..]: group o/(C_out/G) reads its own N channels
	gw := b.Op(n.Op, convAttrs(g, g.Dil, g.Pad, g.Stride), xr, k)
	gw = b.permute(gw, swap) // [C_out, C_in/G, K'..] with K' >= K (taps past K read nothing kept)
	for a := 2 - g.Dims; a < 2; a++ {
		gw = PadAxis(b.Op, gw, a+g.Dims, 0, g.K[a]-gw.Type.Shape[a+g.Dims])
	}
	return gw
}

// interleaveZeros puts s-1 zeros after every element of v along axis ax (length L -> L*s).
func (b *Builder) interleaveZeros(v *Value, ax, s int) *Value {
	sh := v.Type.Shape
	split := slices.Concat(sh[:ax+1], []int{1}, sh[ax+1:])
	r := PadAxis(b.Op, b.reshapeTo(v, split), ax+1, 0, s-1)
	merged := slices.Clone(sh)
	merged[ax] *= s
	return b.reshapeTo(r, merged)
}

// flipAxis reverses v along axis ax, as a concat of its one-wide slices (kernels are small).
func (b *Builder) flipAxis(v *Value, ax int) *Value {
	l := v.Type.Shape[ax]
	if l < 2 {
		return v
	}
	pieces := make([]*Value, l)
	for i := range l {
		pieces[l-1-i] = b.sliceAxis(v, ax, i, i+1)
	}
	return b.Op("concat", Attrs{"axis": Int(int64(ax))}, pieces...)
}

// permute transposes v by perm, as a reshape when only axes of size 1 move (the elements'
// order is then unchanged).
func (b *Builder) permute(v *Value, perm []int) *Value {
	sh := v.Type.Shape
	out := make([]int, len(perm))
	var order, moved []int
	for i, p := range perm {
		out[i] = sh[p]
		if sh[p] != 1 {
			moved = append(moved, p)
		}
	}
	for a, d := range sh {
		if d != 1 {
			order = append(order, a)
		}
	}
	if slices.Equal(order, moved) {
		return b.reshapeTo(v, out)
	}
	return b.Op("transpose", Attrs{"perm": Ints(ints64(perm)...)}, v)
}
