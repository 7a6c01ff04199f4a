package compiler

import (
	"math"

	"github.com/tessera-qa/tessera-qa/engine/compiler/tile"
	"github.com/tessera-qa/tessera-qa/engine/graph"
)

// ---- attention backward ----
//
// attention_lse repeats the forward's sweep (same tiles, same order) and stores m + log(l) per
// query. attention_grad is FlashAttention-2's backward split by output so that no two grid
// points write one element (no atomics, bits independent of the schedule's order):
//
//	wrt=q: grid over (batch*heads, query blocks); per key block P = exp(S - lse),
//	       dP = dO V^T, dS = P (dP - D), dQ += dS K; dQ *= scale; D = rowsum(dO*O).
//	wrt=k, v: grid over (batch*heads, key blocks), on transposed tiles (keys on rows):
//	       P^T = exp(S^T - lse^T), dV += P^T dO, dS^T = P^T (V dO^T - D^T), dK += dS^T Q.

// attnDims are the sizes one attention-family node works on.
type attnDims struct {
	bh, sq, sk, d, dv int
	scale             float64
}

func attnDimsOf(n *graph.Node) attnDims {
	q, k := n.Inputs[0].Type, n.Inputs[1].Type
	r := q.Rank()
	a := attnDims{sq: q.Shape[r-2], d: q.Shape[r-1], sk: k.Shape[r-2], dv: k.Shape[r-1]}
	if len(n.Inputs) > 2 {
		a.dv = n.Inputs[2].Type.Shape[r-1]
	}
	a.bh = q.NumElems() / (a.sq * a.d)
	a.scale = 1 / math.Sqrt(float64(a.d))
	if n.HasAttrSet("scale") {
		a.scale = n.FloatAttr("scale")
	}
	return a
}

// rowsTile addresses rows [start, start+rows) x all cols of a [n, cols] matrix of batch g.
func rowsTile(param int, g tile.Var, n, cols int, start tile.Expr, rows int) tile.Access {
	return tile.Access{Param: param, Base: tile.V(g, n*cols), RowDims: []int{n}, RowStrides: []int{cols},
		ColDims: []int{cols}, ColStrides: []int{1}, RowStart: start, ColStart: tile.C(0), Rows: rows, Cols: cols, Mask: true}
}

// colsTile is the transpose view: element (c, i) is row i, col c of a [n, cols] matrix, for
// rows [start, start+count) of it.
func colsTile(param int, g tile.Var, n, cols int, start tile.Expr, count int) tile.Access {
	return tile.Access{Param: param, Base: tile.V(g, n*cols), RowDims: []int{cols}, RowStrides: []int{1},
		ColDims: []int{n}, ColStrides: []int{cols}, RowStart: tile.C(0), ColStart: start, Rows: cols, Cols: count, Mask: true}
}

func (b *kbuilder) lowerAttentionGrad(n *graph.Node, sc Schedule) error {
	if n.Op == "attention_lse" {
		return b.lowerAttentionLSE(n, sc)
	}
	if n.StringAttr("wrt") == "q" {
		return b.lowerAttentionGradQ(n, sc)
	}
	return b.lowerAttentionGradKV(n, sc)
}

