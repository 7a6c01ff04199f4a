package ptx

import (
	"math"
	"slices"

	"github.com/tessera-qa/tessera-qa/engine/compiler/tile"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

// attnSpec is a Tile IR kernel recognised as the canonical fused attention the compiler lowers
// (compiler.lowerAttention): grid (batch*heads, query tiles); Q, K, V and O contiguous
// [BH, S, D]; per key tile S = Q K^T in f32, times scale, masked (keys >= Sk, and keys after
// the query when causal), an online-softmax step, P rounded to the storage dtype, O = O*alpha
// + P V; finally O / l. Such a kernel computes, for every row, softmax(q K^T * scale [masked])
// V with f32 state; the dedicated kernel (attn_kernel.go) computes that function with its own
// tiling and exp2-based softmax, within the golden tolerance but not bit for bit.
type attnSpec struct {
	dt         numerics.DType // f16 or bf16: Q, K, V and O
	bh, sq, sk int
	d, dv      int
	q, k, v, o int // param indices
	causal     bool
	scale      float64
}

// matchAttention reports whether k is the canonical attention with what the dedicated kernel
// needs: f16/bf16 operands, f32 state, head dims that are multiples of 8 up to 128 (16-byte
// rows, at most two 64-column swizzle blocks), a positive finite scale (the row max of the
// unscaled scores is then the max of the scaled ones), and index arithmetic inside .s32.
func matchAttention(k *tile.Kernel) (attnSpec, bool) {
	var s attnSpec
	if len(k.Grid) != 2 || len(k.Body) != 8 {
		return s, false
	}
	lq, ok0 := k.Body[0].(tile.Load)
	mx, ok1 := k.Body[1].(tile.Full)
	l, ok2 := k.Body[2].(tile.Full)
	o, ok3 := k.Body[3].(tile.Full)
	sc, ok4 := k.Body[4].(tile.Full)
	loop, ok5 := k.Body[5].(tile.For)
	div, ok6 := k.Body[6].(tile.Binary)
	st, ok7 := k.Body[7].(tile.Store)
	if !ok0 || !ok1 || !ok2 || !ok3 || !ok4 || !ok5 || !ok6 || !ok7 || len(loop.Body) != 10 {
		return s, false
	}
	lk, ok0 := loop.Body[0].(tile.Load)
	zs, ok1 := loop.Body[1].(tile.Full)
	mma1, ok2 := loop.Body[2].(tile.MMA)
	mul, ok3 := loop.Body[3].(tile.Binary)
	mask, ok4 := loop.Body[4].(tile.MaskScores)
	osm, ok5 := loop.Body[5].(tile.OnlineSoftmax)
	rnd, ok6 := loop.Body[6].(tile.Round)
	resc, ok7 := loop.Body[7].(tile.Binary)
	lv, ok8 := loop.Body[8].(tile.Load)
	mma2, ok9 := loop.Body[9].(tile.MMA)
	if !ok0 || !ok1 || !ok2 || !ok3 || !ok4 || !ok5 || !ok6 || !ok7 || !ok8 || !ok9 || mask.KeysOnRows {
		return s, false
	}
	// The data flow, register by register.
	if !math.IsInf(mx.Value, -1) || l.Value != 0 || o.Value != 0 || zs.Value != 0 ||
		mma1.Acc != zs.Dst || mma1.A != lq.Dst || mma1.B != lk.Dst || mma1.AccDType != numerics.F32 ||
		mul.Op != tile.Mul || mul.A != zs.Dst || mul.B != sc.Dst || mul.DType != numerics.F32 ||
		mask.Src != mul.Dst || osm.X != mask.Dst || osm.M != mx.Dst || osm.L != l.Dst || osm.DType != numerics.F32 ||
		rnd.Src != osm.P || rnd.Wrap ||
		resc.Op != tile.Mul || resc.Dst != o.Dst || resc.A != o.Dst || resc.B != osm.Alpha || resc.DType != numerics.F32 ||
		mma2.Acc != o.Dst || mma2.A != rnd.Dst || mma2.B != lv.Dst || mma2.AccDType != numerics.F32 ||
		div.Op != tile.Div || div.A != o.Dst || div.B != l.Dst || div.DType != numerics.F32 || st.Src != div.Dst {
		return s, false
	}
	if sc.Rows != 1 || sc.Cols != 1 || !(sc.Value > 0) || math.IsInf(sc.Value, 0) || float32(sc.Value*math.Log2E) == 0 {
		return s, false
	}
	s.scale, s.causal = sc.Value, mask.Causal
	bm, bn := lq.At.Rows, lk.At.Cols
	s.bh = k.Grid[0]
	s.q, s.k, s.v, s.o = lq.At.Param, lk.At.Param, lv.At.Param, st.At.Param
	if len(lq.At.RowDims) != 1 || len(lk.At.ColDims) != 1 || len(lv.At.ColDims) != 1 {
		return s, false
	}
	s.sq, s.d, s.sk, s.dv = lq.At.RowDims[0], lq.At.Cols, lk.At.ColDims[0], lv.At.Cols
	g, q := tile.Var(0), tile.Var(1)
	kt := loop.Var
	zero := tile.C(0)
	// Q [sq, d] rows of query tile q; K^T [d, bn] columns of key tile kt; V [bn, dv] rows of
	// key tile kt; O like Q with dv columns. All masked, contiguous, batch-major.
	if !rowMajor(lq, g, s.sq, s.d, tile.V(q, bm), zero, bm, s.d) ||
		!rowMajor(lv, g, s.sk, s.dv, tile.V(kt, bn), zero, bn, s.dv) ||
		!rowMajor(tile.Load{At: st.At}, g, s.sq, s.dv, tile.V(q, bm), zero, bm, s.dv) {
		return s, false
	}
	kA := lk.At
	if !kA.Mask || lk.Fill != 0 || !isTerm(kA.Base, g, s.sk*s.d) || !slices.Equal(kA.RowDims, []int{s.d}) ||
		!slices.Equal(kA.RowStrides, []int{1}) || !slices.Equal(kA.ColDims, []int{s.sk}) ||
		!slices.Equal(kA.ColStrides, []int{s.d}) || !sameExpr(kA.RowStart, zero) || !isTerm(kA.ColStart, kt, bn) ||
		kA.Rows != s.d || kA.Cols != bn {
		return s, false
	}
	if !isTerm(mask.RowStart, q, bm) || !isTerm(mask.ColStart, kt, bn) || mask.ColLimit != s.sk {
		return s, false
	}
	if k.Grid[1] != ceilDivInt(s.sq, bm) || loop.Count != ceilDivInt(s.sk, bn) || s.bh > 65535 || s.sq < 1 || s.sk < 1 {
		return s, false
	}
	s.dt = k.Params[s.q].DType
	if (s.dt != numerics.F16 && s.dt != numerics.BF16) || rnd.DType != s.dt {
		return s, false
	}
	for _, p := range []int{s.k, s.v, s.o} {
		if k.Params[p].DType != s.dt {
			return s, false
		}
	}
	if !k.Params[s.o].Output || s.o == s.q || s.o == s.k || s.o == s.v {
		return s, false
	}
	for _, dim := range []int{s.d, s.dv} {
		if dim < 8 || dim > 128 || dim%8 != 0 {
			return s, false
		}
	}
	if k.Params[s.q].Len < s.bh*s.sq*s.d || k.Params[s.k].Len < s.bh*s.sk*s.d ||
		k.Params[s.v].Len < s.bh*s.sk*s.dv || k.Params[s.o].Len < s.bh*s.sq*s.dv {
		return s, false
	}
	for _, p := range []int{s.q, s.k, s.v, s.o} {
		if k.Params[p].Len > maxIndex/4 {
			return s, false
		}
	}
	return s, true
}

// rowMajor reports whether ld reads (or a store writes) the masked tile [rows x cols] at
// (rowStart, colStart) of the contiguous batch-major [R, C] matrix of batch g.
func rowMajor(ld tile.Load, g tile.Var, R, C int, rowStart, colStart tile.Expr, rows, cols int) bool {
	a := ld.At
	return a.Mask && ld.Fill == 0 && isTerm(a.Base, g, R*C) && slices.Equal(a.RowDims, []int{R}) &&
		slices.Equal(a.RowStrides, []int{C}) && slices.Equal(a.ColDims, []int{C}) && slices.Equal(a.ColStrides, []int{1}) &&
		sameExpr(a.RowStart, rowStart) && sameExpr(a.ColStart, colStart) && a.Rows == rows && a.Cols == cols
}

// sameExpr compares two expressions of at most one term.
func sameExpr(a, b tile.Expr) bool {
	if len(a.Terms) == 0 && len(b.Terms) == 0 {
		return a.Const == b.Const
	}
	if len(a.Terms) != 1 || len(b.Terms) != 1 || a.Const != b.Const {
		return false
	}
	return a.Terms[0] == b.Terms[0]
}
