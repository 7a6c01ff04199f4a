package ptx

import (
	"github.com/tessera-qa/tessera-qa/engine/compiler/tile"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

// The rounding divisions (tile.DivTrunc, tile.DivFloor) in the arith instruction set, so the
// Go twin the tests run is the algorithm the GPU runs. PTX has no fmod, so floor division is
// the CPU backend's fmod-free form (engine/backend/cpu/divround.go): the floor of the rounded
// quotient, corrected by the sign of the residual a - f*b, exact through an FMA. Only opcodes
// already in knownOps are used (rint, not cvt.rmi/cvt.rzi, which ptxas has not validated here).

// floorOf is floor(x) from round-to-nearest: rint(x), one less where that is above x. ±0,
// ±Inf and NaN come back as they are.
func floorOf[F, I, P any](m arith[F, I, P], x F) F {
	r := m.rint(x)
	return m.fsel(m.fgt(r, x), m.sub(r, m.f(1)), r)
}

// truncOf is trunc(x): floor(x) for x >= 0 (and -0), -floor(-x) below, so trunc(-0.5) is -0.
func truncOf[F, I, P any](m arith[F, I, P], x F) F {
	return m.fsel(m.fge(x, m.f(0)), floorOf(m, x), m.neg(floorOf(m, m.neg(x))))
}

// floorDivOf is the exact floor of a/b given q, a/b rounded to the compute precision: b = 0
// or a NaN quotient give q, an infinite a gives NaN (Inf - Inf, the hardware's NaN).
func floorDivOf[F, I, P any](m arith[F, I, P], a, b, q F) F {
	zero := m.f(0)
	f := floorOf(m, q)
	r := m.fsel(m.feq(f, zero), a, m.fma(m.neg(f), b, a))
	fix := m.por(m.pand(m.flt(r, zero), m.fgt(b, zero)), m.pand(m.fgt(r, zero), m.flt(b, zero)))
	f = m.fsel(fix, m.sub(f, m.f(1)), f)
	f = m.fsel(m.fnan(m.sub(a, a)), m.sub(a, a), f)
	return m.fsel(m.por(m.feq(b, zero), m.fnan(q)), q, f)
}

// roundingDiv is one float element of a DivTrunc or DivFloor: the quotient in f64 for f64,
// else the f32 quotient (div.rn.f64 rounded to f32 is div.rn.f32's result), for DivTrunc
// rounded to dt before truncating (the CPU backend's truncDiv), the result rounded to dt.
func (g *gen) roundingDiv(op tile.BinaryOp, dt numerics.DType, a, b val) val {
	m := ptxArith{g.e}
	x, y := g.f64of(a), g.f64of(b)
	q := m.div(x, y)
	if dt != numerics.F64 {
		q = g.f64of(val{g.f32of(val{q, false}), true})
	}
	if op == tile.DivTrunc {
		if dt == numerics.F16 || dt == numerics.BF16 {
			q = g.f64of(g.roundTo(dt, val{q, false})) // the quotient in the dtype, as torch
		}
		return g.roundTo(dt, val{truncOf(m, q), false})
	}
	return g.roundTo(dt, val{floorDivOf(m, x, y, q), false})
}

// floorDivInt is x floor-div y in .s64 for y != 0 (the caller selects 0 for y = 0): the
// truncated quotient, one less where the remainder's sign differs from y's.
func (g *gen) floorDivInt(x, safe, q string) string {
	e := g.e
	prod := e.reg("rd")
	e.op("mul.lo.s64", prod, q, safe)
	r := e.reg("rd")
	e.op("sub.s64", r, x, prod)
	nz := e.reg("p")
	e.op("setp.ne.s64", nz, r, "0")
	rneg, yneg := e.reg("p"), e.reg("p")
	e.op("setp.lt.s64", rneg, r, "0")
	e.op("setp.lt.s64", yneg, safe, "0")
	ny, nr := e.reg("p"), e.reg("p")
	e.op("not.pred", ny, yneg)
	e.op("not.pred", nr, rneg)
	d1, d2 := e.reg("p"), e.reg("p")
	e.op("and.pred", d1, rneg, ny)
	e.op("and.pred", d2, yneg, nr)
	differ := e.reg("p")
	e.op("or.pred", differ, d1, d2)
	fix := e.reg("p")
	e.op("and.pred", fix, nz, differ)
	one := e.reg("rd")
	e.op("sub.s64", one, q, "1")
	out := e.reg("rd")
	e.op("selp.b64", out, one, q, fix)
	return out
}
