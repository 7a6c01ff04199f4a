package tile

import (
	"fmt"

	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

// Shape is a tile's static [rows, cols].
type Shape [2]int

// Verify checks a kernel's structure: params, grid, vars, register definitions before use and
// every tile shape, so a backend can trust them. It returns the static shape of each register
// (the last definition's; a register keeps one shape for the whole kernel).
func Verify(k *Kernel) ([]Shape, error) {
	v := &verifier{k: k, shapes: make([]Shape, k.NumRegs), def: make([]bool, k.NumRegs)}
	if len(k.Grid) == 0 {
		return nil, v.errf(-1, "empty grid")
	}
	for i, g := range k.Grid {
		if g < 1 {
			return nil, v.errf(-1, "grid dim %d is %d", i, g)
		}
	}
	if k.NumVars < len(k.Grid) {
		return nil, v.errf(-1, "NumVars %d < grid rank %d", k.NumVars, len(k.Grid))
	}
	for i, p := range k.Params {
		if !p.DType.Valid() || p.Len < 1 {
			return nil, v.errf(-1, "param %d (%%%s): bad dtype %s or length %d", i, p.Name, p.DType, p.Len)
		}
	}
	if err := v.body(k.Body, map[Var]bool{}); err != nil {
		return nil, err
	}
	return v.shapes, nil
}

type verifier struct {
	k      *Kernel
	shapes []Shape
	def    []bool
	pc     int
}

func (v *verifier) errf(pc int, format string, args ...any) error {
	return fmt.Errorf("tile verify: kernel %s instr %d: %s", v.k.Name, pc, fmt.Sprintf(format, args...))
}

func (v *verifier) use(r Reg) (Shape, error) {
	if r < 0 || int(r) >= len(v.shapes) || !v.def[r] {
		return Shape{}, v.errf(v.pc, "register r%d used before definition", r)
	}
	return v.shapes[r], nil
}

func (v *verifier) set(r Reg, s Shape) error {
	if r < 0 || int(r) >= len(v.shapes) {
		return v.errf(v.pc, "register r%d out of range (NumRegs %d)", r, len(v.shapes))
	}
	if s[0] < 1 || s[1] < 1 {
		return v.errf(v.pc, "r%d gets empty shape %v", r, s)
	}
	if v.def[r] && v.shapes[r] != s {
		return v.errf(v.pc, "r%d redefined with shape %v, was %v", r, s, v.shapes[r])
	}
	v.def[r], v.shapes[r] = true, s
	return nil
}

func (v *verifier) expr(e Expr, vars map[Var]bool) error {
	for _, t := range e.Terms {
		if int(t.Var) < len(v.k.Grid) {
			continue
		}
		if !vars[t.Var] {
			return v.errf(v.pc, "expression %s uses v%d outside its loop", e, t.Var)
		}
	}
	return nil
}

func (v *verifier) access(a Access, vars map[Var]bool) error {
	if a.Param < 0 || a.Param >= len(v.k.Params) {
		return v.errf(v.pc, "param %d out of range", a.Param)
	}
	if len(a.RowDims) != len(a.RowStrides) || len(a.ColDims) != len(a.ColStrides) || len(a.RowDims) == 0 || len(a.ColDims) == 0 {
		return v.errf(v.pc, "access dims/strides mismatch: %s", a)
	}
	for _, d := range append(append([]int{}, a.RowDims...), a.ColDims...) {
		if d < 1 {
			return v.errf(v.pc, "access dim %d < 1: %s", d, a)
		}
	}
	if a.Rows < 1 || a.Cols < 1 {
		return v.errf(v.pc, "empty access tile %dx%d", a.Rows, a.Cols)
	}
	for _, e := range []Expr{a.Base, a.RowStart, a.ColStart} {
		if err := v.expr(e, vars); err != nil {
			return err
		}
	}
	return nil
}

func broadcast(a, b Shape) (Shape, bool) {
	var out Shape
	for i := range 2 {
		switch {
		case a[i] == b[i], b[i] == 1:
			out[i] = a[i]
		case a[i] == 1:
			out[i] = b[i]
		default:
			return out, false
		}
	}
	return out, true
}

func (v *verifier) body(body []Instr, vars map[Var]bool) error {
	for _, in := range body {
		v.pc++
		switch x := in.(type) {
		case Full:
			if err := v.set(x.Dst, Shape{x.Rows, x.Cols}); err != nil {
				return err
			}
		case Load:
			if err := v.access(x.At, vars); err != nil {
				return err
			}
			if err := v.set(x.Dst, Shape{x.At.Rows, x.At.Cols}); err != nil {
				return err
			}
		case Store:
			if err := v.access(x.At, vars); err != nil {
				return err
			}
			s, err := v.use(x.Src)
			if err != nil {
				return err
			}
			if s != (Shape{x.At.Rows, x.At.Cols}) {
				return v.errf(v.pc, "store of %v tile into %dx%d access", s, x.At.Rows, x.At.Cols)
			}
			if !v.k.Params[x.At.Param].Output {
				return v.errf(v.pc, "store to input param p%d", x.At.Param)
			}
		case Copy:
			if err := v.access(x.From, vars); err != nil {
				return err
			}
			if err := v.access(x.To, vars); err != nil {
				return err
			}
			if x.From.Rows != x.To.Rows || x.From.Cols != x.To.Cols {
				return v.errf(v.pc, "copy of a %dx%d tile into a %dx%d access", x.From.Rows, x.From.Cols, x.To.Rows, x.To.Cols)
			}
			if from, to := v.k.Params[x.From.Param], v.k.Params[x.To.Param]; from.DType != to.DType || !to.Output {
				return v.errf(v.pc, "copy from %s p%d to %s p%d: a bit copy needs one dtype and an output param", from.DType, x.From.Param, to.DType, x.To.Param)
			}
		case Unary, Round:
			dst, src, dt := unpackUnary(x)
			s, err := v.use(src)
			if err != nil {
				return err
			}
			if !dt.Valid() {
				return v.errf(v.pc, "invalid dtype")
			}
			if err := v.set(dst, s); err != nil {
				return err
			}
		case Binary:
			a, err := v.use(x.A)
			if err != nil {
				return err
			}
			b, err := v.use(x.B)
			if err != nil {
				return err
			}
			s, ok := broadcast(a, b)
			if !ok {
				return v.errf(v.pc, "%s of %v and %v does not broadcast", x.Op, a, b)
			}
			if err := v.set(x.Dst, s); err != nil {
				return err
			}
		case Reduce:
			s, err := v.use(x.Src)
			if err != nil {
				return err
			}
			if err := v.set(x.Dst, Shape{s[0], 1}); err != nil {
				return err
			}
		case MMA:
			c, err1 := v.use(x.Acc)
			a, err2 := v.use(x.A)
			b, err3 := v.use(x.B)
			if err := firstErr(err1, err2, err3); err != nil {
				return err
			}
			if a[1] != b[0] || c[0] != a[0] || c[1] != b[1] {
				return v.errf(v.pc, "mma shapes: acc %v += %v x %v", c, a, b)
			}
		case OnlineSoftmax:
			m, err1 := v.use(x.M)
			l, err2 := v.use(x.L)
			s, err3 := v.use(x.X)
			if err := firstErr(err1, err2, err3); err != nil {
				return err
			}
			if m != (Shape{s[0], 1}) || l != m {
				return v.errf(v.pc, "online softmax state %v/%v for scores %v", m, l, s)
			}
			if err := firstErr(v.set(x.P, s), v.set(x.Alpha, m)); err != nil {
				return err
			}
		case MaskScores:
			s, err := v.use(x.Src)
			if err == nil {
				err = firstErr(v.expr(x.RowStart, vars), v.expr(x.ColStart, vars), v.set(x.Dst, s))
			}
			if err != nil {
				return err
			}
		case MaskCols:
			s, err := v.use(x.Src)
			if err == nil {
				err = firstErr(v.expr(x.ColStart, vars), v.set(x.Dst, s))
			}
			if err != nil {
				return err
			}
		case FFT:
			s, err := v.use(x.Src)
			if err != nil {
				return err
			}
			in, out := FFTCols(x.Kind, x.N)
			switch {
			case x.Kind != FFTForward && x.Kind != FFTInverse && x.Kind != FFTR2C && x.Kind != FFTC2R:
				return v.errf(v.pc, "fft kind %q", x.Kind)
			case x.N < 1 || s[1] != in:
				return v.errf(v.pc, "fft %s of length %d on a %v tile (want %d columns)", x.Kind, x.N, s, in)
			case x.DType != numerics.F32 && x.DType != numerics.F64:
				return v.errf(v.pc, "fft arithmetic in %s (want f32 or f64)", x.DType)
			}
			if err := v.set(x.Dst, Shape{s[0], out}); err != nil {
				return err
			}
		case For:
			if int(x.Var) < len(v.k.Grid) || int(x.Var) >= v.k.NumVars || vars[x.Var] {
				return v.errf(v.pc, "bad loop var v%d", x.Var)
			}
			if x.Count < 1 {
				return v.errf(v.pc, "loop count %d", x.Count)
			}
			vars[x.Var] = true
			if err := v.body(x.Body, vars); err != nil {
				return err
			}
			delete(vars, x.Var)
		default:
			return v.errf(v.pc, "unknown instruction %T", in)
		}
	}
	return nil
}

func unpackUnary(in Instr) (Reg, Reg, numerics.DType) {
	if u, ok := in.(Unary); ok {
		return u.Dst, u.Src, u.DType
	}
	r := in.(Round)
	return r.Dst, r.Src, r.DType
}

func firstErr(es ...error) error {
	for _, e := range es {
		if e != nil {
			return e
		}
	}
	return nil
}