func (b *kbuilder) lowerAttentionLSE(n *graph.Node, sc Schedule) error {
	a := attnDimsOf(n)
	acc := accumDType(n)
	bm, bn := sc.BM, sc.BN
	g := b.grid(a.bh, ceilDiv(a.sq, bm))
	qt := b.load(rowsTile(b.param(n.Inputs[0], false), g[0], a.sq, a.d, tile.V(g[1], bm), bm), 0)
	mx, l := b.full(bm, 1, math.Inf(-1)), b.full(bm, 1, 0)
	sc1 := b.full(1, 1, a.scale)
	pk := b.param(n.Inputs[1], false)
	b.loop(ceilDiv(a.sk, bn), func(kt tile.Var) {
		kT := b.load(colsTile(pk, g[0], a.sk, a.d, tile.V(kt, bn), bn), 0)
		s := b.full(bm, bn, 0)
		b.emit(tile.MMA{Acc: s, A: qt, B: kT, AccDType: acc})
		s = b.binary(tile.Mul, s, sc1, acc)
		ms := b.reg()
		b.emit(tile.MaskScores{Dst: ms, Src: s, RowStart: tile.V(g[1], bm), ColStart: tile.V(kt, bn), ColLimit: a.sk, Causal: n.BoolAttr("causal")})
		p, alpha := b.reg(), b.reg()
		b.emit(tile.OnlineSoftmax{M: mx, L: l, X: ms, P: p, Alpha: alpha, DType: acc})
	})
	lse := b.binary(tile.Add, mx, b.unary(tile.Log, l, acc), acc)
	b.emit(tile.Store{Src: b.narrowTo(lse, acc, n.Output.Type.DType), At: rowsTile(b.param(n.Output, true), g[0], a.sq, 1, tile.V(g[1], bm), bm)})
	return nil
}

// delta loads dO and O rows and returns D = rowsum(dO*O) as [rows, 1].
func (b *kbuilder) delta(n *graph.Node, a attnDims, g tile.Var, start tile.Expr, rows int) tile.Reg {
	acc := accumDType(n)
	do := b.load(rowsTile(b.param(n.Inputs[4], false), g, a.sq, a.dv, start, rows), 0)
	o := b.load(rowsTile(b.param(n.Inputs[3], false), g, a.sq, a.dv, start, rows), 0)
	return b.reduce(tile.Sum, b.binary(tile.Mul, do, o, acc), acc)
}

func (b *kbuilder) lowerAttentionGradQ(n *graph.Node, sc Schedule) error {
	a := attnDimsOf(n)
	acc := accumDType(n)
	bm, bn := sc.BM, sc.BN
	g := b.grid(a.bh, ceilDiv(a.sq, bm))
	rows := tile.V(g[1], bm)
	qt := b.load(rowsTile(b.param(n.Inputs[0], false), g[0], a.sq, a.d, rows, bm), 0)
	do := b.load(rowsTile(b.param(n.Inputs[4], false), g[0], a.sq, a.dv, rows, bm), 0)
	dd := b.delta(n, a, g[0], rows, bm)
	lse := b.load(rowsTile(b.param(n.Inputs[5], false), g[0], a.sq, 1, rows, bm), 0)
	sc1 := b.full(1, 1, a.scale)
	dq := b.full(bm, a.d, 0)
	pk, pv := b.param(n.Inputs[1], false), b.param(n.Inputs[2], false)
	b.loop(ceilDiv(a.sk, bn), func(kt tile.Var) {
		kT := b.load(colsTile(pk, g[0], a.sk, a.d, tile.V(kt, bn), bn), 0)
		s := b.full(bm, bn, 0)
		b.emit(tile.MMA{Acc: s, A: qt, B: kT, AccDType: acc})
		s = b.binary(tile.Mul, s, sc1, acc)
		ms := b.reg()
		b.emit(tile.MaskScores{Dst: ms, Src: s, RowStart: rows, ColStart: tile.V(kt, bn), ColLimit: a.sk, Causal: n.BoolAttr("causal")})
		p := b.unary(tile.Exp, b.binary(tile.Sub, ms, lse, acc), acc)
		vT := b.load(colsTile(pv, g[0], a.sk, a.dv, tile.V(kt, bn), bn), 0)
		dp := b.full(bm, bn, 0)
		b.emit(tile.MMA{Acc: dp, A: do, B: vT, AccDType: acc})
		ds := b.binary(tile.Mul, p, b.binary(tile.Sub, dp, dd, acc), acc)
		kr := b.load(rowsTile(pk, g[0], a.sk, a.d, tile.V(kt, bn), bn), 0)
		b.emit(tile.MMA{Acc: dq, A: ds, B: kr, AccDType: acc})
	})
	res := b.binary(tile.Mul, dq, sc1, acc)
	b.emit(tile.Store{Src: b.narrowTo(res, acc, n.Output.Type.DType), At: rowsTile(b.param(n.Output, true), g[0], a.sq, a.d, rows, bm)})
	return nil
}

