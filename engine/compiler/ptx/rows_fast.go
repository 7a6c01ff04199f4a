package ptx

import (
	"fmt"
	"math"
	"os"
	"strings"

	"github.com/tessera-qa/tessera-qa/engine/compiler/tile"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

// The fast row lowering ("simt-rows"): softmax, log_softmax, layernorm and rmsnorm kernels
// recognised by matchRows run as one CTA per row, the row held in registers after one pass of
// 16-byte loads, reductions by warp shuffles and one shared-memory exchange in a fixed order,
// and one pass of 16-byte stores. The SIMT path reads each row three times and keeps every
// tile in shared memory; this one moves the minimum, each input byte read and each output
// byte written once.
//
// Semantics. Every step the Tile IR rounds is rounded the same way (f32 add/sub/mul/div with
// .rn, the norms' eps added and rsqrt taken in f64 as the CPU backend does, log in f64 by the
// same routine as the SIMT path). Two things differ from the CPU backend, so bits may differ
// in the last places (within the f32 tolerance): sums are added in a different fixed order
// (per thread, then a shuffle tree, then across warps, instead of tile by tile left to right),
// and exp is computed in f32 (ex2.approx on a two-part argument, about 2 ulp) instead of in
// f64 and rounded; 16-bit softmax outputs multiply by 1/l instead of dividing by l (at most an
// f32 ulp before the rounding to 16 bits). Runs are deterministic: no atomics, and the order
// depends only on the row length.

// rowsFastEnv turns the fast row lowering off ("off"): the SIMT lowering of the same kernel is
// used, for A/B timings and for bisecting a suspected fast-path bug.
const rowsFastEnv = "TESSERA_PTX_ROWS"

const (
	rowsElemsTarget = 16   // row elements a thread holds, where the row allows
	rowsElemsMax    = 32   // beyond this the registers spill: longer rows stay on the SIMT path
	rowsMaxThreads  = 1024 // CTA size limit
	rowsAreaBytes   = 128  // one shared-memory exchange area: one f32 per warp
	rowsShared      = 3 * rowsAreaBytes
	rowsExpClamp    = -104 // exp(-104) is below half the smallest f32 subnormal
)

// rowsOps are the instruction forms the fast row kernels add to the emitter's table.
var rowsOps = []string{
	"ld.global.b32", "ld.global.v2.b32", "ld.global.v4.b32", "st.global.v2.b32", "st.global.v4.b32",
	"shfl.sync.bfly.b32", "max.NaN.f32", "fma.rn.f32", "neg.f32", "ex2.approx.ftz.f32",
	"cvt.rn.bf16x2.f32", "cvt.rn.f16x2.f32", "or.b32", "setp.ne.u32",
}

func init() {
	for _, op := range rowsOps {
		knownOps[op] = true
	}
}

// generateRows returns the fast module for k, or nil when k is not a row kernel it handles
// (then the caller generates the SIMT lowering). SIMTOnly targets never use it: its sums are
// not in the CPU backend's order.
func generateRows(k *tile.Kernel, t Target) *Module {
	if t.SIMTOnly || os.Getenv(rowsFastEnv) == "off" {
		return nil
	}
	p := matchRows(k)
	if p == nil {
		return nil
	}
	g := newRowsGen(k, p, t)
	if g == nil {
		return nil
	}
	return g.module()
}

// rowsGen emits one fast row kernel. Thread t holds vector slots t, t+T, ..., t+(K-1)T of its
// row; slot v is the W consecutive row elements starting at v*W.
type rowsGen struct {
	k     *tile.Kernel
	p     *rowsPlan
	t     Target
	e     *emitter
	entry string

	T, K, W int // threads, slots per thread, elements per slot
	nv      int // slots per row
	nw      int // warps

	tid, lane, warp, smem string
	wslot, lslot          string         // shared addresses of this warp's and this lane's f32
	addr                  map[int]string // param -> address of this thread's slot 0
	valid                 []string       // per slot: predicate "this thread has the slot", "" if all do
	glob                  map[int]string // param -> global base address
	step                  map[int]int    // param -> bytes between a thread's consecutive slots
}

// newRowsGen picks the thread layout, or returns nil when the row is too long to hold in
// registers.
func newRowsGen(k *tile.Kernel, p *rowsPlan, t Target) *rowsGen {
	maxSize := 0
	for _, i := range p.params() {
		maxSize = max(maxSize, k.Params[i].DType.Size())
	}
	w := 16 / maxSize
	for ; w > 1; w /= 2 {
		ok := p.colStride == 1 && p.cols%w == 0 && p.base%w == 0
		for _, s := range p.rowStrides {
			ok = ok && s%w == 0
		}
		if ok {
			break
		}
	}
	nv := p.cols / w
	perThread := max(1, rowsElemsTarget/w)
	threads := min(max(32*rowsWarps((nv+perThread-1)/perThread), 32), rowsMaxThreads)
	slots := (nv + threads - 1) / threads
	if slots*w > rowsElemsMax {
		return nil
	}
	g := &rowsGen{k: k, p: p, t: t, entry: entryName(k.Name), T: threads, K: slots, W: w, nv: nv, nw: threads / 32,
		addr: map[int]string{}, glob: map[int]string{}, step: map[int]int{}}
	for _, i := range p.params() {
		stride := p.colStride
		if i == p.gamma || i == p.beta {
			stride = 1
		}
		g.step[i] = threads * w * stride * k.Params[i].DType.Size()
		if int64(g.step[i])*int64(slots) >= math.MaxInt32 {
			return nil
		}
	}
	return g
}

func rowsWarps(n int) int { return (n + 31) / 32 }

func (g *rowsGen) module() *Module {
	g.e = newEmitter()
	g.prologue()
	switch g.p.op {
	case rowsSoftmax, rowsLogSoftmax:
		g.softmax()
	case rowsLayernorm:
		g.layernorm()
	case rowsRMSNorm:
		g.rmsnorm()
	}
	g.e.op("ret")

	// At least 1024 threads per SM: while one CTA waits for its row another computes. This caps
	// ptxas at 64 registers a thread, enough for the 32 values a thread may hold.
	text := moduleText(module{
		generated: fmt.Sprintf(" (fast row kernel: %s, %d slots of %d elements per thread) from Tile IR kernel %s", g.p.op, g.K, g.W, g.k.Name),
		launch:    fmt.Sprintf("grid (%d,1,1), %d threads, %d bytes of dynamic shared memory", g.p.rows, g.T, rowsShared),
		version:   g.t.PTXVersion, arch: g.t.Arch(), smemAlign: 16, entry: g.entry, params: len(g.k.Params), threads: g.T,
		directives: fmt.Sprintf(".minnctapersm %d\n", max(1, 1024/g.T)),
	}, g.e, g.e.w.String())
	return &Module{PTX: text, Entry: g.entry, Grid: [3]int{g.p.rows, 1, 1}, Threads: g.T, SharedBytes: rowsShared,
		Path: "simt-rows", Tile: fmt.Sprintf("row per CTA, %d threads x %d slots x %d elements", g.T, g.K, g.W)}
}

// prologue: thread ids, this CTA's row offset, and each parameter's slot-0 address.
func (g *rowsGen) prologue() {
	e := g.e
	g.tid, g.smem, g.warp, g.lane = e.reg("r"), e.reg("r"), e.reg("r"), e.reg("r")
	row := e.reg("r")
	e.op("mov.u32", g.tid, "%tid.x")
	e.op("mov.u32", row, "%ctaid.x")
	e.op("mov.u32", g.smem, "tq_smem")
	e.op("shr.u32", g.warp, g.tid, "5")
	e.op("and.b32", g.lane, g.tid, "31")
	g.wslot, g.lslot = e.reg("r"), e.reg("r")
	e.op("mad.lo.s32", g.wslot, g.warp, "4", g.smem)
	e.op("mad.lo.s32", g.lslot, g.lane, "4", g.smem)
	for i := range g.k.Params {
		raw, glob := e.reg("rd"), e.reg("rd")
		e.op("ld.param.u64", raw, fmt.Sprintf("[%s_p%d]", g.entry, i))
		e.op("cvta.to.global.u64", glob, raw)
		g.glob[i] = glob
	}
	// Row r's element offset: unravel r over the row dims (last fastest), dot with strides.
	off := e.reg("rd")
	e.op("mov.b64", off, itoa(g.p.base))
	cur := row
	for i := len(g.p.rowDims) - 1; i >= 0; i-- {
		idx := cur
		if i > 0 {
			q := e.reg("r")
			idx = e.reg("r")
			e.op("rem.u32", idx, cur, itoa(g.p.rowDims[i]))
			e.op("div.u32", q, cur, itoa(g.p.rowDims[i]))
			cur = q
		}
		if g.p.rowStrides[i] != 0 {
			next := e.reg("rd")
			e.op("mad.wide.s32", next, idx, itoa(g.p.rowStrides[i]), off)
			off = next
		}
	}
	for _, i := range g.p.params() {
		size := g.k.Params[i].DType.Size()
		base := g.glob[i]
		if i != g.p.gamma && i != g.p.beta {
			base = e.reg("rd")
			e.op("mad.lo.s64", base, off, itoa(size), g.glob[i])
		}
		tb, a := e.reg("rd"), e.reg("rd")
		e.op("mul.wide.s32", tb, g.tid, itoa(g.step[i]/g.T))
		e.op("add.s64", a, base, tb)
		g.addr[i] = a
	}
	g.valid = make([]string, g.K)
	for k := range g.K {
		if g.T*(k+1) > g.nv {
			p := e.reg("p")
			e.op("setp.lt.s32", p, g.tid, itoa(g.nv-g.T*k))
			g.valid[k] = p
		}
	}
}

func (g *rowsGen) at(param, k int) string {
	if off := k * g.step[param]; off != 0 {
		return fmt.Sprintf("[%s+%d]", g.addr[param], off)
	}
	return "[" + g.addr[param] + "]"
}

// fillPattern is fill encoded in dt, repeated over a 32-bit word (16-bit types hold two).
func rowsFillPattern(dt numerics.DType, fill float64) uint64 {
	b := numerics.Encode(dt, fill)
	if dt.Size() == 2 {
		return b<<16 | b
	}
	return b
}

// load reads slot k of a parameter (predicated where the slot may not exist, whose registers
// then hold fill) and decodes it into W f32 values.
func (g *rowsGen) load(param, k int, fill float64) []string {
	e := g.e
	dt := g.k.Params[param].DType
	bytes := g.W * dt.Size()
	pred := g.valid[k]
	if bytes == 2 {
		h := e.reg("h")
		if pred != "" {
			e.op("mov.b16", h, fmt.Sprintf("0x%04X", rowsFillPattern(dt, fill)&0xFFFF))
		}
		e.opIf(pred, "ld.global.b16", h, g.at(param, k))
		return []string{g.decode16(dt, h)}
	}
	words := make([]string, bytes/4)
	for i := range words {
		words[i] = e.reg("r")
		if pred != "" {
			e.op("mov.b32", words[i], fmt.Sprintf("0x%08X", rowsFillPattern(dt, fill)))
		}
	}
	switch len(words) {
	case 1:
		e.opIf(pred, "ld.global.b32", words[0], g.at(param, k))
	case 2:
		e.opIf(pred, "ld.global.v2.b32", "{"+strings.Join(words, ",")+"}", g.at(param, k))
	default:
		e.opIf(pred, "ld.global.v4.b32", "{"+strings.Join(words, ",")+"}", g.at(param, k))
	}
	var out []string
	for _, w := range words {
		if dt.Size() == 4 {
			f := e.reg("f")
			e.op("mov.b32", f, w)
			out = append(out, f)
			continue
		}
		out = append(out, g.decodeLo(dt, w), g.decodeHi(dt, w))
	}
	return out
}

// decode16 is the f32 value of a 16-bit pattern (exact).
func (g *rowsGen) decode16(dt numerics.DType, h string) string {
	e := g.e
	f := e.reg("f")
	if dt == numerics.F16 {
		e.op("cvt.f32.f16", f, h)
		return f
	}
	r, s := e.reg("r"), e.reg("r")
	e.op("cvt.u32.u16", r, h)
	e.op("shl.b32", s, r, "16")
	e.op("mov.b32", f, s)
	return f
}

// decodeLo and decodeHi decode the element in the low (lower address) and high half of a word.
func (g *rowsGen) decodeLo(dt numerics.DType, w string) string {
	e := g.e
	if dt == numerics.BF16 {
		s, f := e.reg("r"), e.reg("f")
		e.op("shl.b32", s, w, "16")
		e.op("mov.b32", f, s)
		return f
	}
	h := e.reg("h")
	e.op("cvt.u16.u32", h, w)
	return g.decode16(dt, h)
}

func (g *rowsGen) decodeHi(dt numerics.DType, w string) string {
	e := g.e
	if dt == numerics.BF16 {
		s, f := e.reg("r"), e.reg("f")
		e.op("and.b32", s, w, "0xFFFF0000")
		e.op("mov.b32", f, s)
		return f
	}
	s, h := e.reg("r"), e.reg("h")
	e.op("shr.u32", s, w, "16")
	e.op("cvt.u16.u32", h, s)
	return g.decode16(dt, h)
}

// loadAll reads every slot of the row parameter into g.vals.
func (g *rowsGen) loadAll(param int, fill float64) [][]string {
	vals := make([][]string, g.K)
	for k := range g.K {
		vals[k] = g.load(param, k, fill)
	}
	return vals
}

// each applies f to every value, slot by slot, element by element: the fixed order of every
// per-thread fold.
func rowsEach(vals [][]string, f func(k, i int, v string) string) [][]string {
	out := make([][]string, len(vals))
	for k, vs := range vals {
		out[k] = make([]string, len(vs))
		for i, v := range vs {
			out[k][i] = f(k, i, v)
		}
	}
	return out
}

func (g *rowsGen) f32op(opcode string, a, b string) string {
	d := g.e.reg("f")
	g.e.op(opcode, d, a, b)
	return d
}

func (g *rowsGen) konst(v float32) string {
	d := g.e.reg("f")
	g.e.op("mov.f32", d, f32lit(v))
	return d
}

// fold combines a thread's values left to right (slot by slot, element by element).
func (g *rowsGen) fold(vals [][]string, opcode string) string {
	acc := ""
	for _, vs := range vals {
		for _, v := range vs {
			if acc == "" {
				acc = v
				continue
			}
			acc = g.f32op(opcode, acc, v)
		}
	}
	return acc
}

// warpReduce combines v over the 32 lanes by a butterfly: at each step lane i combines its
// value with lane i^off's, and since IEEE addition and max are commutative both lanes get the
// same bits, so every lane ends with the same result, in an order fixed by the lane numbers.
func (g *rowsGen) warpReduce(v, opcode string) string {
	e := g.e
	for _, off := range []int{16, 8, 4, 2, 1} {
		r, s, f := e.reg("r"), e.reg("r"), e.reg("f")
		e.op("mov.b32", r, v)
		e.op("shfl.sync.bfly.b32", s, r, itoa(off), "31", "0xFFFFFFFF")
		e.op("mov.b32", f, s)
		v = g.f32op(opcode, v, f)
	}
	return v
}

// blockReduce combines every thread's v: per warp by warpReduce, then lane 0 of each warp
// writes its result to shared area `area`, and every warp reads the nw partials back (lane l
// partial l, neutral beyond) and reduces them the same way, so all threads hold the same bits.
// Each area is used once per kernel, so no barrier is needed against a later reuse.
func (g *rowsGen) blockReduce(v, opcode string, area int, neutral float32) string {
	v = g.warpReduce(v, opcode)
	if g.nw == 1 {
		return v
	}
	e := g.e
	notLead := e.reg("p")
	e.op("setp.ne.u32", notLead, g.lane, "0")
	e.opIf("!"+notLead, "st.shared.f32", fmt.Sprintf("[%s+%d]", g.wslot, area*rowsAreaBytes), v)
	e.op("bar.sync", "0")
	t := g.konst(neutral)
	have := e.reg("p")
	e.op("setp.lt.u32", have, g.lane, itoa(g.nw))
	e.opIf(have, "ld.shared.f32", t, fmt.Sprintf("[%s+%d]", g.lslot, area*rowsAreaBytes))
	return g.warpReduce(t, opcode)
}

// rowScalar computes a per-row f32 from f64 math once per row: warp 0 computes it and
// broadcasts it through shared memory, so the other warps do not spend f64 throughput on it.
func (g *rowsGen) rowScalar(compute func() string) string {
	if g.nw == 1 {
		return compute()
	}
	e := g.e
	skip := e.label()
	other := e.reg("p")
	e.op("setp.ne.u32", other, g.warp, "0")
	e.opIf(other, "bra", skip)
	v := compute()
	e.op("st.shared.f32", fmt.Sprintf("[%s+%d]", g.smem, 2*rowsAreaBytes), v)
	e.place(skip)
	e.op("bar.sync", "0")
	r := e.reg("f")
	e.op("ld.shared.f32", r, fmt.Sprintf("[%s+%d]", g.smem, 2*rowsAreaBytes))
	return r
}

// rsqrtEps is the norms' f32(rsqrt(f32(v + eps))) with the add and the rsqrt in f64, as the
// Tile IR's Binary and Unary instructions define them.
func (g *rowsGen) rsqrtEps(v string) string {
	e := g.e
	m := ptxArith{e}
	v64 := e.reg("fd")
	e.op("cvt.f64.f32", v64, v)
	s32 := e.reg("f")
	e.op("cvt.rn.f32.f64", s32, m.add(v64, m.f(g.p.eps)))
	s64 := e.reg("fd")
	e.op("cvt.f64.f32", s64, s32)
	r, _ := unaryF64(m, "rsqrt", s64)
	out := e.reg("f")
	e.op("cvt.rn.f32.f64", out, r)
	return out
}

// rowsLog2e and friends split the constants of exp(d) = 2^(d log2 e) so that the f32 product
// d*log2e can be carried to about 2^-48 relative.
var (
	rowsLog2e   = float32(math.Log2E)
	rowsLog2eLo = float32(math.Log2E - float64(float32(math.Log2E)))
	rowsLn2     = float32(math.Ln2)
)

// exp is exp(d) in f32 for d <= 0 or NaN (the softmax argument x - max): t = d*log2e as an
// unevaluated sum t + lo (the product's rounding error by an FMA, plus d times log2e's own
// f32 error), 2^t by ex2.approx, and the factor 2^lo ~ 1 + lo*ln2 applied by one FMA. d is
// first clamped to -104, where exp rounds to 0, so no infinity enters the FMAs. The .ftz form
// (one MUFU.EX2, where the plain form adds a rescaling around it) flushes results below
// 2^-126 to 0: terms under 1.2e-38 of a sum that holds at least the 1 of the maximum.
func (g *rowsGen) exp(d string) string {
	e := g.e
	c := g.f32op("max.NaN.f32", d, f32lit(rowsExpClamp))
	t := g.f32op("mul.rn.f32", c, f32lit(rowsLog2e))
	nt := e.reg("f")
	e.op("neg.f32", nt, t)
	lo := e.reg("f")
	e.op("fma.rn.f32", lo, c, f32lit(rowsLog2e), nt)
	lo2 := e.reg("f")
	e.op("fma.rn.f32", lo2, c, f32lit(rowsLog2eLo), lo)
	corr := g.f32op("mul.rn.f32", lo2, f32lit(rowsLn2))
	y := e.reg("f")
	e.op("ex2.approx.ftz.f32", y, t)
	r := e.reg("f")
	e.op("fma.rn.f32", r, y, corr, y)
	return r
}

// softmax: max, then exp(x - max) and its sum, then the quotient (or, for log_softmax, the
// difference x - max - log(sum)); the row never leaves registers.
func (g *rowsGen) softmax() {
	p := g.p
	xs := g.loadAll(p.x, math.Inf(-1))
	m := g.blockReduce(g.fold(xs, "max.NaN.f32"), "max.NaN.f32", 0, float32(math.Inf(-1)))
	ds := rowsEach(xs, func(_, _ int, x string) string { return g.f32op("sub.rn.f32", x, m) })
	ps := rowsEach(ds, func(_, _ int, d string) string { return g.exp(d) })
	l := g.blockReduce(g.fold(ps, "add.rn.f32"), "add.rn.f32", 1, 0)
	var ys [][]string
	switch {
	case p.op == rowsLogSoftmax:
		ll := g.rowScalar(func() string {
			m := ptxArith{g.e}
			l64 := g.e.reg("fd")
			g.e.op("cvt.f64.f32", l64, l)
			r, _ := unaryF64(m, "log", l64)
			out := g.e.reg("f")
			g.e.op("cvt.rn.f32.f64", out, r)
			return out
		})
		ys = rowsEach(ds, func(_, _ int, d string) string { return g.f32op("sub.rn.f32", d, ll) })
	case g.k.Params[p.out].DType == numerics.F32:
		ys = rowsEach(ps, func(_, _ int, v string) string { return g.f32op("div.rn.f32", v, l) })
	default:
		rl := g.f32op("div.rn.f32", g.konst(1), l)
		ys = rowsEach(ps, func(_, _ int, v string) string { return g.f32op("mul.rn.f32", v, rl) })
	}
	g.storeAll(ys)
}

// layernorm: the mean, the sum of squared deviations (two passes over registers, as the Tile
// IR's two passes over memory), then ((x - mean) * rsqrt(var + eps)) * gamma + beta.
func (g *rowsGen) layernorm() {
	p := g.p
	xs := g.loadAll(p.x, 0)
	cnt := g.konst(float32(p.count))
	mean := g.f32op("div.rn.f32", g.blockReduce(g.fold(xs, "add.rn.f32"), "add.rn.f32", 0, 0), cnt)
	ds := rowsEach(xs, func(k, _ int, x string) string {
		d := g.f32op("sub.rn.f32", x, mean)
		if g.valid[k] == "" {
			return d
		}
		z := g.e.reg("f") // a missing slot's deviation must not count (the Tile IR's MaskCols)
		g.e.op("selp.f32", z, d, f32lit(0), g.valid[k])
		return z
	})
	sq := rowsEach(ds, func(_, _ int, d string) string { return g.f32op("mul.rn.f32", d, d) })
	va := g.f32op("div.rn.f32", g.blockReduce(g.fold(sq, "add.rn.f32"), "add.rn.f32", 1, 0), cnt)
	r := g.rowScalar(func() string { return g.rsqrtEps(va) })
	gs, bs := g.loadAll(p.gamma, 0), g.loadAll(p.beta, 0)
	g.storeAll(rowsEach(ds, func(k, i int, d string) string {
		y := g.f32op("mul.rn.f32", g.f32op("mul.rn.f32", d, r), gs[k][i])
		return g.f32op("add.rn.f32", y, bs[k][i])
	}))
}

// rmsnorm: the mean square, then (x * rsqrt(ms + eps)) * gamma.
func (g *rowsGen) rmsnorm() {
	p := g.p
	xs := g.loadAll(p.x, 0)
	sq := rowsEach(xs, func(_, _ int, x string) string { return g.f32op("mul.rn.f32", x, x) })
	ms := g.f32op("div.rn.f32", g.blockReduce(g.fold(sq, "add.rn.f32"), "add.rn.f32", 0, 0), g.konst(float32(p.count)))
	r := g.rowScalar(func() string { return g.rsqrtEps(ms) })
	gs := g.loadAll(p.gamma, 0)
	g.storeAll(rowsEach(xs, func(k, i int, x string) string {
		return g.f32op("mul.rn.f32", g.f32op("mul.rn.f32", x, r), gs[k][i])
	}))
}

// storeAll encodes and stores every slot of the output. The output dtype's canonical NaN
// (what numerics.Encode writes) needs a select per element; a thread whose values hold no
// NaN (max.NaN over them is a number) skips it.
func (g *rowsGen) storeAll(ys [][]string) {
	e := g.e
	anyNaN := g.fold(ys, "max.NaN.f32")
	nan := e.reg("p")
	e.op("setp.nan.f32", nan, anyNaN, anyNaN)
	slow, done := e.label(), e.label()
	e.opIf(nan, "bra", slow)
	g.storeSlots(ys, false)
	e.op("bra", done)
	e.place(slow)
	g.storeSlots(ys, true)
	e.place(done)
}

func (g *rowsGen) storeSlots(ys [][]string, canon bool) {
	e := g.e
	out := g.p.out
	dt := g.k.Params[out].DType
	for k, vs := range ys {
		pred := g.valid[k]
		if dt.Size() == 2 && len(vs) == 1 {
			e.opIf(pred, "st.global.b16", g.at(out, k), g.half(dt, vs[0], canon))
			continue
		}
		var words []string
		if dt.Size() == 4 {
			for _, y := range vs {
				words = append(words, g.bits32(y, canon))
			}
		} else {
			for i := 0; i < len(vs); i += 2 {
				words = append(words, g.pack(dt, vs[i], vs[i+1], canon))
			}
		}
		switch len(words) {
		case 1:
			e.opIf(pred, "st.global.b32", g.at(out, k), words[0])
		case 2:
			e.opIf(pred, "st.global.v2.b32", g.at(out, k), "{"+strings.Join(words, ",")+"}")
		default:
			e.opIf(pred, "st.global.v4.b32", g.at(out, k), "{"+strings.Join(words, ",")+"}")
		}
	}
}

// bits32 is an f32 value's bit pattern, NaN made 0x7FC00000 when canon.
func (g *rowsGen) bits32(y string, canon bool) string {
	e := g.e
	r := e.reg("r")
	e.op("mov.b32", r, y)
	if !canon {
		return r
	}
	p, c := e.reg("p"), e.reg("r")
	e.op("setp.nan.f32", p, y, y)
	e.op("selp.b32", c, "0x7FC00000", r, p)
	return c
}

// half rounds an f32 to a 16-bit pattern (nearest even), NaN made canonical when canon.
func (g *rowsGen) half(dt numerics.DType, y string, canon bool) string {
	e := g.e
	h := e.reg("h")
	op := "cvt.rn.f16.f32"
	if dt == numerics.BF16 {
		op = "cvt.rn.bf16.f32"
	}
	e.op(op, h, y)
	if !canon {
		return h
	}
	p, cn, c := e.reg("p"), e.reg("h"), e.reg("h")
	e.op("setp.nan.f32", p, y, y)
	e.op("mov.b16", cn, fmt.Sprintf("0x%04X", narrowOf[dt].nan))
	e.op("selp.b16", c, cn, h, p)
	return c
}

// pack rounds two f32 values to 16 bits and packs them into a word, lo at the lower address.
// cvt.rn.{bf16,f16}x2.f32 d, a, b puts a in the upper half and b in the lower.
func (g *rowsGen) pack(dt numerics.DType, lo, hi string, canon bool) string {
	e := g.e
	d := e.reg("r")
	if !canon {
		op := "cvt.rn.f16x2.f32"
		if dt == numerics.BF16 {
			op = "cvt.rn.bf16x2.f32"
		}
		e.op(op, d, hi, lo)
		return d
	}
	a, b, s := e.reg("r"), e.reg("r"), e.reg("r")
	e.op("cvt.u32.u16", a, g.half(dt, lo, true))
	e.op("cvt.u32.u16", b, g.half(dt, hi, true))
	e.op("shl.b32", s, b, "16")
	e.op("or.b32", d, s, a)
	return d
}
