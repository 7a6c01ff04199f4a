// Package devreduce is the one fixed-order reduction kernel of the device transports
// (engine/dist/cudaipc, engine/dist/nccl): PTX text, generated here, that reduces n
// contributions element by element, reading them in the order given (rank 0..n-1), and does
// exactly the arithmetic of engine/dist's host reduction (reduce.go), so a device collective
// gives the same bits as the inproc and tcp transports:
//
//   - f64: accumulate in f64 with add.rn.f64 in order; avg divides once with div.rn.f64.
//   - f32 and every narrower float (f16, bf16, fp8 e4m3 and e5m2): decode each element exactly
//     to f32, accumulate with add.rn.f32 in order, avg divides once with div.rn.f32, round once
//     to the dtype (cvt.rn; fp8 with .satfinite, which is how engine/numerics encodes fp8).
//   - int8, int32: sign-extend to 64 bits, add.s64 in order, avg div.s64 (truncates toward zero),
//     keep the low bits (wrapping at the end equals wrapping at every add).
//   - max, min: IEEE total order on zeros (+0 > -0), integer order on ints; the result is the
//     chosen contribution's own bits.
//   - Any NaN result is the dtype's canonical NaN, whatever payload an input carried: f64
//     0x7FF8000000000001 (Go's math.NaN(), which the host's f64 path returns), f32 0x7FC00000,
//     f16 0x7E00, bf16 0x7FC0, e4m3 0x7F, e5m2 0x7E.
//
// No instruction is fused (no fma), no add is reordered, and no thread's result depends on the
// grid: each thread owns whole elements (a grid-stride loop), so the bits depend on the inputs
// and their order only, never on the SM count or the launch shape.
//
// A kernel is specialised for (dtype, op, n): its parameters are the output pointer, the element
// count and the n input pointers, all .u64 (the CUDA backend's launch convention), and its body
// issues the n loads of an element before the n-1 adds, so the loads overlap. n is at most
// MaxInputs (kernel parameter space and registers).
//
// The package also holds ptxsim (a CPU interpreter for the instructions these kernels use), so
// CI checks the PTX's bits against the host reduction without a GPU.
package devreduce

