package ptx

import (
	"fmt"
	"github.com/tessera-qa/tessera-qa/engine/failpoint"

	"github.com/tessera-qa/tessera-qa/engine/compiler/tile"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

// Index arithmetic runs in .s32 (division by a dim is much cheaper than in .s64) and element
// offsets in .s64. checkLimits proves every index and expression fits, or refuses the kernel.
const maxIndex = 1<<31 - 1

func (g *gen) checkLimits() error {
	if gridTotal(g.k.Grid) > maxIndex {
		return g.unsupported("grid %v has more than 2^31-1 points", g.k.Grid)
	}
	for i, p := range g.k.Params {
		if p.Len > maxIndex {
			return g.unsupported("param p%d (%%%s) has %d elements, over 2^31-1", i, p.Name, p.Len)
		}
	}
	varMax := make([]int, g.k.NumVars)
	for i, d := range g.k.Grid {
		varMax[i] = d - 1
	}
	var err error
	check := func(e tile.Expr, what string) {
		bound := abs(e.Const)
		for _, t := range e.Terms {
			if int(t.Var) >= len(varMax) {
				continue
			}
			bound += abs(t.Coef) * varMax[t.Var]
		}
		if bound > maxIndex/2 && err == nil {
			err = g.unsupported("%s %s may reach %d, beyond .s32 index arithmetic", what, e, bound)
		}
	}
	dims := func(ds, ss []int, extra int, what string) {
		n := 1
		for i, d := range ds {
			n *= d
			if abs(ss[i]) > maxIndex/2 && err == nil {
				err = g.unsupported("%s stride %d beyond .s32", what, ss[i])
			}
		}
		if n+extra > maxIndex/2 && err == nil {
			err = g.unsupported("%s index space %v beyond .s32", what, ds)
		}
	}
	g.pc = 0
	var visit func([]tile.Instr)
	visit = func(body []tile.Instr) {
		for _, in := range body {
			g.pc++
			var a *tile.Access
			switch x := in.(type) {
			case tile.Load:
				a = &x.At
			case tile.Store:
				a = &x.At
			case tile.Copy:
				for _, c := range []tile.Access{x.From, x.To} {
					check(c.Base, "access base")
					check(c.RowStart, "access row start")
					check(c.ColStart, "access col start")
					dims(c.RowDims, c.RowStrides, c.Rows, "access rows")
					dims(c.ColDims, c.ColStrides, c.Cols, "access cols")
				}
			case tile.MaskScores:
				check(x.RowStart, "mask row start")
				check(x.ColStart, "mask col start")
			case tile.MaskCols:
				check(x.ColStart, "mask col start")
			case tile.For:
				varMax[x.Var] = x.Count - 1
				visit(x.Body)
			}
			if a != nil {
				check(a.Base, "access base")
				check(a.RowStart, "access row start")
				check(a.ColStart, "access col start")
				dims(a.RowDims, a.RowStrides, a.Rows, "access rows")
				dims(a.ColDims, a.ColStrides, a.Cols, "access cols")
			}
		}
	}
	visit(g.k.Body)
	g.pc = 0
	return err
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

func prod(ds []int) int {
	n := 1
	for _, d := range ds {
		n *= d
	}
	return n
}

// unravel is the CPU backend's unravel: row-major over dims, dotted with strides; an index
// past the end keeps counting in the outermost dim. Returns an .s64 offset.
func (g *gen) unravel(i string, dims, strides []int) string {
	e := g.e
	acc := e.reg("rd")
	e.op("mov.u64", acc, "0")
	for k := len(dims) - 1; k > 0; k-- {
		if dims[k] == 1 {
			continue
		}
		rem, q := e.reg("r"), e.reg("r")
		e.op("rem.s32", rem, i, itoa(dims[k]))
		e.op("div.s32", q, i, itoa(dims[k]))
		next := e.reg("rd")
		e.op("mad.wide.s32", next, rem, itoa(strides[k]), acc)
		acc, i = next, q
	}
	d := e.reg("rd")
	e.op("mad.wide.s32", d, i, itoa(strides[0]), acc)
	return d
}

// elementAt works out, for element idx of an access, its buffer offset, whether the mask
// drops it ("" when the access has no mask) and whether it lies inside the allocation.
func (g *gen) elementAt(a tile.Access, base, rs, cs, idx string) (off, masked, inside string) {
	e := g.e
	r, c := g.rowCol(idx, a.Cols)
	i, j := e.reg("r"), e.reg("r")
	e.op("add.s32", i, rs, r)
	e.op("add.s32", j, cs, c)
	if a.Mask {
		p1, p2 := e.reg("p"), e.reg("p")
		e.op("setp.ge.s32", p1, i, itoa(prod(a.RowDims)))
		e.op("setp.ge.s32", p2, j, itoa(prod(a.ColDims)))
		masked = e.reg("p")
		e.op("or.pred", masked, p1, p2)
	}
	ro := g.unravel(i, a.RowDims, a.RowStrides)
	co := g.unravel(j, a.ColDims, a.ColStrides)
	b := e.reg("rd")
	e.op("cvt.s64.s32", b, base)
	s := e.reg("rd")
	e.op("add.s64", s, b, ro)
	off = e.reg("rd")
	e.op("add.s64", off, s, co)
	// One unsigned compare: a negative offset is huge.
	inside = e.reg("p")
	e.op("setp.lt.u64", inside, off, itoa(g.k.Params[a.Param].Len))
	return off, masked, inside
}

// accessPred is the predicate under which the element is really read or written.
func (g *gen) accessPred(masked, inside string) string {
	if masked == "" {
		return inside
	}
	nm := g.e.reg("p")
	g.e.op("not.pred", nm, masked)
	ok := g.e.reg("p")
	g.e.op("and.pred", ok, nm, inside)
	return ok
}

func (g *gen) globalAddr(param int, off string) string {
	a := g.e.reg("rd")
	g.e.op("mad.lo.s64", a, off, itoa(g.k.Params[param].DType.Size()), g.params[param])
	return a
}

func (g *gen) accessExprs(a tile.Access) (base, rs, cs string) {
	return g.expr(a.Base), g.expr(a.RowStart), g.expr(a.ColStart)
}

// load reads a tile: masked-off elements get Fill, elements outside the allocation NaN (as the
// CPU backend reads them), the rest are decoded exactly from the parameter's dtype.
func (g *gen) load(x tile.Load) {
	base, rs, cs := g.accessExprs(x.At)
	g.forEach(x.At.Rows*x.At.Cols, func(idx string) {
		g.write(x.Dst, idx, g.loadElem(x, base, rs, cs, idx))
	})
}

// loadElem is element idx of the tile x loads, as the value its register would hold; an FFT
// that reads its source straight from global memory (fft_work.go) calls it too.
func (g *gen) loadElem(x tile.Load, base, rs, cs, idx string) val {
	a := x.At
	dt := g.k.Params[a.Param].DType
	narrow := !g.lay.wide[x.Dst]
	off, masked, inside := g.elementAt(a, base, rs, cs, idx)
	ok := g.accessPred(masked, inside)
	v := g.decode(dt, g.globalAddr(a.Param, off), ok)
	if narrow {
		v = val{g.f32of(v), true}
	}
	v = g.sel(inside, v, g.constVal(nanF64, narrow))
	if masked != "" {
		v = g.sel(masked, g.constVal(x.Fill, narrow), v)
	}
	return v
}

// decode loads one element under predicate ok (the register holds 0 otherwise) and converts
// it exactly to an f32 (dtypes exact in f32) or an f64.
func (g *gen) decode(dt numerics.DType, addr, ok string) val {
	return g.fromBits(dt, g.loadBits(dt, addr, ok))
}

// loadBits loads one element's bit pattern under predicate ok (0 otherwise) into the register
// fromBits takes for dt: .f64 for f64, .f32 for f32, .b32 for i32, .b16 for the rest (i8
// sign-extended, the other bytes zero-extended).
func (g *gen) loadBits(dt numerics.DType, addr, ok string) string {
	e := g.e
	at := "[" + addr + "]"
	var d, zero, ld string
	switch dt {
	case numerics.F64:
		d, zero, ld = e.reg("fd"), "mov.f64", "ld.global.f64"
	case numerics.F32:
		d, zero, ld = e.reg("f"), "mov.f32", "ld.global.f32"
	case numerics.I32:
		d, zero, ld = e.reg("r"), "mov.u32", "ld.global.s32"
	case numerics.F16, numerics.BF16:
		d, zero, ld = e.reg("h"), "mov.b16", "ld.global.b16"
	case numerics.I8:
		d, zero, ld = e.reg("h"), "mov.b16", "ld.global.s8"
	case numerics.Bool, numerics.F8E4M3, numerics.F8E5M2:
		d, zero, ld = e.reg("h"), "mov.b16", "ld.global.u8"
	default:
		panic(fmt.Sprintf("loadBits: dtype %s", dt))
	}
	switch zero {
	case "mov.f64":
		e.op(zero, d, f64lit(0))
	case "mov.f32":
		e.op(zero, d, f32lit(0))
	default:
		e.op(zero, d, "0")
	}
	e.opIf(ok, ld, d, at)
	return d
}

// fromBits converts an element's bits, in the register loadBits gives, exactly to a value.
func (g *gen) fromBits(dt numerics.DType, b string) val {
	e := g.e
	switch dt {
	case numerics.F64:
		return val{b, false}
	case numerics.F32:
		return val{b, true}
	case numerics.I32:
		d := e.reg("fd")
		e.op("cvt.rn.f64.s32", d, b)
		return val{d, false}
	case numerics.F16, numerics.BF16:
		return g.halfToF32(dt, b)
	case numerics.I8:
		r := e.reg("r")
		e.op("cvt.s32.s16", r, b)
		f := e.reg("f")
		e.op("cvt.rn.f32.s32", f, r)
		return val{f, true}
	case numerics.Bool:
		r := e.reg("r")
		e.op("cvt.u32.u16", r, b)
		p := e.reg("p")
		e.op("setp.ne.u32", p, r, "0")
		f := e.reg("f")
		e.op("selp.f32", f, f32lit(1), f32lit(0), p)
		return val{f, true}
	case numerics.F8E4M3, numerics.F8E5M2:
		w := e.reg("rd")
		e.op("cvt.u64.u16", w, b)
		return val{narrowDecode(e, dt, w), false}
	}
	panic(fmt.Sprintf("fromBits: dtype %s", dt))
}

// store writes a tile, encoding exactly as numerics.Encode: nearest even, fp8 saturating,
// NaN canonical, ints truncated and saturated, bool x != 0. Masked-off elements and elements
// outside the allocation are not written.
func (g *gen) store(x tile.Store) {
	x = storeFaults(x)
	base, rs, cs := g.accessExprs(x.At)
	g.forEach(x.At.Rows*x.At.Cols, func(idx string) {
		g.storeElem(x, base, rs, cs, idx, g.read(x.Src, idx))
	})
}

// storeFaults plants a generator that forgets the boundary mask: the ragged last tile writes
// past the end of each row into the next one.
func storeFaults(x tile.Store) tile.Store {
	x.At.Mask = failpoint.Pick(failpoint.PTXStoreMaskDropped, x.At.Mask, false)
	return x
}

// storeElem writes v as element idx of the tile x stores; an FFT that writes its result
// straight to global memory (fft_work.go) calls it too.
func (g *gen) storeElem(x tile.Store, base, rs, cs, idx string, v val) {
	a := x.At
	dt := g.k.Params[a.Param].DType
	off, masked, inside := g.elementAt(a, base, rs, cs, idx)
	ok := g.accessPred(masked, inside)
	g.encode(dt, v, g.globalAddr(a.Param, off), ok)
	if failpoint.Enabled(failpoint.PTXStoreOnePastEnd) {
		g.storePastEnd(a.Param, dt, v, off, ok)
	}
}

// storePastEnd is the planted fault failpoint.PTXStoreOnePastEnd: the thread that stored the
// parameter's last element stores the same value once more at the index one past the end,
// outside the allocation. No byte inside any buffer changes.
func (g *gen) storePastEnd(param int, dt numerics.DType, v val, off, ok string) {
	e := g.e
	last := e.reg("p")
	e.op("setp.eq.s64", last, off, itoa(g.k.Params[param].Len-1))
	both := e.reg("p")
	e.op("and.pred", both, last, ok)
	past := e.reg("rd")
	e.op("add.s64", past, off, "1")
	g.encode(dt, v, g.globalAddr(param, past), both)
}

// copyBits is tile.Copy: each thread moves its elements' bit patterns with an untyped load
// and store of the dtype's width, so nothing is decoded (fp8 e5m2 ±Inf and NaN payloads stay).
// An element masked in either access is not written; an unmasked source element outside its
// allocation writes the canonical NaN, as Load then Store would.
func (g *gen) copyBits(x tile.Copy) {
	e := g.e
	dt := g.k.Params[x.From.Param].DType
	// Register class, initialisation, load and store per element size; every one moves bits.
	w := map[int]struct{ cls, mov, ld, st, nan string }{
		1: {"h", "mov.b16", "ld.global.u8", "st.global.u8", fmt.Sprintf("0x%02X", numerics.Encode(dt, nanF64))},
		2: {"h", "mov.b16", "ld.global.b16", "st.global.b16", fmt.Sprintf("0x%04X", numerics.Encode(dt, nanF64))},
		4: {"r", "mov.b32", "ld.global.s32", "st.global.b32", fmt.Sprintf("0x%08X", numerics.Encode(dt, nanF64))},
		8: {"fd", "mov.f64", "ld.global.f64", "st.global.f64", f64lit(nanF64)},
	}[dt.Size()]
	fb, frs, fcs := g.accessExprs(x.From)
	tb, trs, tcs := g.accessExprs(x.To)
	g.forEach(x.From.Rows*x.From.Cols, func(idx string) {
		soff, smasked, sin := g.elementAt(x.From, fb, frs, fcs, idx)
		doff, dmasked, din := g.elementAt(x.To, tb, trs, tcs, idx)
		v := e.reg(w.cls)
		e.op(w.mov, v, w.nan)
		e.opIf(g.accessPred(smasked, sin), w.ld, v, "["+g.globalAddr(x.From.Param, soff)+"]")
		ok := g.accessPred(dmasked, din)
		if smasked != "" {
			keep := e.reg("p")
			e.op("not.pred", keep, smasked)
			both := e.reg("p")
			e.op("and.pred", both, keep, ok)
			ok = both
		}
		e.opIf(ok, w.st, "["+g.globalAddr(x.To.Param, doff)+"]", v)
	})
}

func (g *gen) encode(dt numerics.DType, v val, addr, ok string) {
	b := g.encodeBits(dt, v)
	st := map[numerics.DType]string{numerics.F64: "st.global.f64", numerics.F32: "st.global.b32", numerics.I32: "st.global.s32",
		numerics.F16: "st.global.b16", numerics.BF16: "st.global.b16"}[dt]
	if st == "" {
		st = "st.global.u8"
	}
	g.e.opIf(ok, st, "["+addr+"]", b)
}

// encodeBits encodes v as numerics.Encode does and returns the element's bit pattern: an .f64
// for f64, a .b32 for f32 and i32, a .b16 (low byte for the one-byte dtypes) for the rest.
func (g *gen) encodeBits(dt numerics.DType, v val) string {
	e := g.e
	switch dt {
	case numerics.F64:
		return g.f64of(v)
	case numerics.F32:
		f := g.f32of(v)
		p := e.reg("p")
		e.op("setp.nan.f32", p, f, f)
		b := e.reg("r")
		e.op("mov.b32", b, f)
		c := e.reg("r")
		e.op("selp.b32", c, "0x7FC00000", b, p)
		return c
	case numerics.F16, numerics.BF16:
		h := g.halfBits(dt, v)
		p := e.reg("p")
		if v.narrow {
			e.op("setp.nan.f32", p, v.reg, v.reg)
		} else {
			e.op("setp.nan.f64", p, v.reg, v.reg)
		}
		canon := e.reg("h")
		e.op("mov.b16", canon, fmt.Sprintf("0x%04X", narrowOf[dt].nan))
		c := e.reg("h")
		e.op("selp.b16", c, canon, h, p)
		return c
	case numerics.F8E4M3, numerics.F8E5M2:
		h := e.reg("h")
		e.op("cvt.u16.u64", h, narrowEncode(e, dt, g.f64of(v)))
		return h
	case numerics.I8, numerics.I32:
		s := g.truncSat(dt, v)
		r := e.reg("r")
		e.op("cvt.u32.u64", r, s)
		if dt == numerics.I32 {
			return r
		}
		h := e.reg("h")
		e.op("cvt.u16.u32", h, r)
		return h
	case numerics.Bool:
		b := g.boolVal(v)
		p := e.reg("p")
		e.op("setp.neu.f32", p, b.reg, f32lit(0))
		h := e.reg("h")
		e.op("selp.b16", h, "1", "0", p)
		return h
	}
	panic(fmt.Sprintf("encode: dtype %s", dt))
}

// pairAccess reports whether, for every even tile element idx of access a, elements idx and
// idx+1 are neighbours in memory with the same mask and bounds verdicts: a (re, im) column of
// a complex tensor in f32 or f64. The last column dim is 2 with stride 1, the tile's width and
// every other stride, start and base are even, and so is the buffer's length; then the
// element's column j is even, j+1 is in range exactly when j is, unravel gives off and off+1,
// and off+1 is inside exactly when off is. One element's arithmetic and one vector access
// then serve both.
func (g *gen) pairAccess(a tile.Access) bool {
	dt, n := g.k.Params[a.Param].DType, len(a.ColDims)
	if (dt != numerics.F32 && dt != numerics.F64) || n == 0 || a.ColDims[n-1] != 2 || a.ColStrides[n-1] != 1 ||
		a.Cols%2 != 0 || g.k.Params[a.Param].Len%2 != 0 || !evenExpr(a.Base) || !evenExpr(a.ColStart) {
		return false
	}
	for _, s := range append(append([]int(nil), a.RowStrides...), a.ColStrides[:n-1]...) {
		if s%2 != 0 {
			return false
		}
	}
	return true
}

func evenExpr(x tile.Expr) bool {
	for _, t := range x.Terms {
		if t.Coef%2 != 0 {
			return false
		}
	}
	return x.Const%2 == 0
}

// loadPair is loadElem of elements idx and idx+1 (idx even) of a pairAccess.
func (g *gen) loadPair(x tile.Load, base, rs, cs, idx string) (val, val) {
	a, e := x.At, g.e
	dt := g.k.Params[a.Param].DType
	narrow := !g.lay.wide[x.Dst]
	off, masked, inside := g.elementAt(a, base, rs, cs, idx)
	ok := g.accessPred(masked, inside)
	cls, t, zero := "f", "f32", f32lit(0)
	if dt == numerics.F64 {
		cls, t, zero = "fd", "f64", f64lit(0)
	}
	b := [2]string{e.reg(cls), e.reg(cls)}
	e.op("mov."+t, b[0], zero)
	e.op("mov."+t, b[1], zero)
	e.opIf(ok, "ld.global.v2."+t, "{"+b[0]+","+b[1]+"}", "["+g.globalAddr(a.Param, off)+"]")
	var out [2]val
	for i := range out {
		v := g.fromBits(dt, b[i])
		if narrow {
			v = val{g.f32of(v), true}
		}
		v = g.sel(inside, v, g.constVal(nanF64, narrow))
		if masked != "" {
			v = g.sel(masked, g.constVal(x.Fill, narrow), v)
		}
		out[i] = v
	}
	return out[0], out[1]
}

// storePair is storeElem of elements idx and idx+1 (idx even) of a pairAccess.
func (g *gen) storePair(x tile.Store, base, rs, cs, idx string, v0, v1 val) {
	if failpoint.Enabled(failpoint.PTXStoreOnePastEnd) {
		g.storeElem(x, base, rs, cs, idx, v0)
		g.storeElem(x, base, rs, cs, g.add32(idx, "1"), v1)
		return
	}
	a := x.At
	dt := g.k.Params[a.Param].DType
	off, masked, inside := g.elementAt(a, base, rs, cs, idx)
	ok := g.accessPred(masked, inside)
	b0, b1 := g.encodeBits(dt, v0), g.encodeBits(dt, v1)
	st := "st.global.v2.b32"
	if dt == numerics.F64 {
		st = "st.global.v2.f64"
	}
	g.e.opIf(ok, st, "["+g.globalAddr(a.Param, off)+"]", "{"+b0+","+b1+"}")
}
