package ptx

import (
	"fmt"
	"strings"

	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

// The stream lowering's memory side: 16-byte runs (addresses, vector loads and stores),
// single elements, and the packing of elements into a run's registers and back. Elements are
// held as rawLoad holds them: .b16 for 1- and 2-byte dtypes, .b32 for 4, .f64 for 8.

// runAddr is the address of the first element of chunk c of a vec access.
func (s *streamGen) runAddr(a streamAccess, c string, w int) string {
	e := s.e
	size := s.k.Params[a.a.Param].DType.Size()
	if a.run {
		i := e.reg("r")
		e.op("mul.lo.s32", i, c, itoa(w))
		off := s.unravel(i, a.a.ColDims, a.a.ColStrides)
		if a.a.Base.Const != 0 {
			o := e.reg("rd")
			e.op("add.s64", o, off, itoa(a.a.Base.Const))
			off = o
		}
		return s.globalAddr(a.a.Param, off)
	}
	off := e.reg("rd")
	e.op("mul.wide.s32", off, c, itoa(w*size))
	base := e.reg("rd")
	e.op("add.s64", base, s.params[a.a.Param], off)
	if a.a.Base.Const == 0 {
		return base
	}
	at := e.reg("rd")
	e.op("add.s64", at, base, itoa(a.a.Base.Const*size))
	return at
}

// vecLoad loads a chunk's run: .v2.f64 for 8-byte elements, else .v4.b32 words (a run of 8
// or 4 bytes: .v2.b32 or .b32).
func (s *streamGen) vecLoad(a streamAccess, c string, w int, ok string) []string {
	e := s.e
	at := s.runAddr(a, c, w)
	size := s.k.Params[a.a.Param].DType.Size()
	switch w * size {
	case 8:
		d := []string{e.reg("r"), e.reg("r")}
		e.opIf(ok, "ld.global.v2.b32", "{"+strings.Join(d, ",")+"}", "["+at+"]")
		return d
	case 4:
		d := e.reg("r")
		e.opIf(ok, "ld.global.b32", d, "["+at+"]")
		return []string{d}
	}
	var regs []string
	for k := range w * size / 16 {
		ref := at
		if k > 0 {
			ref = fmt.Sprintf("%s+%d", at, 16*k)
		}
		if size == 8 {
			d := []string{e.reg("fd"), e.reg("fd")}
			e.opIf(ok, "ld.global.v2.f64", "{"+strings.Join(d, ",")+"}", "["+ref+"]")
			regs = append(regs, d...)
			continue
		}
		d := []string{e.reg("r"), e.reg("r"), e.reg("r"), e.reg("r")}
		e.opIf(ok, "ld.global.v4.b32", "{"+strings.Join(d, ",")+"}", "["+ref+"]")
		regs = append(regs, d...)
	}
	return regs
}

// vecStore stores a chunk's run from its words.
func (s *streamGen) vecStore(a streamAccess, c string, w int, regs []string) {
	e := s.e
	at := s.runAddr(a, c, w)
	size := s.k.Params[a.a.Param].DType.Size()
	per := 4
	st := "st.global.v4.b32"
	if size == 8 {
		per, st = 2, "st.global.v2.f64"
	}
	for k := range len(regs) / per {
		ref := at
		if k > 0 {
			ref = fmt.Sprintf("%s+%d", at, 16*k)
		}
		e.op(st, "["+ref+"]", "{"+strings.Join(regs[per*k:per*k+per], ",")+"}")
	}
}

// elemAddr is the address of element j of chunk c (index c*w+j) of an access.
func (s *streamGen) elemAddr(a streamAccess, c string, w, j int) string {
	e := s.e
	i := e.reg("r")
	e.op("mad.lo.s32", i, c, itoa(w), itoa(j))
	var off string
	if len(a.a.ColDims) == 1 {
		off = e.reg("rd")
		e.op("mul.wide.s32", off, i, itoa(a.a.ColStrides[0]))
	} else {
		off = s.unravel(i, a.a.ColDims, a.a.ColStrides)
	}
	if a.a.Base.Const != 0 {
		o := e.reg("rd")
		e.op("add.s64", o, off, itoa(a.a.Base.Const))
		off = o
	}
	return s.globalAddr(a.a.Param, off)
}

// rawLoad loads an element's bits: .b16 for 1- and 2-byte elements, .b32 for 4, .f64 for 8.
func (s *streamGen) rawLoad(size int, addr, ok string) string {
	e := s.e
	f := map[int][2]string{1: {"h", "ld.global.u8"}, 2: {"h", "ld.global.b16"}, 4: {"r", "ld.global.b32"}, 8: {"fd", "ld.global.f64"}}[size]
	d := e.reg(f[0])
	e.opIf(ok, f[1], d, "["+addr+"]")
	return d
}

// rawStore stores an element's bits held as rawLoad holds them.
func (s *streamGen) rawStore(size int, addr, bits string) {
	st := map[int]string{1: "st.global.u8", 2: "st.global.b16", 4: "st.global.b32", 8: "st.global.f64"}[size]
	s.e.op(st, "["+addr+"]", bits)
}

// unpack is element j of a run's registers in rawLoad's form; signed sign-extends a byte.
func (s *streamGen) unpack(size int, regs []string, j int, signed bool) string {
	e := s.e
	switch size {
	case 8, 4:
		return regs[j]
	case 2:
		w := regs[j/2]
		if j%2 == 1 {
			t := e.reg("r")
			e.op("shr.u32", t, w, "16")
			w = t
		}
		h := e.reg("h")
		e.op("cvt.u16.u32", h, w)
		return h
	}
	t := e.reg("r")
	op := "bfe.u32"
	if signed {
		op = "bfe.s32"
	}
	e.op(op, t, regs[j/4], itoa(8*(j%4)), "8")
	h := e.reg("h")
	e.op("cvt.u16.u32", h, t)
	return h
}

// pack turns elements in rawLoad's form into a run's registers (.b32 words, or .f64).
func (s *streamGen) pack(size int, elems []string) []string {
	e := s.e
	if size >= 4 {
		return elems
	}
	per := 4 / size
	var words []string
	for k := 0; k < len(elems); k += per {
		var w string
		for j := range per {
			t := e.reg("r")
			e.op("cvt.u32.u16", t, elems[k+j])
			if size == 1 {
				m := e.reg("r")
				e.op("and.b32", m, t, "255")
				t = m
			}
			if j > 0 {
				sh := e.reg("r")
				e.op("shl.b32", sh, t, itoa(8*size*j))
				o := e.reg("r")
				e.op("or.b32", o, w, sh)
				t = o
			}
			w = t
		}
		words = append(words, w)
	}
	return words
}

// bf16Of decodes element j of a run of bf16 words straight to f32: a bf16 is the high half
// of the f32 with the same value, so the low element shifts up and the high one is masked.
func (s *streamGen) bf16Of(regs []string, j int) val {
	e := s.e
	t := e.reg("r")
	if j%2 == 0 {
		e.op("shl.b32", t, regs[j/2], "16")
	} else {
		e.op("and.b32", t, regs[j/2], "0xFFFF0000")
	}
	f := e.reg("f")
	e.op("mov.b32", f, t)
	return val{f, true}
}

// bitsOf is element j of a loaded run in the register fromBits takes for dt.
func (s *streamGen) bitsOf(dt numerics.DType, regs []string, j int) string {
	b := s.unpack(dt.Size(), regs, j, dt == numerics.I8)
	if dt == numerics.F32 {
		f := s.e.reg("f")
		s.e.op("mov.b32", f, b)
		return f
	}
	return b
}

// encodeRun encodes a chunk's values as numerics.Encode does and packs them into a run's
// registers. Pairs of f32-exact values go to f16/bf16 with one cvt.rn.*x2.f32 (then NaN made
// canonical, as encodeBits does).
func (s *streamGen) encodeRun(dt numerics.DType, w int, v func(j int) val) []string {
	if dt == numerics.F16 || dt == numerics.BF16 {
		k := &kgen{e: s.e, dt: dt}
		var words []string
		for j := 0; j < w; j += 2 {
			lo, hi := v(j), v(j+1)
			if !lo.narrow || !hi.narrow {
				words = append(words, s.pack(2, []string{s.encodeBits(dt, lo), s.encodeBits(dt, hi)})...)
				continue
			}
			words = append(words, k.pack(lo.reg, hi.reg))
		}
		return words
	}
	elems := make([]string, w)
	for j := range w {
		elems[j] = s.encodeBits(dt, v(j))
	}
	if dt == numerics.F32 || dt == numerics.I32 || dt == numerics.F64 {
		return elems
	}
	return s.pack(dt.Size(), elems)
}
