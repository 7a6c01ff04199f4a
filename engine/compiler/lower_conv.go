package compiler

import (
	"github.com/tessera-qa/tessera-qa/engine/compiler/tile"
	"github.com/tessera-qa/tessera-qa/engine/graph"
)

// Direct convolution (issue 26). desugarConv makes padding explicit (zero blocks concatenated
// on each spatial axis, graph.PadAxis), because a tile access masks only the far end of an
// index range, not a window that starts before the buffer; the kernel then reads an unpadded
// input. lowerConv computes one group's output block as a sum of matrix products, one per
// input channel and block of kernel taps:
//
//	acc[o, i] += w[o, c, t] x xpad[c, tap t of output position i]
//
// The B operand is an affine view of the input: its rows walk the taps (strides dilation*W
// and dilation), its columns the output positions (strides stride*W and stride), so no im2col
// copy exists. Each output element sums the channels, then the taps, in increasing order,
// each step rounded to the accumulator (f32; f64 for f64), then adds the bias.

// desugarConv handles a conv with padding; it reports whether it did.
func desugarConv(n *graph.Node, add graph.OpAdder, last func(string, graph.Attrs, ...*graph.Value)) bool {
	if n.Def().Kind != graph.KindConv {
		return false
	}
	g, err := graph.ConvDims(n, types(n.Inputs))
	if err != nil || (g.Pad[0] == 0 && g.Pad[1] == 0) {
		return false
	}
	x := n.Inputs[0]
	for a := 2 - g.Dims; a < 2; a++ {
		x = graph.PadAxis(add, x, a+g.Dims, g.Pad[a], g.Pad[a])
	}
	at := n.Attrs.Clone()
	at["padding"] = graph.Ints(0)
	last(n.Op, at, append([]*graph.Value{x}, n.Inputs[1:]...)...)
	return true
}

func types(vs []*graph.Value) []graph.Type {
	out := make([]graph.Type, len(vs))
	for i, v := range vs {
		out[i] = v.Type
	}
	return out
}

// Default conv tiles: output channels x output positions, taps per product.
const defConvBM, defConvBN, defConvBK = 32, 64, 32

func convSchedule(n *graph.Node, key string) Schedule {
	g, _ := graph.ConvDims(n, types(n.Inputs))
	return Schedule{Key: key, Kind: "conv", BM: fit(g.Cog, defConvBM), BN: fit(g.Positions(), defConvBN), BK: fit(g.Taps(), defConvBK),
		Stages: 1, LoopOrder: "grid(batch,group,c_out,positions) c_in-seq taps-seq"}
}

func (b *kbuilder) lowerConv(n *graph.Node, sc Schedule) error {
	g, err := graph.ConvDims(n, types(n.Inputs))
	if err != nil {
		return err
	}
	b.k.Op = n.Op
	x, w := n.Inputs[0], n.Inputs[1]
	acc := computeDType(x.Type.DType)
	bm, bn, bk := sc.BM, sc.BN, sc.BK
	h, wd := g.Padded(0), g.Padded(1) // the desugar pass padded already, so Pad is 0 here
	taps, pos := g.Taps(), g.Positions()
	gr := b.grid(g.N, g.G, ceilDiv(g.Cog, bm), ceilDiv(pos, bn))
	px, pw := b.param(x, false), b.param(w, false)
	c := b.full(bm, bn, 0)
	b.loop(g.Cg, func(ci tile.Var) {
		b.loop(ceilDiv(taps, bk), func(kt tile.Var) {
			a := b.load(tile.Access{Param: pw, Base: tile.V(gr[1], g.Cog*g.Cg*taps).Plus(tile.V(ci, taps)),
				RowDims: []int{g.Cog}, RowStrides: []int{g.Cg * taps}, ColDims: []int{taps}, ColStrides: []int{1},
				RowStart: tile.V(gr[2], bm), ColStart: tile.V(kt, bk), Rows: bm, Cols: bk, Mask: true}, 0)
			bt := b.load(tile.Access{Param: px, Base: tile.V(gr[0], g.C*h*wd).Plus(tile.V(gr[1], g.Cg*h*wd)).Plus(tile.V(ci, h*wd)),
				RowDims: []int{g.K[0], g.K[1]}, RowStrides: []int{g.Dil[0] * wd, g.Dil[1]},
				ColDims: []int{g.Out[0], g.Out[1]}, ColStrides: []int{g.Stride[0] * wd, g.Stride[1]},
				RowStart: tile.V(kt, bk), ColStart: tile.V(gr[3], bn), Rows: bk, Cols: bn, Mask: true}, 0)
			b.emit(tile.MMA{Acc: c, A: a, B: bt, AccDType: acc})
		})
	})
	if g.Bias {
		bias := b.load(tile.Access{Param: b.param(n.Inputs[2], false), Base: tile.V(gr[1], g.Cog),
			RowDims: []int{g.Cog}, RowStrides: []int{1}, ColDims: []int{1}, ColStrides: []int{0},
			RowStart: tile.V(gr[2], bm), ColStart: tile.C(0), Rows: bm, Cols: 1, Mask: true}, 0)
		c = b.binary(tile.Add, c, bias, acc)
	}
	b.emit(tile.Store{Src: c, At: tile.Access{Param: b.param(n.Output, true), Base: tile.V(gr[0], g.Co*pos).Plus(tile.V(gr[1], g.Cog*pos)),
		RowDims: []int{g.Cog}, RowStrides: []int{pos}, ColDims: []int{pos}, ColStrides: []int{1},
		RowStart: tile.V(gr[2], bm), ColStart: tile.V(gr[3], bn), Rows: bm, Cols: bn, Mask: true}})
	return nil
}
