package ptx

import (
	"github.com/tessera-qa/tessera-qa/engine/compiler/tile"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

func (g *gen) elems(r tile.Reg) int { return g.shapes[r][0] * g.shapes[r][1] }

func (g *gen) full(x tile.Full) {
	narrow := !g.lay.wide[x.Dst]
	g.forEach(x.Rows*x.Cols, func(idx string) {
		g.write(x.Dst, idx, g.constVal(x.Value, narrow))
	})
}

func (g *gen) round(x tile.Round) {
	g.forEach(g.elems(x.Dst), func(idx string) {
		g.write(x.Dst, idx, g.roundCast(x.DType, g.read(x.Src, idx), x.Wrap))
	})
}

func (g *gen) unary(x tile.Unary) error {
	if _, ok := unaryF64(goArith{}, string(x.Op), 0); !ok {
		return g.unsupported("unary op %q", x.Op)
	}
	g.forEach(g.elems(x.Dst), func(idx string) {
		g.write(x.Dst, idx, g.unaryVal(x.Op, x.DType, g.read(x.Src, idx)))
	})
	return nil
}

// unaryVal is one element of a Unary: neg/abs/relu of ints exactly in .s64 then wrapped,
// everything else in f64 by the math library, then rounded to dt.
func (g *gen) unaryVal(op tile.UnaryOp, dt numerics.DType, v val) val {
	if dt.IsInt() && (op == tile.Neg || op == tile.Abs || op == tile.Relu) {
		return g.intVal(g.wrapInt(dt, g.intUnary(op, g.toInt(v))))
	}
	x := g.f64of(v)
	var y string
	if calledOps[op] {
		y = g.e.callFunc("tq_"+string(op), "fd", "fd", x, func(m ptxArith, a string) string {
			r, _ := unaryF64(m, string(op), a)
			return r
		})
	} else {
		y, _ = unaryF64(ptxArith{g.e}, string(op), x)
	}
	return g.roundTo(dt, val{y, false})
}

// calledOps are the unary ops whose f64 routine is a .func (emitter.callFunc): the ones built
// on exp, log, tanh or erf. The others are a few instructions and stay inline.
var calledOps = map[tile.UnaryOp]bool{tile.Exp: true, tile.Log: true, tile.Tanh: true, tile.Sigmoid: true,
	tile.Silu: true, tile.GeluErf: true, tile.GeluTanh: true, tile.Erf: true}

func (g *gen) intUnary(op tile.UnaryOp, v string) string {
	e := g.e
	n := e.reg("rd")
	e.op("neg.s64", n, v)
	switch op {
	case tile.Neg:
		return n
	case tile.Abs:
		p := e.reg("p")
		e.op("setp.lt.s64", p, v, "0")
		d := e.reg("rd")
		e.op("selp.b64", d, n, v, p)
		return d
	}
	d := e.reg("rd")
	e.op("max.s64", d, v, "0")
	return d
}

// bcastIndex is the element of an operand of shape s that result element (r, c) reads.
func (g *gen) bcastIndex(s tile.Shape, idx, r, c string, out tile.Shape) string {
	switch {
	case s == out:
		return idx
	case s[0] > 1 && s[1] > 1:
		return g.lin(r, s[1], c)
	case s[0] > 1:
		return r
	case s[1] > 1:
		return c
	}
	z := g.e.reg("r")
	g.e.op("mov.u32", z, "0")
	return z
}

var f32Ops = map[tile.BinaryOp]string{tile.Add: "add.rn.f32", tile.Sub: "sub.rn.f32", tile.Mul: "mul.rn.f32", tile.Div: "div.rn.f32"}

func (g *gen) binary(x tile.Binary) error {
	switch x.Op {
	case tile.Add, tile.Sub, tile.Mul, tile.Div, tile.Max, tile.Min, tile.DivTrunc, tile.DivFloor:
	default:
		return g.unsupported("binary op %q", x.Op)
	}
	out := g.shapes[x.Dst]
	g.forEach(out[0]*out[1], func(idx string) {
		r, c := g.rowCol(idx, out[1])
		a := g.read(x.A, g.bcastIndex(g.shapes[x.A], idx, r, c, out))
		b := g.read(x.B, g.bcastIndex(g.shapes[x.B], idx, r, c, out))
		g.write(x.Dst, idx, g.binaryVal(x.Op, x.DType, a, b))
	})
	return nil
}

// binaryVal is one element of a Binary: ints exactly in .s64 then wrapped; f32 operands of an
// f32 add/sub/mul/div directly in f32 (the CPU's f64-then-round gives the same bits, since
// f64 has more than twice f32's precision); everything else in f64, then rounded to dt.
func (g *gen) binaryVal(op tile.BinaryOp, dt numerics.DType, a, b val) val {
	e := g.e
	if dt.IsInt() {
		x, y := g.toInt(a), g.toInt(b)
		d := e.reg("rd")
		switch op {
		case tile.Add:
			e.op("add.s64", d, x, y)
		case tile.Sub:
			e.op("sub.s64", d, x, y)
		case tile.Mul:
			e.op("mul.lo.s64", d, x, y)
		case tile.Max:
			e.op("max.s64", d, x, y)
		case tile.Min:
			e.op("min.s64", d, x, y)
		case tile.Div, tile.DivTrunc, tile.DivFloor:
			// Truncating division; x/0 is 0 (the CPU's definition).
			z := e.reg("p")
			e.op("setp.eq.s64", z, y, "0")
			safe := e.reg("rd")
			e.op("selp.b64", safe, "1", y, z)
			q := e.reg("rd")
			e.op("div.s64", q, x, safe)
			if op == tile.DivFloor {
				q = g.floorDivInt(x, safe, q)
			}
			e.op("selp.b64", d, "0", q, z)
		}
		return g.intVal(g.wrapInt(dt, d))
	}
	if op == tile.DivTrunc || op == tile.DivFloor {
		return g.roundingDiv(op, dt, a, b)
	}
	if f32op, ok := f32Ops[op]; ok && dt == numerics.F32 && a.narrow && b.narrow {
		d := e.reg("f")
		e.op(f32op, d, a.reg, b.reg)
		return val{d, true}
	}
	m := ptxArith{e}
	x, y := g.f64of(a), g.f64of(b)
	var d string
	switch op {
	case tile.Add:
		d = m.add(x, y)
	case tile.Sub:
		d = m.sub(x, y)
	case tile.Mul:
		d = m.mul(x, y)
	case tile.Div:
		d = m.div(x, y)
	case tile.Max:
		d = fmaxmin(m, x, y, true)
	case tile.Min:
		d = fmaxmin(m, x, y, false)
	}
	return g.roundTo(dt, val{d, false})
}

// maskScores: -Inf where j >= ColLimit or (causal) j > i.
func (g *gen) maskScores(x tile.MaskScores) {
	rs, cs := g.expr(x.RowStart), g.expr(x.ColStart)
	out := g.shapes[x.Dst]
	narrow := !g.lay.wide[x.Dst]
	g.forEach(out[0]*out[1], func(idx string) {
		e := g.e
		r, c := g.rowCol(idx, out[1])
		i, j := e.reg("r"), e.reg("r")
		e.op("add.s32", i, rs, r)
		e.op("add.s32", j, cs, c)
		p := e.reg("p")
		e.op("setp.ge.s32", p, j, itoa(clampInt32(x.ColLimit)))
		if x.Causal {
			q := e.reg("p")
			if x.KeysOnRows { // key index on rows: mask key i > query j
				e.op("setp.gt.s32", q, i, j)
			} else {
				e.op("setp.gt.s32", q, j, i)
			}
			pq := e.reg("p")
			e.op("or.pred", pq, p, q)
			p = pq
		}
		g.write(x.Dst, idx, g.sel(p, g.constVal(negInf, narrow), g.read(x.Src, idx)))
	})
}

// maskCols: Value wherever j >= ColLimit.
func (g *gen) maskCols(x tile.MaskCols) {
	cs := g.expr(x.ColStart)
	out := g.shapes[x.Dst]
	narrow := !g.lay.wide[x.Dst]
	g.forEach(out[0]*out[1], func(idx string) {
		e := g.e
		_, c := g.rowCol(idx, out[1])
		j := e.reg("r")
		e.op("add.s32", j, cs, c)
		p := e.reg("p")
		e.op("setp.ge.s32", p, j, itoa(clampInt32(x.ColLimit)))
		g.write(x.Dst, idx, g.sel(p, g.constVal(x.Value, narrow), g.read(x.Src, idx)))
	})
}

// clampInt32 keeps a limit inside .s32 immediates; indices never reach it anyway.
func clampInt32(n int) int { return min(n, maxIndex) }
