package ptx

import (
	"math"

	"github.com/tessera-qa/tessera-qa/engine/compiler/tile"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

// val is an element value in a PTX register: an .f32 when narrow, else an .f64. Either way it
// stands for the float64 value the CPU backend's register file would hold.
type val struct {
	reg    string
	narrow bool
}

// smemAddr is the shared-memory address of element idx of tile register r.
func (g *gen) smemAddr(r tile.Reg, idx string) string {
	a := g.e.reg("r")
	g.e.op("mad.lo.s32", a, idx, itoa(g.lay.size(r)), g.regBase(r))
	return a
}

// regBase is the shared-memory address of register r's first element, computed once.
func (g *gen) regBase(r tile.Reg) string {
	if b, ok := g.bases[r]; ok {
		return b
	}
	b := g.e.reg("r")
	g.pro.op("add.s32", b, g.smem, itoa(g.lay.offset[r]))
	g.bases[r] = b
	return b
}

func (g *gen) read(r tile.Reg, idx string) val {
	a := g.smemAddr(r, idx)
	if dt := g.lay.half[r]; dt != numerics.Invalid {
		h := g.e.reg("h")
		g.e.op("ld.shared.b16", h, "["+a+"]")
		return g.halfToF32(dt, h)
	}
	if g.lay.wide[r] {
		d := g.e.reg("fd")
		g.e.op("ld.shared.f64", d, "["+a+"]")
		return val{d, false}
	}
	d := g.e.reg("f")
	g.e.op("ld.shared.f32", d, "["+a+"]")
	return val{d, true}
}

// write stores v into register r. A narrow register only ever receives f32-exact values, a
// half register values exact in its dtype (the layout guarantees both), so the conversions
// there are exact.
func (g *gen) write(r tile.Reg, idx string, v val) {
	a := g.smemAddr(r, idx)
	if dt := g.lay.half[r]; dt != numerics.Invalid {
		g.e.op("st.shared.b16", "["+a+"]", g.halfBits(dt, val{g.f32of(v), true}))
		return
	}
	if g.lay.wide[r] {
		g.e.op("st.shared.f64", "["+a+"]", g.f64of(v))
		return
	}
	g.e.op("st.shared.f32", "["+a+"]", g.f32of(v))
}

func (g *gen) f64of(v val) string {
	if !v.narrow {
		return v.reg
	}
	d := g.e.reg("fd")
	g.e.op("cvt.f64.f32", d, v.reg)
	return d
}

// f32of rounds v to f32 (nearest even); exact when v already is an f32 value.
func (g *gen) f32of(v val) string {
	if v.narrow {
		return v.reg
	}
	d := g.e.reg("f")
	g.e.op("cvt.rn.f32.f64", d, v.reg)
	return d
}

// constVal materialises c in the form a register of the given narrowness holds.
func (g *gen) constVal(c float64, narrow bool) val {
	if narrow {
		d := g.e.reg("f")
		g.e.op("mov.f32", d, f32lit(float32(c)))
		return val{d, true}
	}
	d := g.e.reg("fd")
	g.e.op("mov.f64", d, f64lit(c))
	return val{d, false}
}

// sel is p ? a : b in the common form of both (f64 unless both are narrow).
func (g *gen) sel(p string, a, b val) val {
	if a.narrow && b.narrow {
		d := g.e.reg("f")
		g.e.op("selp.f32", d, a.reg, b.reg, p)
		return val{d, true}
	}
	d := g.e.reg("fd")
	g.e.op("selp.f64", d, g.f64of(a), g.f64of(b), p)
	return val{d, false}
}

// toInt is the CPU backend's toInt: truncate toward zero, NaN to 0, clamp to +-2^62.
func (g *gen) toInt(v val) string {
	x := g.f64of(v)
	i := g.e.reg("rd")
	g.e.op("cvt.rzi.s64.f64", i, x)
	// NaN is selected explicitly rather than trusting cvt.rzi with it: on the H100 a cast of
	// NaN to int8 came out non-zero before this select was added.
	nan := g.e.reg("p")
	g.e.op("setp.nan.f64", nan, x, x)
	z := g.e.reg("rd")
	g.e.op("selp.b64", z, "0", i, nan)
	c := g.e.reg("rd")
	g.e.op("min.s64", c, z, itoa64(1<<62))
	d := g.e.reg("rd")
	g.e.op("max.s64", d, c, itoa64(-(1 << 62)))
	return d
}

// wrapInt is numerics.WrapInt: two's-complement wrap to dt's width (bool: non-zero to 1).
func (g *gen) wrapInt(dt numerics.DType, i string) string {
	switch dt {
	case numerics.I8, numerics.I32:
		bits := "56"
		if dt == numerics.I32 {
			bits = "32"
		}
		t := g.e.reg("rd")
		g.e.op("shl.b64", t, i, bits)
		d := g.e.reg("rd")
		g.e.op("shr.s64", d, t, bits)
		return d
	case numerics.Bool:
		p := g.e.reg("p")
		g.e.op("setp.ne.s64", p, i, "0")
		d := g.e.reg("rd")
		g.e.op("selp.b64", d, "1", "0", p)
		return d
	}
	return i
}

func (g *gen) intVal(i string) val {
	d := g.e.reg("fd")
	g.e.op("cvt.rn.f64.s64", d, i)
	return val{d, false}
}

// roundTo is the CPU backend's roundTo: the rounding every arithmetic result gets (f32 by
// conversion, 16- and 8-bit floats by one nearest-even rounding from the exact value, ints by
// wrapping, bool by x != 0).
func (g *gen) roundTo(dt numerics.DType, v val) val {
	switch dt {
	case numerics.F64:
		return v
	case numerics.F32:
		return val{g.f32of(v), true}
	case numerics.F16, numerics.BF16:
		return g.roundHalf(dt, v)
	case numerics.F8E4M3, numerics.F8E5M2:
		return val{narrowDecode(g.e, dt, narrowEncode(g.e, dt, g.f64of(v))), false}
	case numerics.I8, numerics.I32:
		return g.intVal(g.wrapInt(dt, g.toInt(v)))
	case numerics.Bool:
		return g.boolVal(v)
	}
	panic("roundTo: invalid dtype " + dt.String())
}

func (g *gen) boolVal(v val) val {
	p := g.e.reg("p")
	if v.narrow {
		g.e.op("setp.neu.f32", p, v.reg, f32lit(0))
	} else {
		g.e.op("setp.neu.f64", p, v.reg, f64lit(0))
	}
	d := g.e.reg("f")
	g.e.op("selp.f32", d, f32lit(1), f32lit(0), p)
	return val{d, true}
}

// halfBits rounds v to f16 or bf16 and returns the 16-bit pattern (NaN not canonicalised).
// From an f32 the hardware conversion is the single correct rounding; from an f64 the
// integer encoder is (PTX has no f64 -> bf16 conversion before sm_90, and going through f32
// would round twice).
func (g *gen) halfBits(dt numerics.DType, v val) string {
	h := g.e.reg("h")
	if v.narrow {
		op := "cvt.rn.f16.f32"
		if dt == numerics.BF16 {
			op = "cvt.rn.bf16.f32"
		}
		g.e.op(op, h, v.reg)
		return h
	}
	g.e.op("cvt.u16.u64", h, narrowEncode(g.e, dt, v.reg))
	return h
}

// halfToF32 decodes a 16-bit pattern exactly.
func (g *gen) halfToF32(dt numerics.DType, h string) val {
	f := g.e.reg("f")
	if dt == numerics.F16 {
		g.e.op("cvt.f32.f16", f, h)
		return val{f, true}
	}
	r := g.e.reg("r")
	g.e.op("cvt.u32.u16", r, h)
	s := g.e.reg("r")
	g.e.op("shl.b32", s, r, "16")
	g.e.op("mov.b32", f, s)
	return val{f, true}
}

func (g *gen) roundHalf(dt numerics.DType, v val) val { return g.halfToF32(dt, g.halfBits(dt, v)) }

// roundCast is numerics.Round, the cast semantics of tile.Round: like roundTo except that
// ints truncate and saturate (unless wrap) instead of wrapping.
func (g *gen) roundCast(dt numerics.DType, v val, wrap bool) val {
	if !dt.IsInt() || wrap {
		return g.roundTo(dt, v)
	}
	return g.intVal(g.truncSat(dt, v))
}

// truncSat converts toward zero, saturating to dt's range (cvt.rzi.s32.f64 saturates to
// int32; int8 clamps further), NaN to 0. The result is a sign-extended .s64.
func (g *gen) truncSat(dt numerics.DType, v val) string {
	x := g.f64of(v)
	c := g.e.reg("r")
	g.e.op("cvt.rzi.s32.f64", c, x)
	nan := g.e.reg("p")
	g.e.op("setp.nan.f64", nan, x, x)
	r := g.e.reg("r")
	g.e.op("selp.b32", r, "0", c, nan)
	if dt == numerics.I8 {
		a := g.e.reg("r")
		g.e.op("min.s32", a, r, "127")
		b := g.e.reg("r")
		g.e.op("max.s32", b, a, "-128")
		r = b
	}
	d := g.e.reg("rd")
	g.e.op("cvt.s64.s32", d, r)
	return d
}

// negInf is the constant the masks select.
var negInf = math.Inf(-1)
