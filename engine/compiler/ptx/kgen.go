package ptx

import (
	"fmt"

	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

// kgen is what the dedicated tensor-core kernels (gemm_*.go, attn_*.go) share: fresh
// registers, integer helpers, the 128-byte swizzle, zero-filling 16-byte copies, wgmma matrix
// descriptors and the 16-bit packing of f32 results.
type kgen struct {
	e  *emitter
	dt numerics.DType // f16 or bf16: the 16-bit operand type
}

func (k *kgen) r(cls string) string { return k.e.reg(cls) }

func (k *kgen) op(opcode string, args ...string) { k.e.op(opcode, args...) }

func (k *kgen) imm(v int) string { return itoa(v) }

// mov32 returns a fresh .b32 register holding v.
func (k *kgen) mov32(v string) string {
	r := k.r("r")
	k.op("mov.u32", r, v)
	return r
}

func (k *kgen) bin32(opcode, a, b string) string {
	r := k.r("r")
	k.op(opcode, r, a, b)
	return r
}

// mad32 returns a*b + c in a fresh .b32 register.
func (k *kgen) mad32(a, b, c string) string {
	r := k.r("r")
	k.op("mad.lo.s32", r, a, b, c)
	return r
}

// swz is the byte offset of 16-byte chunk ch of row row in a swizzled block.
func (k *kgen) swz(row, ch string) string {
	x := k.bin32("xor.b32", ch, k.bin32("and.b32", row, "7"))
	o := k.bin32("shl.b32", x, "4")
	return k.mad32(row, k.imm(swizzleRow), o)
}

// elemAddr is g + (row*ld + col)*2 as a 64-bit address.
func (k *kgen) elemAddr(g, row string, ld int, col string) string {
	return k.addrOf(g, row, ld, col, 2)
}

// addrOf is g + (row*ld + col)*size as a 64-bit address.
func (k *kgen) addrOf(g, row string, ld int, col string, size int) string {
	o := k.r("rd")
	k.op("mul.wide.s32", o, row, k.imm(ld))
	c := k.r("rd")
	k.op("cvt.s64.s32", c, col)
	sum := k.r("rd")
	k.op("add.s64", sum, o, c)
	a := k.r("rd")
	k.op("mad.lo.s64", a, sum, itoa(size), g)
	return a
}

// copy16 issues one 16-byte cp.async that zero-fills unless ok; an invalid source is
// replaced by the matrix base, so no address outside the allocation is ever formed for the
// copy engine.
func (k *kgen) copy16(dst, src, ok, fallback string) {
	n := k.r("r")
	k.op("selp.b32", n, "16", "0", ok)
	a := k.r("rd")
	k.op("selp.b64", a, src, fallback, ok)
	k.op("cp.async.cg.shared.global", "["+dst+"]", "["+a+"]", "16", n)
}

// descriptor is the 64-bit wgmma matrix descriptor of the block at shared address addr.
func (k *kgen) descriptor(addr string, fields uint64) string {
	enc := k.bin32("and.b32", k.bin32("shr.u32", addr, "4"), "0x3FFF")
	w := k.r("rd")
	k.op("cvt.u64.u32", w, enc)
	d := k.r("rd")
	k.op("or.b64", d, w, hex64(fields))
	return d
}

// cvt16 returns the 16-bit type suffix of the kernel's dtype.
func (k *kgen) cvt16() string { return name16(k.dt) }

// name16 is the PTX type suffix of a 16-bit float dtype.
func name16(dt numerics.DType) string {
	if dt == numerics.F16 {
		return "f16"
	}
	return "bf16"
}

// pack converts two f32 values to one 32-bit word of two 16-bit values (lo at the lower
// address), encoding as numerics.Encode does: nearest even, NaN canonical.
func (k *kgen) pack(lo, hi string) string { return k.packAs(k.dt, lo, hi) }

// packAs is pack for the 16-bit type dt (a kernel whose result type is not its operand type).
func (k *kgen) packAs(dt numerics.DType, lo, hi string) string {
	nan := fmt.Sprintf("0x%04X", narrowOf[dt].nan)
	w := k.r("r")
	k.op("cvt.rn."+name16(dt)+"x2.f32", w, hi, lo)
	pl, ph := k.r("p"), k.r("p")
	k.op("setp.nan.f32", pl, lo, lo)
	k.op("setp.nan.f32", ph, hi, hi)
	l := k.bin32("or.b32", k.bin32("and.b32", w, "0xFFFF0000"), nan)
	w1 := k.r("r")
	k.op("selp.b32", w1, l, w, pl)
	h := k.bin32("or.b32", k.bin32("and.b32", w1, "0x0000FFFF"), fmt.Sprintf("0x%04X0000", narrowOf[dt].nan))
	w2 := k.r("r")
	k.op("selp.b32", w2, h, w1, ph)
	return w2
}

// moduleText wraps the emitted body in its PTX module (the package's moduleText): what it is and
// how to launch it, the version and target, the 1024-aligned dynamic shared memory, and the
// entry with params .u64 pointer parameters.
func (k *kgen) moduleText(what string, grid [3]int, threads, shared int, version, arch, entry string, params int) string {
	return moduleText(module{generated: ": " + what, version: version, arch: arch, smemAlign: 1024, entry: entry, params: params, threads: threads,
		launch: fmt.Sprintf("grid (%d,%d,%d), %d threads, %d bytes of dynamic shared memory", grid[0], grid[1], grid[2], threads, shared)},
		k.e, k.e.w.String())
}
