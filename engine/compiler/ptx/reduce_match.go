package ptx

import (
	"math"

	"github.com/tessera-qa/tessera-qa/engine/compiler/tile"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

// reducePlan is a reduction kernel recognised in Tile IR.
type reducePlan struct {
	op         tile.ReduceOp
	acc        numerics.DType // the Reduce's dtype (each tile's fold)
	comb       tile.Binary    // a = a comb p: the combine into the accumulator
	init       float64        // the accumulator's Full
	load       tile.Load
	t          tile.Reg // the loaded tile
	outer      int      // rows (outputs)
	inner      int      // columns folded per row
	cn, steps  int
	post       []tile.Instr   // after the loop: mean's division, a narrowing, the store
	outDT      numerics.DType // the stored dtype
	w, v       int            // rows per thread, columns per load (one of them 1)
	slots, grp int            // tiles folded at once per row; row groups per CTA
	// pair: two lanes share each tile (V > 1 with 32-bit words): each loads one 16-byte half
	// of a 32-byte block and the odd lane hands its half to the even one, which folds both in
	// order, so every warp-wide load reads whole 32-byte sectors.
	pair bool
}

// matchReduce recognises lowerReduce's kernel: a Full accumulator, a loop that loads a
// [rm, cn] tile, reduces it and combines it into the accumulator, then per-row arithmetic and
// a store of one element per row.
func matchReduce(k *tile.Kernel, shapes []tile.Shape) *reducePlan {
	if len(k.Grid) != 1 || k.NumVars != 2 || len(k.Body) < 3 {
		return nil
	}
	full, ok := k.Body[0].(tile.Full)
	loop, ok2 := k.Body[1].(tile.For)
	if !ok || !ok2 || loop.Var != 1 || len(loop.Body) != 3 || full.Cols != 1 {
		return nil
	}
	ld, ok := loop.Body[0].(tile.Load)
	red, ok2 := loop.Body[1].(tile.Reduce)
	comb, ok3 := loop.Body[2].(tile.Binary)
	if !ok || !ok2 || !ok3 || red.Src != ld.Dst || comb.Dst != full.Dst || comb.A != full.Dst || comb.B != red.Dst {
		return nil
	}
	a := ld.At
	rm, cn := a.Rows, a.Cols
	if full.Rows != rm || len(a.Base.Terms) != 0 || !a.Mask || a.RowStart.Const != 0 || a.ColStart.Const != 0 ||
		len(a.RowStart.Terms) != 1 || a.RowStart.Terms[0] != (tile.Term{Var: 0, Coef: rm}) ||
		len(a.ColStart.Terms) != 1 || a.ColStart.Terms[0] != (tile.Term{Var: 1, Coef: cn}) ||
		len(a.RowDims) != len(a.RowStrides) || len(a.ColDims) != len(a.ColStrides) {
		return nil
	}
	p := &reducePlan{op: red.Op, acc: red.DType, comb: comb, init: full.Value, load: ld, t: ld.Dst,
		outer: prod(a.RowDims), inner: prod(a.ColDims), cn: cn, steps: loop.Count}
	prm := k.Params[a.Param]
	if p.outer < 1 || p.inner < 1 || k.Grid[0]*rm < p.outer || p.steps*cn < p.inner || (p.steps-1)*cn >= p.inner ||
		prm.Len > maxIndex/2 || p.outer > maxIndex/2 {
		return nil
	}
	// Every offset the access can reach lies inside the buffer, so no element reads the SIMT
	// path's out-of-allocation NaN.
	lo, hi := a.Base.Const, a.Base.Const
	for _, dd := range [][2][]int{{a.RowDims, a.RowStrides}, {a.ColDims, a.ColStrides}} {
		for i, d := range dd[0] {
			s := (d - 1) * dd[1][i]
			lo, hi = lo+min(s, 0), hi+max(s, 0)
		}
	}
	if lo < 0 || hi >= prm.Len {
		return nil
	}
	// Padding must be the fold's identity for skipping it to be exact (see above).
	switch {
	case red.Op == tile.Sum && comb.Op == tile.Add && ld.Fill == 0 && !math.Signbit(ld.Fill) && full.Value == 0 && !math.Signbit(full.Value):
	case red.Op == tile.MaxRed && comb.Op == tile.Max && (math.IsInf(ld.Fill, -1) || red.DType.IsInt() && ld.Fill <= -numerics.MaxFinite(red.DType)-1):
	default:
		return nil
	}
	p.post = k.Body[2:]
	st, ok := p.post[len(p.post)-1].(tile.Store)
	if !ok || st.At.Cols != 1 || st.At.Rows != rm || prod(st.At.ColDims) != 1 || prod(st.At.RowDims) != p.outer || !st.At.Mask ||
		len(st.At.Base.Terms) != 0 || st.At.ColStart.Const != 0 || len(st.At.ColStart.Terms) != 0 ||
		len(st.At.RowStart.Terms) != 1 || st.At.RowStart.Terms[0] != (tile.Term{Var: 0, Coef: rm}) || st.At.RowStart.Const != 0 ||
		st.At.Param == a.Param || len(st.At.RowDims) != len(st.At.RowStrides) {
		return nil
	}
	// Per-row arithmetic reads only the accumulator and what it defines itself.
	defined := map[tile.Reg]bool{full.Dst: true}
	uses := func(rs ...tile.Reg) bool {
		for _, r := range rs {
			if !defined[r] {
				return false
			}
		}
		return true
	}
	p.outDT = k.Params[st.At.Param].DType
	for _, in := range p.post[:len(p.post)-1] {
		switch x := in.(type) {
		case tile.Full:
			if x.Rows != 1 || x.Cols != 1 {
				return nil
			}
			defined[x.Dst] = true
		case tile.Binary:
			if !uses(x.A, x.B) {
				return nil
			}
			defined[x.Dst] = true
		case tile.Round:
			if !uses(x.Src) {
				return nil
			}
			defined[x.Dst] = true
		case tile.Unary:
			if !uses(x.Src) {
				return nil
			}
			defined[x.Dst] = true
		default:
			return nil
		}
	}
	if !uses(st.Src) {
		return nil
	}
	for _, in := range p.post {
		if _, ok := in.(tile.Full); !ok && shapeOf(in, shapes) != (tile.Shape{rm, 1}) {
			return nil
		}
	}
	// Vector shape: V columns per load when the folded axis is contiguous, W rows per load
	// when the rows are; 16 bytes either way, else one element per load.
	size := prm.DType.Size()
	per := 16 / size
	aligned := func(strides []int) bool {
		for _, s := range strides {
			if s*size%16 != 0 {
				return false
			}
		}
		return a.Base.Const*size%16 == 0
	}
	p.w, p.v = 1, 1
	switch {
	case len(a.ColDims) == 1 && a.ColStrides[0] == 1 && p.inner%per == 0 && cn%per == 0 && aligned(a.RowStrides):
		p.v = per
	case len(a.RowDims) == 1 && a.RowStrides[0] == 1 && p.outer%per == 0 && aligned(a.ColStrides):
		p.w = per
	}
	units := reduceThreads // threads folding tiles
	if p.v > 1 && size <= 4 {
		p.pair, units = true, reduceThreads/2
	}
	p.slots = min(nextPow2(p.steps), units)
	p.grp = units / p.slots
	return p
}

func shapeOf(in tile.Instr, shapes []tile.Shape) tile.Shape {
	switch x := in.(type) {
	case tile.Binary:
		return shapes[x.Dst]
	case tile.Round:
		return shapes[x.Dst]
	case tile.Unary:
		return shapes[x.Dst]
	case tile.Store:
		return shapes[x.Src]
	}
	return tile.Shape{}
}

func nextPow2(n int) int {
	p := 1
	for p < n {
		p *= 2
	}
	return p
}
