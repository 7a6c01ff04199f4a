package ptx

import (
	"math"
	"slices"

	"github.com/tessera-qa/tessera-qa/engine/compiler/tile"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

// rowsOp names the row kernels that have a dedicated fast lowering (rows_fast.go).
type rowsOp string

const (
	rowsSoftmax    rowsOp = "softmax"
	rowsLogSoftmax rowsOp = "log_softmax"
	rowsLayernorm  rowsOp = "layernorm"
	rowsRMSNorm    rowsOp = "rmsnorm"
)

// rowsPlan is a row kernel recognised in Tile IR, with everything the fast lowering needs.
// Constants (the element count divided by, eps) are read off the kernel, so the fast kernel
// computes what the Tile IR says even when it is not what the graph op means.
type rowsPlan struct {
	op          rowsOp
	x, out      int // param indices
	gamma, beta int // -1 where the op has none
	acc         numerics.DType
	base        int   // element offset of row 0 (Access.Base.Const)
	rowDims     []int // row index space and strides, as in tile.Access
	rowStrides  []int
	rows        int // prod(rowDims)
	cols        int // elements per row (the one col dim)
	colStride   int
	count, eps  float64 // the Full constants of the norms (count also divides)
	rm, cn      int     // the Tile IR's tile: rows per grid point, cols per loop step
	steps       int     // loop trip count: steps*cn covers the row
}

// matchRows recognises the kernels lowerRowwise (engine/compiler/lower_rows.go) emits for
// softmax, log_softmax, layernorm and rmsnorm. It reads the parameters off the kernel, rebuilds
// the kernel from them with the compiler's own builder (tile.Rows, without planted faults) and
// accepts only when both print the same (tile.Format prints every field), so any other kernel,
// a fused variant or one changed by a failpoint, is left to the SIMT path, which runs whatever
// Tile IR it is given.
func matchRows(k *tile.Kernel) *rowsPlan {
	if len(k.Grid) != 1 || len(k.Body) < 3 {
		return nil
	}
	full, ok := k.Body[0].(tile.Full)
	if !ok {
		return nil
	}
	var loops []tile.For
	fulls := map[tile.Reg]float64{} // top-level Full constants
	count, eps := math.NaN(), math.NaN()
	hasLog := false
	for _, in := range k.Body {
		switch x := in.(type) {
		case tile.For:
			loops = append(loops, x)
		case tile.Full:
			fulls[x.Dst] = x.Value
		case tile.Unary:
			hasLog = hasLog || x.Op == tile.Log
		case tile.Binary:
			// The norms divide by the count first and add eps once.
			if v, ok := fulls[x.B]; ok && x.Op == tile.Div && math.IsNaN(count) {
				count = v
			}
			if v, ok := fulls[x.B]; ok && x.Op == tile.Add {
				eps = v
			}
		}
	}
	if len(loops) < 2 || len(loops[0].Body) < 2 || len(loops[len(loops)-1].Body) < 2 {
		return nil
	}
	ld, ok := loops[0].Body[0].(tile.Load)
	if !ok {
		return nil
	}
	last := loops[len(loops)-1].Body
	st, ok := last[len(last)-1].(tile.Store)
	if !ok {
		return nil
	}
	a := ld.At
	p := &rowsPlan{x: a.Param, out: st.At.Param, gamma: -1, beta: -1, base: a.Base.Const,
		rowDims: a.RowDims, rowStrides: a.RowStrides, rm: a.Rows, cn: a.Cols}
	if len(a.ColDims) != 1 || len(a.ColStrides) != 1 || len(a.RowDims) != len(a.RowStrides) || len(a.Base.Terms) != 0 {
		return nil
	}
	p.cols, p.colStride = a.ColDims[0], a.ColStrides[0]
	p.rows = 1
	for _, d := range a.RowDims {
		p.rows *= d
	}
	switch {
	case math.IsInf(full.Value, -1) && hasLog:
		p.op = rowsLogSoftmax
	case math.IsInf(full.Value, -1):
		p.op = rowsSoftmax
	case full.Value == 0 && len(loops[0].Body) > 2 && isMul(loops[0].Body[1]):
		p.op = rowsRMSNorm
	case full.Value == 0:
		p.op = rowsLayernorm
	default:
		return nil
	}
	switch x := loops[0].Body[1].(type) {
	case tile.OnlineSoftmax:
		p.acc = x.DType
	case tile.Reduce:
		p.acc = x.DType
	case tile.Binary:
		p.acc = x.DType
	default:
		return nil
	}
	var vecs []int // gamma, beta: the loads of the last loop that are not x
	for _, in := range last {
		if l, ok := in.(tile.Load); ok && l.At.Param != p.x {
			vecs = append(vecs, l.At.Param)
		}
	}
	p.count, p.eps = count, eps
	switch p.op {
	case rowsLayernorm:
		if len(vecs) != 2 {
			return nil
		}
		p.gamma, p.beta = vecs[0], vecs[1]
	case rowsRMSNorm:
		if len(vecs) != 1 {
			return nil
		}
		p.gamma = vecs[0]
	default:
		if len(vecs) != 0 {
			return nil
		}
	}
	p.steps = loops[0].Count
	want := canonicalRows(k, p)
	if tile.Format(want) != tile.Format(k) {
		return nil
	}
	if !p.fits(k) {
		return nil
	}
	return p
}

func isMul(in tile.Instr) bool {
	b, ok := in.(tile.Binary)
	return ok && b.Op == tile.Mul
}

// fits checks what the fast lowering assumes beyond the kernel's shape: f32 arithmetic on
// f32/f16/bf16 data, every row element inside its parameter's allocation (the fast kernel has
// no per-element bounds test), one grid point per rm rows, and loops that cover every column.
func (p *rowsPlan) fits(k *tile.Kernel) bool {
	if p.acc != numerics.F32 || p.rows < 1 || p.cols < 1 || p.colStride < 0 || p.base < 0 {
		return false
	}
	if p.rm < 1 || p.cn < 1 || k.Grid[0] != (p.rows+p.rm-1)/p.rm || p.steps*p.cn < p.cols {
		return false
	}
	if p.op == rowsLayernorm || p.op == rowsRMSNorm {
		// The divisions are f32 divisions by an f32 value only when the count is one.
		if p.count != float64(float32(p.count)) || p.count <= 0 {
			return false
		}
	}
	last := p.base + (p.cols-1)*p.colStride
	for i, d := range p.rowDims {
		if d < 1 || p.rowStrides[i] < 0 {
			return false
		}
		last += (d - 1) * p.rowStrides[i]
	}
	if last >= math.MaxInt32 {
		return false
	}
	for _, i := range p.params() {
		prm := k.Params[i]
		if !slices.Contains([]numerics.DType{numerics.F32, numerics.F16, numerics.BF16}, prm.DType) {
			return false
		}
		need := last + 1
		if i == p.gamma || i == p.beta {
			need = p.cols
		}
		if prm.Len < need {
			return false
		}
	}
	return true
}

// params lists the parameter indices the kernel reads or writes.
func (p *rowsPlan) params() []int {
	ps := []int{p.x, p.out}
	for _, i := range []int{p.gamma, p.beta} {
		if i >= 0 {
			ps = append(ps, i)
		}
	}
	return ps
}

// canonicalRows is the kernel the compiler's lowering emits for plan p, built by the same
// builder (tile.Rows): the fast lowering is only used where the kernel is exactly this one.
func canonicalRows(src *tile.Kernel, p *rowsPlan) *tile.Kernel {
	k := &tile.Kernel{Name: src.Name, Grid: slices.Clone(src.Grid), Params: src.Params, NumVars: 1}
	tile.Rows{Op: string(p.op), X: p.x, Out: p.out, Gamma: p.gamma, Beta: p.beta, Acc: p.acc, Base: p.base,
		RowDims: p.rowDims, RowStrides: p.rowStrides, Len: p.cols, ColStride: p.colStride, Count: p.count, Eps: p.eps,
		RM: p.rm, CN: p.cn, Steps: p.steps}.Emit(k)
	return k
}
