package ptx

import (
	"github.com/tessera-qa/tessera-qa/engine/compiler/tile"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

// carried makes a register that a sequential loop updates in place: PTX registers are not
// SSA, so each iteration's new value is moved back into it.
func (g *gen) carried(cls, init string) string {
	d := g.e.reg(cls)
	g.assign(cls, d, init)
	return d
}

func (g *gen) assign(cls, dst, src string) {
	op := map[string]string{"f": "mov.f32", "fd": "mov.f64", "rd": "mov.b64"}[cls]
	g.e.op(op, dst, src)
}

func (g *gen) add32(a, b string) string {
	d := g.e.reg("r")
	g.e.op("add.s32", d, a, b)
	return d
}

func (g *gen) mul32(a string, k int) string {
	d := g.e.reg("r")
	g.e.op("mul.lo.s32", d, a, itoa(k))
	return d
}

// reduce folds each row left to right, one thread per row, with the CPU backend's rounding
// at every step, so the result has its bits.
func (g *gen) reduce(x tile.Reduce) error {
	if x.Op != tile.Sum && x.Op != tile.MaxRed {
		return g.unsupported("reduce op %q", x.Op)
	}
	rows, cols := g.shapes[x.Src][0], g.shapes[x.Src][1]
	dt := x.DType
	g.forEach(rows, func(r string) {
		row := g.mul32(r, cols)
		elem := func(c string) val { return g.read(x.Src, g.add32(row, c)) }
		first := g.read(x.Src, row)
		m := ptxArith{g.e}
		var out val
		switch {
		case x.Op == tile.MaxRed:
			acc := g.carried("fd", g.f64of(first))
			g.count(1, cols, func(c string) { g.assign("fd", acc, fmaxmin(m, acc, g.f64of(elem(c)), true)) })
			out = g.roundTo(dt, val{acc, false})
		case dt.IsInt():
			acc := g.carried("rd", g.wrapInt(dt, g.toInt(first)))
			g.count(1, cols, func(c string) {
				s := g.e.reg("rd")
				g.e.op("add.s64", s, acc, g.toInt(elem(c)))
				g.assign("rd", acc, g.wrapInt(dt, s))
			})
			out = g.intVal(acc)
		case dt == numerics.F32 && first.narrow:
			acc := g.carried("f", first.reg)
			g.count(1, cols, func(c string) {
				s := g.e.reg("f")
				g.e.op("add.rn.f32", s, acc, elem(c).reg)
				g.assign("f", acc, s)
			})
			out = val{acc, true}
		case dt == numerics.F64:
			acc := g.carried("fd", g.f64of(first))
			g.count(1, cols, func(c string) { g.assign("fd", acc, m.add(acc, g.f64of(elem(c)))) })
			out = val{acc, false}
		default:
			acc := g.carried("fd", g.f64of(g.roundTo(dt, first)))
			g.count(1, cols, func(c string) {
				g.assign("fd", acc, g.f64of(g.roundTo(dt, val{m.add(acc, g.f64of(elem(c))), false})))
			})
			out = val{acc, false}
		}
		g.write(x.Dst, r, out)
	})
	return nil
}

// mma computes Acc += A x B with one thread per output element adding the K products in
// increasing k: f32 as mul.rn + add.rn (never fused), f64 likewise, other accumulators
// rounding product and sum to the dtype, ints exactly and wrapped.
func (g *gen) mma(x tile.MMA) error {
	if x.Acc == x.A || x.Acc == x.B {
		return g.unsupported("mma accumulator r%d aliases an operand", x.Acc)
	}
	if h := g.lay.half[x.A]; h != numerics.Invalid && h == g.lay.half[x.B] && tensorShape(x, g.shapes) && !g.lay.wide[x.Acc] {
		g.mmaTensor(x)
		return nil
	}
	mm, kk, nn := g.shapes[x.A][0], g.shapes[x.A][1], g.shapes[x.B][1]
	dt := x.AccDType
	all32 := !g.lay.wide[x.Acc] && !g.lay.wide[x.A] && !g.lay.wide[x.B]
	g.forEach(mm*nn, func(idx string) {
		i, j := g.rowCol(idx, nn)
		aRow := g.mul32(i, kk)
		c := g.read(x.Acc, idx)
		operands := func(k string) (val, val) {
			bIdx := g.e.reg("r")
			g.e.op("mad.lo.s32", bIdx, k, itoa(nn), j)
			return g.read(x.A, g.add32(aRow, k)), g.read(x.B, bIdx)
		}
		m := ptxArith{g.e}
		var out val
		switch {
		case dt == numerics.F32 && all32:
			acc := g.carried("f", c.reg)
			g.count(0, kk, func(k string) {
				a, b := operands(k)
				p, s := g.e.reg("f"), g.e.reg("f")
				g.e.op("mul.rn.f32", p, a.reg, b.reg)
				g.e.op("add.rn.f32", s, acc, p)
				g.assign("f", acc, s)
			})
			out = val{acc, true}
		case dt == numerics.F64:
			acc := g.carried("fd", g.f64of(c))
			g.count(0, kk, func(k string) {
				a, b := operands(k)
				g.assign("fd", acc, m.add(acc, m.mul(g.f64of(a), g.f64of(b))))
			})
			out = val{acc, false}
		case dt.IsInt():
			acc := g.carried("rd", g.toInt(c))
			g.count(0, kk, func(k string) {
				a, b := operands(k)
				p, s := g.e.reg("rd"), g.e.reg("rd")
				g.e.op("mul.lo.s64", p, g.toInt(a), g.toInt(b))
				g.e.op("add.s64", s, acc, g.wrapInt(dt, p))
				g.assign("rd", acc, g.wrapInt(dt, s))
			})
			out = g.intVal(acc)
		default:
			acc := g.carried("fd", g.f64of(c))
			g.count(0, kk, func(k string) {
				a, b := operands(k)
				p := g.f64of(g.roundTo(dt, val{m.mul(g.f64of(a), g.f64of(b)), false}))
				g.assign("fd", acc, g.f64of(g.roundTo(dt, val{m.add(acc, p), false})))
			})
			out = val{acc, false}
		}
		g.write(x.Acc, idx, out)
	})
	return nil
}

// onlineSoftmax advances the running (M, L) state by one tile of scores in three phases
// separated by barriers: per row the max, the new M and Alpha; per element P; per row the sum
// of P (left to right) and the new L. Every named quantity is rounded to the dtype exactly
// where the CPU backend rounds it.
func (g *gen) onlineSoftmax(x tile.OnlineSoftmax) error {
	state := []tile.Reg{x.M, x.L, x.Alpha}
	for i, a := range state {
		for _, b := range state[i+1:] {
			if a == b {
				return g.unsupported("online softmax state registers alias (r%d)", a)
			}
		}
		if a == x.X || a == x.P {
			return g.unsupported("online softmax scores or P alias state register r%d", a)
		}
	}
	rows, cols := g.shapes[x.X][0], g.shapes[x.X][1]
	dt := x.DType
	m := ptxArith{g.e}
	isNegInf := func(v string) string { return m.feq(v, m.f(negInf)) }
	g.forEach(rows, func(r string) {
		row := g.mul32(r, cols)
		rowMax := g.carried("fd", g.f64of(g.read(x.X, row)))
		g.count(1, cols, func(c string) {
			g.assign("fd", rowMax, fmaxmin(m, rowMax, g.f64of(g.read(x.X, g.add32(row, c))), true))
		})
		mOld := g.f64of(g.read(x.M, r))
		mNew := g.f64of(g.roundTo(dt, val{fmaxmin(m, mOld, rowMax, true), false}))
		d := g.f64of(g.roundTo(dt, val{m.sub(mOld, mNew), false}))
		ex := g.f64of(g.roundTo(dt, val{expF(m, d), false}))
		alpha := m.fsel(isNegInf(mNew), m.f(1), m.fsel(isNegInf(mOld), m.f(0), ex))
		g.write(x.Alpha, r, val{alpha, false})
		g.write(x.M, r, val{mNew, false})
	})
	g.e.op("bar.sync", "0")
	g.forEach(rows*cols, func(idx string) {
		r, _ := g.rowCol(idx, cols)
		mNew := g.f64of(g.read(x.M, r))
		d := g.f64of(g.roundTo(dt, val{m.sub(g.f64of(g.read(x.X, idx)), mNew), false}))
		p := g.f64of(g.roundTo(dt, val{expF(m, d), false}))
		g.write(x.P, idx, val{m.fsel(isNegInf(mNew), m.f(0), p), false})
	})
	g.e.op("bar.sync", "0")
	g.forEach(rows, func(r string) {
		row := g.mul32(r, cols)
		s := g.carried("fd", g.f64of(g.read(x.P, row)))
		g.count(1, cols, func(c string) {
			sum := m.add(s, g.f64of(g.read(x.P, g.add32(row, c))))
			g.assign("fd", s, g.f64of(g.roundTo(dt, val{sum, false})))
		})
		la := g.f64of(g.roundTo(dt, val{m.mul(g.f64of(g.read(x.L, r)), g.f64of(g.read(x.Alpha, r))), false}))
		g.write(x.L, r, g.roundTo(dt, val{m.add(la, s), false}))
	})
	return nil
}
