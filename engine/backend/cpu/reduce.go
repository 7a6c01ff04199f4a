package cpu

import (
	"math"
	"slices"

	"github.com/tessera-qa/tessera-qa/engine/compiler/tile"
	"github.com/tessera-qa/tessera-qa/engine/failpoint"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

// reduce folds each row left to right, rounding every step to the dtype. The fold starts from
// the first element (not from 0), so a row of -0 sums to -0.
func (w *worker) reduce(in tile.Reduce) {
	ts, td := &w.regs[in.Src], &w.regs[in.Dst]
	src := ts.get64()
	cols := ts.cols
	// Dst is [R,1]; it can alias Src only when Src is [R,1] too, and then row r is read
	// (its single element) before it is written.
	out := td.out64()
	for r := range ts.rows {
		row := failpoint.Apply(failpoint.CPUReduceRightToLeft, src[r*cols:(r+1)*cols], func(s []float64) []float64 { s = slices.Clone(s); slices.Reverse(s); return s })
		out[r] = foldRow(in.Op, in.DType, row)
	}
}

func foldRow(op tile.ReduceOp, dt numerics.DType, row []float64) float64 {
	if op == tile.MaxRed {
		acc := row[0]
		for _, x := range row[1:] {
			acc = max(acc, x)
		}
		return roundTo(dt, acc)
	}
	if dt.IsInt() {
		acc := numerics.WrapInt(dt, toInt(row[0]))
		for _, x := range row[1:] {
			acc = numerics.WrapInt(dt, acc+toInt(x))
		}
		return float64(acc)
	}
	acc := roundTo(dt, row[0])
	switch dt {
	case numerics.F32:
		for _, x := range row[1:] {
			acc = float64(float32(acc + x))
		}
	case numerics.F64:
		for _, x := range row[1:] {
			acc += x
		}
	default:
		for _, x := range row[1:] {
			acc = roundTo(dt, acc+x)
		}
	}
	return acc
}

// onlineSoftmax advances (M, L) by one tile of scores, exactly as the IR documents it; every
// named quantity, including the differences fed to exp, is rounded to the dtype, as a kernel
// computing in that dtype would.
func (w *worker) onlineSoftmax(in tile.OnlineSoftmax) {
	tx := &w.regs[in.X]
	x := tx.get64()
	m, l := w.regs[in.M].get64(), w.regs[in.L].get64()
	dt := in.DType
	ninf := math.Inf(-1)
	// P may alias X: each P element is written after its own X element is read, and the row
	// max is taken before any P element of that row is written.
	p := w.regs[in.P].out64()
	alpha := w.regs[in.Alpha].out64()
	cols := tx.cols
	for r := range tx.rows {
		xr, pr := x[r*cols:(r+1)*cols], p[r*cols:(r+1)*cols]
		rowMax := xr[0]
		for _, v := range xr[1:] {
			rowMax = max(rowMax, v)
		}
		mOld := m[r]
		mNew := roundTo(dt, failpoint.Apply(failpoint.CPUSoftmaxMaxFrozen, max(mOld, rowMax), func(m float64) float64 { return frozenMax(mOld, m) }))
		var a float64
		switch {
		case mNew == ninf:
			a = 1
		case mOld == ninf:
			a = 0
		default:
			a = roundTo(dt, math.Exp(roundTo(dt, mOld-mNew)))
		}
		for c, v := range xr {
			if mNew == ninf {
				pr[c] = 0
			} else {
				pr[c] = roundTo(dt, math.Exp(roundTo(dt, v-mNew)))
			}
		}
		s := pr[0]
		for _, v := range pr[1:] {
			s = roundTo(dt, s+v)
		}
		alpha[r] = a
		l[r] = roundTo(dt, roundTo(dt, float64(l[r]*failpoint.Pick(failpoint.CPUSoftmaxSumNotRescaled, a, 1)))+s)
		m[r] = mNew
	}
	w.regs[in.M].dirty64()
	w.regs[in.L].dirty64()
}

// frozenMax is the planted bug cpu/online-softmax/max-frozen-after-first-tile: the running
// max keeps the first finite tile's maximum, a shift that is exact in real arithmetic (alpha
// stays 1, every term is exp(x - m) for one m) until a later tile lies more than exp's range
// above it.
func frozenMax(old, updated float64) float64 {
	if math.IsInf(old, -1) {
		return updated
	}
	return old
}