import (
	"fmt"
	"math"
	"strings"
	"sync"

	"github.com/tessera-qa/tessera-qa/engine/dist"
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

// MaxInputs bounds n: 64 pointer parameters are 512 bytes of the 4 KiB parameter space, and
// 64 live addresses are about half of a thread's registers.
const MaxInputs = 64

// Threads is the block size the kernels are written for (.maxntid); any block size up to it
// gives the same bits.
const Threads = 256

// PTXVersion is the .version line: PTX ISA 8.0 (CUDA 12.0+ drivers; the engine's other
// kernels use the same).
const PTXVersion = "8.0"

// Kernel is one generated reduction kernel with what a launcher needs.
type Kernel struct {
	PTX   string
	Entry string // the .entry name for cuModuleGetFunction
	DType numerics.DType
	Op    dist.RedOp
	N     int    // contributions per element
	Arch  string // the .target: sm_80, or sm_90 for fp8 (ptxas of CUDA 13 refuses cvt .e4m3x2/.e5m2x2 below sm_90, measured on the H100 2026-11-25, though the PTX ISA names sm_89)
}

// Dtypes lists the dtypes the kernels reduce (every dtype engine/dist reduces: bool is not
// reducible).
var Dtypes = []numerics.DType{numerics.F64, numerics.F32, numerics.F16, numerics.BF16,
	numerics.F8E4M3, numerics.F8E5M2, numerics.I8, numerics.I32}

// Ops lists the reductions.
var Ops = []dist.RedOp{dist.Sum, dist.Avg, dist.Max, dist.Min}

// Check reports whether (dt, op, n) has a kernel: E_DTYPE for a dtype the host reduction
// refuses too, E_INPUT for a bad op, E_UNSUPPORTED above MaxInputs.
func Check(dt numerics.DType, op dist.RedOp, n int) error {
	if classOf(dt) == nil {
		return errs.New(errs.DType, "device reduction: cannot reduce %s", dt)
	}
	switch op {
	case dist.Sum, dist.Avg, dist.Max, dist.Min:
	default:
		return errs.New(errs.Input, "device reduction: reduction %s is not one of sum, max, min, avg", op)
	}
	if n < 1 || n > MaxInputs {
		return errs.New(errs.Unsupported, "device reduction: %d contributions per element; the kernel takes 1..%d (use the host path for more)", n, MaxInputs)
	}
	return nil
}

type kernelKey struct {
	dt numerics.DType
	op dist.RedOp
	n  int
}

var cache sync.Map // kernelKey -> *Kernel

// Generate returns the kernel that reduces n contributions of dt with op (cached: equal
// arguments return the same *Kernel).
func Generate(dt numerics.DType, op dist.RedOp, n int) (*Kernel, error) {
	if err := Check(dt, op, n); err != nil {
		return nil, err
	}
	key := kernelKey{dt, op, n}
	if k, ok := cache.Load(key); ok {
		return k.(*Kernel), nil
	}
	k := generate(dt, op, n)
	cache.Store(key, k)
	return k, nil
}

// Args returns the launch arguments in parameter order: out, count, then ins in order.
func (k *Kernel) Args(out uint64, count int, ins []uint64) ([]uint64, error) {
	if len(ins) != k.N {
		return nil, errs.New(errs.Internal, "device reduction %s: %d input pointers for a kernel of %d", k.Entry, len(ins), k.N)
	}
	if count < 0 {
		return nil, errs.New(errs.Internal, "device reduction %s: negative count %d", k.Entry, count)
	}
	args := make([]uint64, 0, 2+len(ins))
	args = append(args, out, uint64(count))
	return append(args, ins...), nil
}

// Grid is the number of blocks of Threads threads for count elements on a device with sms
// multiprocessors: enough to fill it (8 blocks per SM), never more than the elements need.
// The bits do not depend on it.
func Grid(count, sms int) int {
	if count <= 0 {
		return 0
	}
	g := (count + Threads - 1) / Threads
	if limit := 8 * max(sms, 1); g > limit {
		g = limit
	}
	return g
}

// class is how one dtype is loaded, accumulated and stored.
type class struct {
	size     int    // bytes per element
	kind     int    // kF64, kF32, kNarrow, kInt
	ld, st   string // raw load and store of the element's bits
	canonNaN uint64 // the canonical NaN pattern (floats)
	// For max/min on raw bits: sign bit, magnitude mask, and the NaN test on the magnitude.
	sign, mag uint64
	nanAbove  uint64 // magnitude > nanAbove is NaN (IEEE-like formats)
	nanEqual  uint64 // magnitude == nanEqual is NaN (e4m3, which has no infinities); 0 = unused
	arch      string
}

const (
	kF64 = iota
	kF32
	kNarrow
	kInt
)

func classOf(dt numerics.DType) *class {
	switch dt {
	case numerics.F64:
		return &class{size: 8, kind: kF64, ld: "ld.global.b64", st: "st.global.b64", canonNaN: math.Float64bits(math.NaN()),
			sign: 1 << 63, mag: 1<<63 - 1, nanAbove: 0x7FF0000000000000, arch: "sm_80"}
	case numerics.F32:
		return &class{size: 4, kind: kF32, ld: "ld.global.b32", st: "st.global.b32", canonNaN: 0x7FC00000,
			sign: 0x80000000, mag: 0x7FFFFFFF, nanAbove: 0x7F800000, arch: "sm_80"}
	case numerics.F16:
		return &class{size: 2, kind: kNarrow, ld: "ld.global.b16", st: "st.global.b16", canonNaN: 0x7E00,
			sign: 0x8000, mag: 0x7FFF, nanAbove: 0x7C00, arch: "sm_80"}
	case numerics.BF16:
		return &class{size: 2, kind: kNarrow, ld: "ld.global.b16", st: "st.global.b16", canonNaN: 0x7FC0,
			sign: 0x8000, mag: 0x7FFF, nanAbove: 0x7F80, arch: "sm_80"}
	case numerics.F8E4M3:
		return &class{size: 1, kind: kNarrow, ld: "ld.global.u8", st: "st.global.u8", canonNaN: 0x7F,
			sign: 0x80, mag: 0x7F, nanAbove: 0x7F, nanEqual: 0x7F, arch: "sm_90"}
	case numerics.F8E5M2:
		return &class{size: 1, kind: kNarrow, ld: "ld.global.u8", st: "st.global.u8", canonNaN: 0x7E,
			sign: 0x80, mag: 0x7F, nanAbove: 0x7C, arch: "sm_90"}
	case numerics.I8:
		return &class{size: 1, kind: kInt, ld: "ld.global.s8", st: "st.global.u8", arch: "sm_80"}
	case numerics.I32:
		return &class{size: 4, kind: kInt, ld: "ld.global.s32", st: "st.global.b32", arch: "sm_80"}
	}
	return nil
}

// EntryName is the kernel's .entry name, e.g. tq_devreduce_sum_bf16_n4.
func EntryName(dt numerics.DType, op dist.RedOp, n int) string {
	return fmt.Sprintf("tq_devreduce_%s_%s_n%d", op, dt, n)
}

func log2(n int) int {
	k := 0
	for 1<<k < n {
		k++
	}
	return k
}

func generate(dt numerics.DType, op dist.RedOp, n int) *Kernel {
	c := classOf(dt)
	e := newEmitter()
	entry := EntryName(dt, op, n)
	body := e.fork()

	// Prologue: parameters to global addresses, the thread's first element and the stride.
	out := body.reg("rd")
	body.op("ld.param.u64", out, "[p_out]")
	body.op("cvta.to.global.u64", out, out)
	count := body.reg("rd")
	body.op("ld.param.u64", count, "[p_count]")
	ins := make([]string, n)
	for k := range ins {
		ins[k] = body.reg("rd")
		body.op("ld.param.u64", ins[k], fmt.Sprintf("[p_in%d]", k))
		body.op("cvta.to.global.u64", ins[k], ins[k])
	}
	cta, ntid, tid, ncta := body.reg("r"), body.reg("r"), body.reg("r"), body.reg("r")
	body.op("mov.u32", cta, "%ctaid.x")
	body.op("mov.u32", ntid, "%ntid.x")
	body.op("mov.u32", tid, "%tid.x")
	body.op("mov.u32", ncta, "%nctaid.x")
	i, t, stride := body.reg("rd"), body.reg("rd"), body.reg("rd")
	body.op("mul.wide.u32", i, cta, ntid)
	body.op("cvt.u64.u32", t, tid)
	body.op("add.u64", i, i, t)
	body.op("mul.wide.u32", stride, ncta, ntid)

	loop, done := body.label(), body.label()
	body.place(loop)
	p := body.reg("p")
	body.op("setp.ge.u64", p, i, count)
	body.opIf(p, "bra", done) // divergent: threads leave the loop at different trips
	off := body.reg("rd")
	body.op("shl.b64", off, i, fmt.Sprint(log2(c.size)))
	addr := func(base string) string {
		a := body.reg("rd")
		body.op("add.u64", a, base, off)
		return a
	}
	// Every load first, then the fold in order: the loads overlap, the adds stay sequential.
	raws := make([]string, n)
	for k := range ins {
		raws[k] = body.load(c, addr(ins[k]))
	}
	var res string
	if op == dist.Max || op == dist.Min {
		res = body.minMax(c, op == dist.Max, raws)
	} else {
		res = body.sum(c, dt, op == dist.Avg, n, raws)
	}
	body.op(c.st, "["+addr(out)+"]", res)
	body.op("add.u64", i, i, stride)
	body.op("bra", loop)
	body.place(done)
	body.op("ret")

	var b strings.Builder
	fmt.Fprintf(&b, ".version %s\n.target %s\n.address_size 64\n\n", PTXVersion, c.arch)
	fmt.Fprintf(&b, "// %s: out[i] = %s of in0[i] .. in%d[i] in that order, %s (engine/dist/devreduce).\n", entry, op, n-1, dt)
	fmt.Fprintf(&b, ".visible .entry %s(\n\t.param .u64 p_out,\n\t.param .u64 p_count", entry)
	for k := range n {
		fmt.Fprintf(&b, ",\n\t.param .u64 p_in%d", k)
	}
	fmt.Fprintf(&b, "\n)\n.maxntid %d, 1, 1\n{\n", Threads)
	b.WriteString(e.decls())
	b.WriteString(body.w.String())
	b.WriteString("}\n")
	return &Kernel{PTX: b.String(), Entry: entry, DType: dt, Op: op, N: n, Arch: c.arch}
}

// load emits the raw load of one element and returns the register holding its bits: .b64 for
// f64, .b32 for f32 and int32, .b16 for 16- and 8-bit types (int8 sign-extended).
func (e *emitter) load(c *class, addr string) string {
	var r string
	switch c.size {
	case 8:
		r = e.reg("rd")
	case 4:
		r = e.reg("r")
	default:
		r = e.reg("h")
	}
	e.op(c.ld, r, "["+addr+"]")
	return r
}

// sum folds raws in order (sum or avg) and returns the register with the result's bits in the
// store's width.
func (e *emitter) sum(c *class, dt numerics.DType, avg bool, n int, raws []string) string {
	switch c.kind {
	case kF64:
		acc := e.reg("fd")
		e.op("mov.b64", acc, raws[0])
		for _, r := range raws[1:] {
			v := e.reg("fd")
			e.op("mov.b64", v, r)
			e.op("add.rn.f64", acc, acc, v)
		}
		if avg {
			e.op("div.rn.f64", acc, acc, f64lit(float64(n)))
		}
		return e.canonical64(acc, c.canonNaN)
	case kF32, kNarrow:
		acc := e.reg("f")
		e.decodeF32(c, dt, acc, raws[0])
		for _, r := range raws[1:] {
			v := e.reg("f")
			e.decodeF32(c, dt, v, r)
			e.op("add.rn.f32", acc, acc, v)
		}
		if avg {
			e.op("div.rn.f32", acc, acc, f32lit(float32(n)))
		}
		return e.encodeF32(c, dt, acc)
	}
	// Integers: 64-bit sum of sign-extended values.
	acc := e.reg("rd")
	e.widen(c, acc, raws[0])
	for _, r := range raws[1:] {
		v := e.reg("rd")
		e.widen(c, v, r)
		e.op("add.s64", acc, acc, v)
	}
	if avg {
		e.op("div.s64", acc, acc, fmt.Sprint(n))
	}
	if c.size == 4 {
		o := e.reg("r")
		e.op("cvt.u32.u64", o, acc)
		return o
	}
	o := e.reg("h")
	e.op("cvt.u16.u64", o, acc)
	return o
}

func (e *emitter) widen(c *class, dst, raw string) {
	if c.size == 4 {
		e.op("cvt.s64.s32", dst, raw)
		return
	}
	e.op("cvt.s64.s16", dst, raw)
}

// decodeF32 sets f32 register dst to the exact value of raw's element.
func (e *emitter) decodeF32(c *class, dt numerics.DType, dst, raw string) {
	switch dt {
	case numerics.F32:
		e.op("mov.b32", dst, raw)
	case numerics.BF16:
		w := e.reg("r")
		e.op("cvt.u32.u16", w, raw)
		e.op("shl.b32", w, w, "16")
		e.op("mov.b32", dst, w)
	case numerics.F16:
		e.op("cvt.f32.f16", dst, raw)
	case numerics.F8E4M3, numerics.F8E5M2:
		// fp8 -> f16 is exact (both formats are subsets of f16); the element is in the low byte,
		// so its f16 lands in the low half.
		pair, h := e.reg("r"), e.reg("h")
		e.op("cvt.rn.f16x2."+fp8Name(dt)+"x2", pair, raw)
		e.op("cvt.u16.u32", h, pair)
		e.op("cvt.f32.f16", dst, h)
	default:
		panic("devreduce: decodeF32 of " + dt.String())
	}
}

// encodeF32 rounds f32 register acc once to dt, canonicalising NaN, and returns the bits.
func (e *emitter) encodeF32(c *class, dt numerics.DType, acc string) string {
	nan := e.reg("p")
	e.op("setp.nan.f32", nan, acc, acc)
	switch dt {
	case numerics.F32:
		bits, o := e.reg("r"), e.reg("r")
		e.op("mov.b32", bits, acc)
		e.op("selp.b32", o, hex(c.canonNaN, 8), bits, nan)
		return o
	case numerics.BF16, numerics.F16:
		h, o := e.reg("h"), e.reg("h")
		e.op("cvt.rn."+dt.String()+".f32", h, acc)
		e.op("selp.b16", o, e.const16(c.canonNaN), h, nan)
		return o
	case numerics.F8E4M3, numerics.F8E5M2:
		// cvt packs two values: a into the high byte, b into the low byte; a is 0.
		zero, h, o := e.reg("f"), e.reg("h"), e.reg("h")
		e.op("mov.f32", zero, f32lit(0))
		e.op("cvt.rn.satfinite."+fp8Name(dt)+"x2.f32", h, zero, acc)
		e.op("selp.b16", o, e.const16(c.canonNaN), h, nan)
		return o
	}
	panic("devreduce: encodeF32 to " + dt.String())
}

func (e *emitter) canonical64(acc string, canon uint64) string {
	nan := e.reg("p")
	e.op("setp.nan.f64", nan, acc, acc)
	bits, o, cn := e.reg("rd"), e.reg("rd"), e.reg("rd")
	e.op("mov.b64", bits, acc)
	e.op("mov.b64", cn, hex(canon, 16))
	e.op("selp.b64", o, cn, bits, nan)
	return o
}

// const16 puts a 16-bit constant in a register (selp.b16 takes registers, as the engine's
// other kernels write it).
func (e *emitter) const16(v uint64) string {
	r := e.reg("h")
	e.op("mov.b16", r, hex(v, 4))
	return r
}

func fp8Name(dt numerics.DType) string {
	if dt == numerics.F8E4M3 {
		return "e4m3"
	}
	return "e5m2"
}

// minMax picks, per element, the largest (or smallest) contribution in the total order where
// -0 < +0, on the raw bits: a float's key is its magnitude when positive and the bitwise NOT
// of its magnitude (-mag-1) when negative, which orders every non-NaN value and puts -0 just
// below +0. Any NaN makes the result the canonical NaN. The result is the winner's own bits.
func (e *emitter) minMax(c *class, isMax bool, raws []string) string {
	wide := c.size == 8
	bits, cmpT, selT, reg := "b32", "s32", "b32", "r"
	if wide {
		bits, cmpT, selT, reg = "b64", "s64", "b64", "rd"
	}
	better := "setp.gt." + cmpT
	if !isMax {
		better = "setp.lt." + cmpT
	}
	var best, bestKey, anyNaN string
	for k, raw := range raws {
		v := raw
		if c.size < 4 { // work on 32 bits: zero-extend floats, sign-extend int8
			v = e.reg("r")
			if c.kind == kInt {
				e.op("cvt.s32.s16", v, raw)
			} else {
				e.op("cvt.u32.u16", v, raw)
			}
		}
		key := v
		var nan string
		if c.kind != kInt {
			mag, neg, inv := e.reg(reg), e.reg("p"), e.reg(reg)
			key = e.reg(reg)
			e.op("and."+bits, mag, v, hex(c.mag, hexWidth(c)))
			s := e.reg(reg)
			e.op("and."+bits, s, v, hex(c.sign, hexWidth(c)))
			e.op("setp.ne."+unsigned(bits), neg, s, "0")
			e.op("not."+bits, inv, mag)
			e.op("selp."+selT, key, inv, mag, neg)
			nan = e.reg("p")
			if c.nanEqual != 0 {
				e.op("setp.eq."+unsigned(bits), nan, mag, hex(c.nanEqual, hexWidth(c)))
			} else {
				e.op("setp.gt."+unsigned(bits), nan, mag, hex(c.nanAbove, hexWidth(c)))
			}
		}
		if k == 0 {
			best, bestKey, anyNaN = v, key, nan
			continue
		}
		if nan != "" {
			acc := e.reg("p")
			e.op("or.pred", acc, anyNaN, nan)
			anyNaN = acc
		}
		win, nb, nk := e.reg("p"), e.reg(reg), e.reg(reg)
		e.op(better, win, key, bestKey)
		e.op("selp."+selT, nb, v, best, win)
		e.op("selp."+selT, nk, key, bestKey, win)
		best, bestKey = nb, nk
	}
	res := best
	if anyNaN != "" {
		res = e.reg(reg)
		cn := e.reg(reg)
		e.op("mov."+bits, cn, hex(c.canonNaN, hexWidth(c)))
		e.op("selp."+selT, res, cn, best, anyNaN)
	}
	switch c.size {
	case 8, 4:
		return res
	}
	o := e.reg("h")
	e.op("cvt.u16.u32", o, res)
	return o
}

func hexWidth(c *class) int {
	if c.size == 8 {
		return 16
	}
	return 8
}

func unsigned(bits string) string { return "u" + bits[1:] }

func hex(v uint64, digits int) string { return fmt.Sprintf("0x%0*X", digits, v) }

func f64lit(v float64) string { return fmt.Sprintf("0d%016X", math.Float64bits(v)) }
func f32lit(v float32) string { return fmt.Sprintf("0f%08X", math.Float32bits(v)) }
