package tile

import (
	"math"

	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

// Rows describes a row kernel of softmax, log_softmax, layernorm or rmsnorm: one grid dimension
// of Rows-row blocks (grid var 0), each walking its rows in Cols-wide column tiles. The
// compiler's lowering builds these kernels with Emit, and the PTX generator recognises them by
// rebuilding the kernel Emit makes from the parameters it reads off a kernel and comparing the
// two: one builder, so the recogniser cannot drift from the lowering.
type Rows struct {
	Op                  string // softmax, log_softmax, layernorm, rmsnorm
	X, Out, Gamma, Beta int    // parameter indices; Gamma and Beta -1 where the op has none
	Acc                 numerics.DType
	// The row view of X and Out: element (i, j) of the [rows, Len] view is at
	// Base + unravel(i, RowDims)·RowStrides + j·ColStride.
	Base                int
	RowDims, RowStrides []int
	Len, ColStride      int
	Count, Eps          float64 // the norms divide by Count and add Eps
	RM, CN, Steps       int     // rows per grid point, columns per loop step, steps per row
	// Faults planted by the lowering's failpoints (engine/failpoint); zero in a correct kernel.
	Faults RowsFaults
}

// RowsFaults are the row lowering's planted bugs (docs/mutations.md).
type RowsFaults struct {
	MaxInitZero       bool // softmax's running max starts at 0 instead of -Inf
	PaddingInVariance bool // layernorm's variance pass drops the column mask
	FirstTileMax      bool // log_softmax shifts by the first tile's max, then sums exp over every tile
}

// Emit appends the row kernel's body to k (whose grid is set, with grid var 0 the row block),
// allocating its registers and loop variables from k.NumRegs and k.NumVars.
func (r Rows) Emit(k *Kernel) {
	e := &rowsEmitter{k: k, body: &k.Body}
	acc, rm, cn := r.Acc, r.RM, r.CN
	at := func(param int, kt Var) Access {
		return Access{Param: param, Base: C(r.Base), RowDims: r.RowDims, RowStrides: r.RowStrides,
			ColDims: []int{r.Len}, ColStrides: []int{r.ColStride}, RowStart: V(0, rm), ColStart: V(kt, cn),
			Rows: rm, Cols: cn, Mask: true}
	}
	vec := func(param int, kt Var) Access {
		return Access{Param: param, Base: C(0), RowDims: []int{1}, RowStrides: []int{0},
			ColDims: []int{r.Len}, ColStrides: []int{1}, RowStart: C(0), ColStart: V(kt, cn), Rows: 1, Cols: cn, Mask: true}
	}
	switch r.Op {
	case "softmax", "log_softmax":
		init := math.Inf(-1)
		if r.Faults.MaxInitZero {
			init = 0
		}
		m, l := e.full(rm, 1, init), e.full(rm, 1, 0)
		if r.Faults.FirstTileMax {
			e.firstTileMaxSum(r, m, l, at)
		} else {
			e.loop(r.Steps, func(kt Var) {
				t := e.load(at(r.X, kt), math.Inf(-1))
				p, alpha := e.reg(), e.reg()
				e.emit(OnlineSoftmax{M: m, L: l, X: t, P: p, Alpha: alpha, DType: acc})
			})
		}
		var ll Reg
		if r.Op == "log_softmax" {
			ll = e.unary(Log, l, acc)
		}
		e.loop(r.Steps, func(kt Var) {
			d := e.binary(Sub, e.load(at(r.X, kt), math.Inf(-1)), m, acc)
			var y Reg
			if r.Op == "softmax" {
				y = e.binary(Div, e.unary(Exp, d, acc), l, acc)
			} else {
				y = e.binary(Sub, d, ll, acc)
			}
			e.emit(Store{Src: y, At: at(r.Out, kt)})
		})
	case "layernorm":
		s := e.full(rm, 1, 0)
		e.loop(r.Steps, func(kt Var) {
			p := e.reduce(e.load(at(r.X, kt), 0), acc)
			e.emit(Binary{Dst: s, A: s, B: p, Op: Add, DType: acc})
		})
		cnt := e.full(1, 1, r.Count)
		mean := e.binary(Div, s, cnt, acc)
		v := e.full(rm, 1, 0)
		// Two passes (mean, then squared deviations) as the golden model does: one-pass
		// E[x^2]-E[x]^2 cancels catastrophically for rows with a large mean.
		limit := r.Len
		if r.Faults.PaddingInVariance {
			limit = math.MaxInt
		}
		e.loop(r.Steps, func(kt Var) {
			d := e.binary(Sub, e.load(at(r.X, kt), 0), mean, acc)
			md := e.reg()
			e.emit(MaskCols{Dst: md, Src: d, ColStart: V(kt, cn), ColLimit: limit, Value: 0})
			p := e.reduce(e.binary(Mul, md, md, acc), acc)
			e.emit(Binary{Dst: v, A: v, B: p, Op: Add, DType: acc})
		})
		va := e.binary(Div, v, cnt, acc)
		rs := e.unary(Rsqrt, e.binary(Add, va, e.full(1, 1, r.Eps), acc), acc)
		e.loop(r.Steps, func(kt Var) {
			d := e.binary(Sub, e.load(at(r.X, kt), 0), mean, acc)
			y := e.binary(Mul, e.binary(Mul, d, rs, acc), e.load(vec(r.Gamma, kt), 0), acc)
			y = e.binary(Add, y, e.load(vec(r.Beta, kt), 0), acc)
			e.emit(Store{Src: y, At: at(r.Out, kt)})
		})
	case "rmsnorm":
		s := e.full(rm, 1, 0)
		e.loop(r.Steps, func(kt Var) {
			t := e.load(at(r.X, kt), 0)
			p := e.reduce(e.binary(Mul, t, t, acc), acc)
			e.emit(Binary{Dst: s, A: s, B: p, Op: Add, DType: acc})
		})
		ms := e.binary(Div, s, e.full(1, 1, r.Count), acc)
		rs := e.unary(Rsqrt, e.binary(Add, ms, e.full(1, 1, r.Eps), acc), acc)
		e.loop(r.Steps, func(kt Var) {
			y := e.binary(Mul, e.binary(Mul, e.load(at(r.X, kt), 0), rs, acc), e.load(vec(r.Gamma, kt), 0), acc)
			e.emit(Store{Src: y, At: at(r.Out, kt)})
		})
	}
}

// firstTileMaxSum is the planted bug compiler/log-softmax/first-tile-max: the row's shift m is
// the maximum of its first tile only (any shift is exact in real arithmetic), and l sums
// exp(x - m) over every tile, so a later tile more than exp's range above the first overflows
// l, and a first tile of -Inf makes every difference +Inf.
func (e *rowsEmitter) firstTileMaxSum(r Rows, m, l Reg, at func(int, Var) Access) {
	e.loop(1, func(kt Var) {
		t := e.load(at(r.X, kt), math.Inf(-1))
		e.emit(Binary{Dst: m, A: m, B: e.def(Reduce{Dst: e.reg(), Src: t, Op: MaxRed, DType: r.Acc}), Op: Max, DType: r.Acc})
	})
	e.loop(r.Steps, func(kt Var) {
		d := e.binary(Sub, e.load(at(r.X, kt), math.Inf(-1)), m, r.Acc)
		e.emit(Binary{Dst: l, A: l, B: e.reduce(e.unary(Exp, d, r.Acc), r.Acc), Op: Add, DType: r.Acc})
	})
}

// rowsEmitter allocates registers and loop variables from the kernel, as the compiler's
// kernel builder does.
type rowsEmitter struct {
	k    *Kernel
	body *[]Instr
}

func (e *rowsEmitter) reg() Reg         { e.k.NumRegs++; return Reg(e.k.NumRegs - 1) }
func (e *rowsEmitter) emit(in Instr)    { *e.body = append(*e.body, in) }
func (e *rowsEmitter) def(in Instr) Reg { e.emit(in); return Reg(e.k.NumRegs - 1) }
func (e *rowsEmitter) full(r, c int, v float64) Reg {
	return e.def(Full{Dst: e.reg(), Rows: r, Cols: c, Value: v})
}
func (e *rowsEmitter) load(at Access, fill float64) Reg {
	return e.def(Load{Dst: e.reg(), At: at, Fill: fill})
}
func (e *rowsEmitter) unary(op UnaryOp, x Reg, dt numerics.DType) Reg {
	return e.def(Unary{Dst: e.reg(), Src: x, Op: op, DType: dt})
}
func (e *rowsEmitter) binary(op BinaryOp, x, y Reg, dt numerics.DType) Reg {
	return e.def(Binary{Dst: e.reg(), A: x, B: y, Op: op, DType: dt})
}
func (e *rowsEmitter) reduce(x Reg, dt numerics.DType) Reg {
	return e.def(Reduce{Dst: e.reg(), Src: x, Op: Sum, DType: dt})
}
func (e *rowsEmitter) loop(count int, fn func(v Var)) {
	v := Var(e.k.NumVars)
	e.k.NumVars++
	outer := e.body
	f := For{Var: v, Count: count}
	e.body = &f.Body
	fn(v)
	e.body = outer
	e.emit(f)
}