func (b *kbuilder) lowerAttentionGradKV(n *graph.Node, sc Schedule) error {
	a := attnDimsOf(n)
	acc := accumDType(n)
	bm, bn := sc.BM, sc.BN
	wantK := n.StringAttr("wrt") == "k"
	g := b.grid(a.bh, ceilDiv(a.sk, bn))
	keys := tile.V(g[1], bn)
	pq, pk, pv := b.param(n.Inputs[0], false), b.param(n.Inputs[1], false), b.param(n.Inputs[2], false)
	po, pdo, plse := b.param(n.Inputs[3], false), b.param(n.Inputs[4], false), b.param(n.Inputs[5], false)
	kr := b.load(rowsTile(pk, g[0], a.sk, a.d, keys, bn), 0)
	var vr tile.Reg
	if wantK {
		vr = b.load(rowsTile(pv, g[0], a.sk, a.dv, keys, bn), 0)
	}
	sc1 := b.full(1, 1, a.scale)
	width := a.dv
	if wantK {
		width = a.d
	}
	grad := b.full(bn, width, 0)
	var ones tile.Reg
	if wantK {
		ones = b.full(1, a.dv, 1)
	}
	b.loop(ceilDiv(a.sq, bm), func(qt tile.Var) {
		qs := tile.V(qt, bm)
		qT := b.load(colsTile(pq, g[0], a.sq, a.d, qs, bm), 0)
		s := b.full(bn, bm, 0)
		b.emit(tile.MMA{Acc: s, A: kr, B: qT, AccDType: acc})
		s = b.binary(tile.Mul, s, sc1, acc)
		ms := b.reg()
		b.emit(tile.MaskScores{Dst: ms, Src: s, RowStart: keys, ColStart: qs, ColLimit: a.sq, Causal: n.BoolAttr("causal"), KeysOnRows: true})
		lseT := b.load(colsTile(plse, g[0], a.sq, 1, qs, bm), 0)
		p := b.unary(tile.Exp, b.binary(tile.Sub, ms, lseT, acc), acc)
		if !wantK {
			dor := b.load(rowsTile(pdo, g[0], a.sq, a.dv, qs, bm), 0)
			b.emit(tile.MMA{Acc: grad, A: p, B: dor, AccDType: acc})
			return
		}
		doT := b.load(colsTile(pdo, g[0], a.sq, a.dv, qs, bm), 0)
		oT := b.load(colsTile(po, g[0], a.sq, a.dv, qs, bm), 0)
		// D^T = ones x (dO*O)^T: the same products and left-to-right sums as delta's Reduce.
		dT := b.full(1, bm, 0)
		b.emit(tile.MMA{Acc: dT, A: ones, B: b.binary(tile.Mul, doT, oT, acc), AccDType: acc})
		dp := b.full(bn, bm, 0)
		b.emit(tile.MMA{Acc: dp, A: vr, B: doT, AccDType: acc})
		ds := b.binary(tile.Mul, p, b.binary(tile.Sub, dp, dT, acc), acc)
		qr := b.load(rowsTile(pq, g[0], a.sq, a.d, qs, bm), 0)
		b.emit(tile.MMA{Acc: grad, A: ds, B: qr, AccDType: acc})
	})
	if wantK {
		grad = b.binary(tile.Mul, grad, sc1, acc)
	}
	b.emit(tile.Store{Src: b.narrowTo(grad, acc, n.Output.Type.DType), At: rowsTile(b.param(n.Output, true), g[0], a.sk, width, keys, bn)})
	return nil
}
