package compiler

import (
	"math"
	"slices"

	"github.com/tessera-qa/tessera-qa/engine/compiler/tile"
	"github.com/tessera-qa/tessera-qa/engine/failpoint"
	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

// rowView splits a tensor's dims into a row space (dims not in cols) and a col space (dims in
// cols), each with its strides, so a [rows, cols] tile walks any set of axes.
func rowView(shape []int, cols []int) (rd, rs, cd, cs []int) {
	st := contiguous(shape)
	for i, d := range shape {
		if slices.Contains(cols, i) {
			cd, cs = append(cd, d), append(cs, st[i])
		} else {
			rd, rs = append(rd, d), append(rs, st[i])
		}
	}
	rd, rs = collapse(rd, rs)
	cd, cs = collapse(cd, cs)
	return
}

// rowTile is the [rm, cn] tile of a row view at row block pid and col block kt.
func rowTile(param int, rd, rs, cd, cs []int, pid tile.Var, rm int, colStart tile.Expr, cn int) tile.Access {
	return tile.Access{Param: param, Base: tile.C(0), RowDims: rd, RowStrides: rs, ColDims: cd, ColStrides: cs,
		RowStart: tile.V(pid, rm), ColStart: colStart, Rows: rm, Cols: cn, Mask: true}
}

// ---- reductions ----

func (b *kbuilder) lowerReduce(n *graph.Node, sc Schedule) error {
	x := n.Inputs[0]
	axes, err := graph.ReduceAxes(n, x.Type.Rank())
	if err != nil {
		return err
	}
	if a, set := n.Attrs["axes"]; set && len(a.Ints) == 0 && len(axes) > 1 {
		axes = failpoint.Pick(failpoint.ReduceEmptyAxesFirstOnly, axes, axes[:1])
	}
	outer, inner := reduceExtent(n)
	rm, cn := sc.BM, sc.BN
	acc := failpoint.Apply(failpoint.ReduceAccumIgnoredF64, accumDType(n), func(a numerics.DType) numerics.DType {
		if x.Type.DType == numerics.F64 && a.IsFloat() {
			return numerics.F64 // the planted bug: f64 operands keep f64 whatever accum says
		}
		return a
	})
	op, comb, init := tile.Sum, tile.Add, 0.0
	if n.Op == "reduce_max" {
		op, comb, init = tile.MaxRed, tile.Max, math.Inf(-1)
		if acc.IsInt() {
			init = -numerics.MaxFinite(acc) - 1
		}
	}
	pid := b.grid(ceilDiv(outer, rm))[0]
	rd, rs, cd, cs := rowView(x.Type.Shape, axes)
	px := b.param(x, false)
	a := b.full(rm, 1, init)
	b.loop(ceilDiv(inner, cn), func(kt tile.Var) {
		t := b.load(rowTile(px, rd, rs, cd, cs, pid, rm, tile.V(kt, cn), cn), init)
		p := b.reduce(op, t, acc)
		b.emit(tile.Binary{Dst: a, A: a, B: p, Op: comb, DType: acc})
	})
	if n.Op == "reduce_mean" {
		a = b.binary(tile.Div, a, b.full(1, 1, float64(failpoint.Pick(failpoint.ReduceMeanPaddedCount, inner, ceilDiv(inner, cn)*cn))), acc)
	}
	a = b.narrowTo(a, acc, n.Output.Type.DType)
	b.emit(tile.Store{Src: a, At: tile.Access{Param: b.param(n.Output, true), Base: tile.C(0), RowDims: []int{outer},
		RowStrides: []int{1}, ColDims: []int{1}, ColStrides: []int{0}, RowStart: tile.V(pid, rm), ColStart: tile.C(0),
		Rows: rm, Cols: 1, Mask: true}})
	return nil
}

// ---- softmax, log_softmax, layernorm, rmsnorm ----

func (b *kbuilder) lowerRowwise(n *graph.Node, sc Schedule) error {
	x := n.Inputs[0]
	outer, inner := rowExtent(n)
	rm, cn := sc.BM, sc.BN
	b.grid(ceilDiv(outer, rm))
	rd, rs, cd, cs := rowView(rowShape(n), []int{rowAxis(n)})
	r := tile.Rows{Op: n.Op, X: b.param(x, false), Out: b.param(n.Output, true), Gamma: -1, Beta: -1, Acc: accumDType(n),
		RowDims: rd, RowStrides: rs, Len: cd[0], ColStride: cs[0], Count: float64(inner), Eps: n.FloatAttr("eps"),
		RM: rm, CN: cn, Steps: ceilDiv(inner, cn),
		Faults: tile.RowsFaults{
			MaxInitZero:       failpoint.Enabled(failpoint.SoftmaxMaxInitZero) && (n.Op == "softmax" || n.Op == "log_softmax"),
			PaddingInVariance: failpoint.Enabled(failpoint.LayernormPaddingInVariance),
			FirstTileMax:      failpoint.Enabled(failpoint.LogSoftmaxFirstTileMax) && n.Op == "log_softmax",
		}}
	if n.Op == "layernorm" {
		r.Eps = failpoint.Pick(failpoint.LayernormEpsDropped, r.Eps, 0)
	}
	if len(n.Inputs) > 1 {
		r.Gamma = b.param(n.Inputs[1], false)
	}
	if len(n.Inputs) > 2 {
		r.Beta = b.param(n.Inputs[2], false)
	}
	// tile.Rows is the one builder of row kernels: the PTX generator rebuilds the kernel it
	// reads with it to recognise the kernels its fast row lowering may replace.
	r.Emit(b.k)
	return nil
}

// ---- mse_loss ----

func (b *kbuilder) lowerLoss(n *graph.Node, sc Schedule) error {
	av, bv := n.Inputs[0], n.Inputs[1]
	total, cn := av.Type.NumElems(), sc.BN
	acc := accumDType(n)
	b.grid(1)
	pa, pb := b.param(av, false), b.param(bv, false)
	s := b.full(1, 1, 0)
	flat := []int{total}
	b.loop(ceilDiv(total, cn), func(kt tile.Var) {
		d := b.binary(tile.Sub, b.load(flatTile(pa, tile.C(0), flat, []int{1}, kt, cn), 0), b.load(flatTile(pb, tile.C(0), flat, []int{1}, kt, cn), 0), acc)
		p := b.reduce(tile.Sum, b.binary(tile.Mul, d, d, acc), acc)
		b.emit(tile.Binary{Dst: s, A: s, B: p, Op: tile.Add, DType: acc})
	})
	res := s // reduction "sum"; "none" never gets here (desugar makes it elementwise)
	if n.StringAttr("reduction") == "mean" {
		res = b.binary(tile.Div, s, b.full(1, 1, float64(total)), acc)
	}
	b.emit(tile.Store{Src: res, At: tile.Access{Param: b.param(n.Output, true), Base: tile.C(0), RowDims: []int{1}, RowStrides: []int{0},
		ColDims: []int{1}, ColStrides: []int{0}, RowStart: tile.C(0), ColStart: tile.C(0), Rows: 1, Cols: 1, Mask: true}})
	return nil
}

// ---- transpose, reshape, slice, concat: bit copies through a strided view ----

func (b *kbuilder) lowerMovement(n *graph.Node, sc Schedule) error {
	out := n.Output
	oshape := out.Type.Shape
	block := sc.BN
	if n.Op == "concat" {
		ax, _ := graph.NormAxis(int(n.IntAttr("axis")), out.Type.Rank())
		ost := contiguous(oshape)
		longest := 0
		for _, in := range n.Inputs {
			longest = max(longest, in.Type.NumElems())
		}
		pid := b.grid(ceilDiv(longest, block))[0]
		po := b.param(out, true)
		off := 0
		for _, in := range n.Inputs {
			ish := in.Type.Shape
			if isEmpty(in) {
				continue // an empty piece adds nothing and must not become a zero-length param
			}
			b.copyTile(flatTile(b.param(in, false), tile.C(0), ish, contiguous(ish), pid, block), flatTile(po, tile.C(off*ost[ax]), ish, ost, pid, block))
			off += failpoint.Pick(failpoint.ConcatOffsetOffByOne, ish[ax], ish[ax]-1)
		}
		return nil
	}
	x := n.Inputs[0]
	ist := contiguous(x.Type.Shape)
	var strides []int
	base := 0
	switch n.Op {
	case "transpose":
		for _, p := range n.IntsAttr("perm") {
			strides = append(strides, ist[p])
		}
	case "slice":
		strides = ist
		for i, s := range n.IntsAttr("starts") {
			base += s * ist[i]
		}
	case "reshape":
		strides = contiguous(oshape)
	}
	pid := b.grid(ceilDiv(out.Type.NumElems(), block))[0]
	b.copyTile(flatTile(b.param(x, false), tile.C(base), oshape, strides, pid, block), flatTile(b.param(out, true), tile.C(0), oshape, contiguous(oshape), pid, block))
	return nil
}

// copyTile moves a tile's bit patterns (tile.Copy): data movement must keep every pattern,
// NaN payloads and fp8 e5m2 ±Inf included, which a decode and re-encode would not.
func (b *kbuilder) copyTile(from, to tile.Access) {
	if failpoint.Enabled(failpoint.MovementDecodeEncode) {
		b.emit(tile.Store{Src: b.load(from, 0), At: to})
		return
	}
	b.emit(tile.Copy{From: from, To: to})
}
