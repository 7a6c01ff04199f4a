package ptx

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/tessera-qa/tessera-qa/engine/compiler/tile"
	"github.com/tessera-qa/tessera-qa/engine/fftplan"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

// The FFT on the SIMT path. A tile.FFT runs inside the kernel's CTA (one CTA per block of
// rows, as every SIMT kernel): its first pass reads the source (the tile register, or global
// memory as the Load before it would), its last pass writes the destination (the tile, or
// global memory as the Store after it would), the rows in between live in work buffers in
// shared memory or, when they do not fit, in global scratch the launcher allocates
// (fft_work.go), and its tables are engine/fftplan's, uploaded by the launcher. It mirrors the
// reference executor (fftplan.Plan.Forward) operation for operation, which is what makes the
// GPU's bits the CPU's (docs/spectral.md):
//
//   - the recursive decimation in time becomes one Stockham pass per radix, innermost first:
//     pass l combines, for every offset o < s_l = r_0...r_(l-1) and k < m = N/(s_l r_l), the
//     r sub-transforms that the recursion would have returned for offsets o + j s_l, and writes
//     the r outputs where the recursion's out slice lies (o*m*r + k + m*q); the leaves are the
//     input in natural order, so there is no bit reversal;
//   - each butterfly is the reference's expression tree: the same twiddle (tw[j k s_l], read
//     from the uploaded table; the constant ones of a prime radix are the table's bits as
//     immediates), the same multiplications by exact ones, the same order of additions;
//   - a complex product is Go's: (ac - bd) + (ad + bc)i with each product and sum rounded, and,
//     for complex64, computed in float64 and rounded to f32 once at the end (the Go compiler
//     widens complex64 multiplies "to minimize cancellation error"), so the f32 path widens too;
//   - .rn everywhere: ptxas never contracts a product and a sum into an FMA.
//
// One thread per butterfly, a barrier between passes, 256 threads a CTA or more for FFT-only
// kernels of small radices (fftThreads). What a row costs: docs/spectral.md.

// fftTable is the form of a plan the generator emits: every value an exact widening of the
// working precision's.
type fftTable struct {
	n       int
	radices []int
	tw      []complex128
	m       int // Bluestein length, 0 for a smooth n
	chirp   []complex128
	bfft    []complex128
	sub     *fftTable
}

// work is the width of a row's work buffers: n, or the Bluestein length.
func (t *fftTable) work() int {
	if t.m > 0 {
		return t.m
	}
	return max(t.n, 1)
}

func fftComplexBytes(dt numerics.DType) int {
	if dt == numerics.F64 {
		return 16
	}
	return 8
}

// cx is a complex value in two registers of the working precision.
type cx struct{ re, im string }

// fftGen emits one tile.FFT.
type fftGen struct {
	g    *gen
	x    tile.FFT
	wide bool
	t    string // "f32" or "f64"
	cls  string // register class
	esz  int    // bytes of one component
	rows int
	w    int // complex values in a row of a work buffer

	// The Load and Store the FFT took over (fft_work.go), and their accesses' start
	// expressions; nil when it reads and writes the tiles.
	load       *tile.Load
	store      *tile.Store
	ldAt, stAt [3]string
}

// wbuf is a work buffer: the address of its first byte, in shared memory (.u32) or in global
// scratch (.u64).
type wbuf struct {
	shared bool
	base   string
}

// reader and writer are the two ends of a pass: element k of a row of the transform.
type (
	reader func(row, k string) cx
	writer func(row, k string, z cx)
)

func (g *gen) fft(x tile.FFT) error {
	f := &fftGen{g: g, x: x, wide: x.DType == numerics.F64, t: "f32", cls: "f", esz: 4, rows: g.shapes[x.Src][0]}
	if f.wide {
		f.t, f.cls, f.esz = "f64", "fd", 8
	}
	tab := fftTableOf(x.N, f.wide)
	f.w = tab.work()
	plan, ok := g.fftWork.plans[g.pc-1]
	if !ok {
		return g.unsupported("fft: no work-buffer plan (generator bug)")
	}
	if plan.load != nil {
		f.load = plan.load
		f.ldAt[0], f.ldAt[1], f.ldAt[2] = g.accessExprs(f.load.At)
	}
	if plan.store != nil {
		st := storeFaults(*plan.store)
		f.store = &st
		f.stAt[0], f.stAt[1], f.stAt[2] = g.accessExprs(st.At)
	}
	bufs := make([]wbuf, len(plan.bufs))
	for i, b := range plan.bufs {
		bufs[i] = f.buffer(b, plan)
	}
	// The chain of passes; Bluestein's pointwise step rides on its first transform's last
	// pass (mid), its final chirp on the second's.
	var steps []func(reader, writer)
	mid := -1
	switch {
	case tab.m > 0:
		steps = append(f.passes(tab.sub), f.passes(tab.sub)...)
		mid = len(tab.sub.radices) - 1
	case x.N > 1:
		steps = f.passes(tab)
	default:
		steps = []func(reader, writer){f.copyStep}
	}
	e := g.e
	in, out := f.input(tab), f.output(tab)
	for i, step := range steps {
		rd, wr := in, out
		if i > 0 {
			rd = f.bufReader(bufs[i-1])
		}
		if i < len(steps)-1 {
			wr = f.bufWriter(bufs[i])
		}
		if i == mid {
			wr = f.bluesteinMiddle(tab, wr)
		}
		step(rd, wr)
		if i < len(steps)-1 {
			e.op("bar.sync", "0") // the body's barrier follows the last
		}
	}
	return nil
}

// buffer resolves one entry of a work plan to its address.
func (f *fftGen) buffer(b int, plan fftWork) wbuf {
	g := f.g
	switch b {
	case fftBufSrc:
		return wbuf{true, g.regBase(f.x.Src)}
	case fftBufDst:
		return wbuf{true, g.regBase(f.x.Dst)}
	}
	off := (b - fftBufExtra) * plan.bytes
	if plan.shared {
		a := g.e.reg("r")
		g.pro.op("add.s32", a, g.smem, itoa(g.fftWork.sharedOff+off))
		return wbuf{true, a}
	}
	a := g.e.reg("rd")
	g.pro.op("add.s64", a, g.scratchBase(), itoa(off))
	return wbuf{false, a}
}

// scratchBase is this CTA's scratch region: the kernel's scratch buffer plus ctaid times the
// per-CTA size, computed once in the prologue.
func (g *gen) scratchBase() string {
	if g.scratch != "" {
		return g.scratch
	}
	per := g.fftWork.scratch
	buf := g.extraParam(Extra{Name: "fft scratch", Bytes: per * gridTotal(g.k.Grid)})
	cta, off := g.pro.reg("r"), g.pro.reg("rd")
	g.pro.op("mov.u32", cta, "%ctaid.x")
	g.pro.op("mul.wide.s32", off, cta, itoa(per))
	g.scratch = g.pro.reg("rd")
	g.pro.op("add.s64", g.scratch, buf, off)
	return g.scratch
}

// fftOps are the instruction forms the FFT adds to the emitter's table: complex pairs as
// one vector access, and the read-only path for its tables.
var fftOps = []string{
	"ld.shared.v2.f32", "st.shared.v2.f32", "ld.shared.v2.f64", "st.shared.v2.f64",
	"ld.global.v2.f32", "st.global.v2.f32", "ld.global.v2.f64", "st.global.v2.f64",
	"ld.global.nc.v2.f32", "ld.global.nc.v2.f64",
}

func init() {
	for _, op := range fftOps {
		knownOps[op] = true
	}
}

// table returns the global address of an uploaded table of complex values in the working
// precision.
func (f *fftGen) table(what string, n int, v []complex128) string {
	name := fmt.Sprintf("fft %s n=%d %s", what, n, f.t)
	b := make([]byte, 0, len(v)*2*f.esz)
	for _, z := range v {
		if f.wide {
			b = appendF64(b, real(z), imag(z))
		} else {
			b = appendF32(b, float32(real(z)), float32(imag(z)))
		}
	}
	return f.g.extraParam(Extra{Name: name, Bytes: len(b), Data: b})
}

// addr is base + i*size as a 64-bit address (i an .s32 register).
func (f *fftGen) addr(base, i string, size int) string {
	e := f.g.e
	o, a := e.reg("rd"), e.reg("rd")
	e.op("mul.wide.s32", o, i, itoa(size))
	e.op("add.s64", a, base, o)
	return a
}

func (f *fftGen) pair(z cx) string { return "{" + z.re + "," + z.im + "}" }

// ldTable reads one complex entry of an uploaded table through the read-only data path (the
// tables never change while a kernel runs).
func (f *fftGen) ldTable(base, k string) cx {
	e := f.g.e
	z := cx{e.reg(f.cls), e.reg(f.cls)}
	e.op("ld.global.nc.v2."+f.t, f.pair(z), "["+f.addr(base, k, 2*f.esz)+"]")
	return z
}

// waddr is the address of complex element k of row row of work buffer b, and its state space.
func (f *fftGen) waddr(b wbuf, row, k string) (string, string) {
	i := f.g.lin(row, f.w, k)
	if b.shared {
		a := f.g.e.reg("r")
		f.g.e.op("mad.lo.s32", a, i, itoa(2*f.esz), b.base)
		return a, "shared"
	}
	return f.addr(b.base, i, 2*f.esz), "global"
}

func (f *fftGen) bufReader(b wbuf) reader {
	return func(row, k string) cx {
		e := f.g.e
		a, space := f.waddr(b, row, k)
		z := cx{e.reg(f.cls), e.reg(f.cls)}
		e.op("ld."+space+".v2."+f.t, f.pair(z), "["+a+"]")
		return z
	}
}

func (f *fftGen) bufWriter(b wbuf) writer {
	return func(row, k string, z cx) {
		a, space := f.waddr(b, row, k)
		f.g.e.op("st."+space+".v2."+f.t, "["+a+"]", f.pair(z))
	}
}

func (f *fftGen) bin(op, a, b string) string {
	d := f.g.e.reg(f.cls)
	f.g.e.op(op+".rn."+f.t, d, a, b)
	return d
}

func (f *fftGen) neg(a string) string {
	d := f.g.e.reg(f.cls)
	f.g.e.op("neg."+f.t, d, a)
	return d
}

func (f *fftGen) add(a, b cx) cx { return cx{f.bin("add", a.re, b.re), f.bin("add", a.im, b.im)} }
func (f *fftGen) sub(a, b cx) cx { return cx{f.bin("sub", a.re, b.re), f.bin("sub", a.im, b.im)} }
func (f *fftGen) conj(a cx) cx   { return cx{a.re, f.neg(a.im)} }

// mulNegI is -i*z = (im, -re), exact, as the reference's radix-4 butterfly takes it.
func (f *fftGen) mulNegI(a cx) cx { return cx{a.im, f.neg(a.re)} }

// mul is Go's complex product: (ac - bd) + (ad + bc)i; complex64 computes it in float64 and
// rounds each part to f32 once (products of two f32 are exact in f64, the sums are not).
func (f *fftGen) mul(a, b cx) cx {
	e := f.g.e
	w := func(r string) string {
		if f.wide {
			return r
		}
		d := e.reg("fd")
		e.op("cvt.f64.f32", d, r)
		return d
	}
	ar, ai, br, bi := w(a.re), w(a.im), w(b.re), w(b.im)
	op := func(o, x, y string) string {
		d := e.reg("fd")
		e.op(o+".rn.f64", d, x, y)
		return d
	}
	re := op("sub", op("mul", ar, br), op("mul", ai, bi))
	im := op("add", op("mul", ar, bi), op("mul", ai, br))
	if f.wide {
		return cx{re, im}
	}
	nr, ni := e.reg("f"), e.reg("f")
	e.op("cvt.rn.f32.f64", nr, re)
	e.op("cvt.rn.f32.f64", ni, im)
	return cx{nr, ni}
}

// constant is a complex value of the working precision as immediates (exact: v already is one).
func (f *fftGen) constant(v complex128) cx {
	e := f.g.e
	lit := func(x float64) string {
		if f.wide {
			return f64lit(x)
		}
		return f32lit(float32(x))
	}
	z := cx{e.reg(f.cls), e.reg(f.cls)}
	e.op("mov."+f.t, z.re, lit(real(v)))
	e.op("mov."+f.t, z.im, lit(imag(v)))
	return z
}

// srcAt reads column c of the source tile's row, rounded to the working precision as the
// reference's row loader does.
func (f *fftGen) srcAt(row string, c string) string {
	g := f.g
	cols := g.shapes[f.x.Src][1]
	var v val
	if f.load != nil {
		v = g.loadElem(*f.load, f.ldAt[0], f.ldAt[1], f.ldAt[2], g.lin(row, cols, c))
	} else {
		v = g.read(f.x.Src, g.lin(row, cols, c))
	}
	if f.wide {
		return g.f64of(v)
	}
	return g.f32of(v)
}

// srcPair reads columns c and c+1 (c even: a complex value) of the source row, as two srcAt
// would; from global memory with one element's arithmetic and one vector load where the
// access allows (gen.pairAccess).
func (f *fftGen) srcPair(row, c string) cx {
	g := f.g
	if f.load == nil || !g.pairAccess(f.load.At) {
		return cx{f.srcAt(row, c), f.srcAt(row, g.bin32("add.s32", c, "1"))}
	}
	re, im := g.loadPair(*f.load, f.ldAt[0], f.ldAt[1], f.ldAt[2], g.lin(row, g.shapes[f.x.Src][1], c))
	if f.wide {
		return cx{g.f64of(re), g.f64of(im)}
	}
	return cx{g.f32of(re), g.f32of(im)}
}

// putPair writes elements idx and idx+1 (idx even) of the destination, as two put would.
func (f *fftGen) putPair(idx string, v0, v1 val) {
	g := f.g
	if f.store == nil || !g.pairAccess(f.store.At) {
		f.put(idx, v0)
		f.put(g.bin32("add.s32", idx, "1"), v1)
		return
	}
	g.storePair(*f.store, f.stAt[0], f.stAt[1], f.stAt[2], idx, v0, v1)
}

// put writes element idx of the destination tile, or stores it as the Store would.
func (f *fftGen) put(idx string, v val) {
	if f.store != nil {
		f.g.storeElem(*f.store, f.stAt[0], f.stAt[1], f.stAt[2], idx, v)
		return
	}
	f.g.write(f.x.Dst, idx, v)
}

func (f *fftGen) imm(c int) string { return f.g.mov32(itoa(c)) }

// input reads element k of a row's transform input straight from the source tile, as the
// reference prepares it: the complex row (conjugated for the inverses, which the reference
// computes as conj(F(conj x))), the real row with +0 imaginary parts, or the Hermitian
// extension of a c2r row; for Bluestein multiplied by the chirp, +0 past the row's n points.
func (f *fftGen) input(tab *fftTable) reader {
	g, e, n := f.g, f.g.e, f.x.N
	inverse := f.x.Kind == tile.FFTInverse || f.x.Kind == tile.FFTC2R
	var chirp string
	if tab.m > 0 {
		chirp = f.table("chirp", n, tab.chirp)
	}
	at := func(row, k string) cx {
		var z cx
		switch f.x.Kind {
		case tile.FFTForward, tile.FFTInverse:
			z = f.srcPair(row, g.bin32("shl.b32", k, "1"))
		case tile.FFTR2C:
			z = cx{f.srcAt(row, k), f.constant(0).re}
		case tile.FFTC2R:
			// Bin j = k for k <= n/2, else n-k conjugated; bin 0's and an even n's bin n/2's
			// imaginary parts read as +0.
			hi := e.reg("p")
			e.op("setp.gt.s32", hi, k, itoa(n/2))
			j := e.reg("r")
			e.op("selp.b32", j, g.bin32("sub.s32", f.imm(n), k), k, hi)
			p := f.srcPair(row, g.bin32("shl.b32", j, "1"))
			re, im := p.re, p.im
			zero := e.reg("p")
			e.op("setp.eq.u32", zero, j, "0")
			if n%2 == 0 {
				mid := e.reg("p")
				e.op("setp.eq.u32", mid, j, itoa(n/2))
				e.op("or.pred", zero, zero, mid)
			}
			im0 := e.reg(f.cls)
			e.op("selp."+f.t, im0, f.constant(0).re, im, zero)
			// a[n-k] = conj(a[k]); the inverse then conjugates every element once more.
			imc := e.reg(f.cls)
			e.op("selp."+f.t, imc, f.neg(im0), im0, hi)
			z = cx{re, imc}
		}
		if inverse {
			z = f.conj(z)
		}
		if tab.m > 0 {
			z = f.mul(z, f.ldTable(chirp, k))
		}
		return z
	}
	if tab.work() == n {
		return at
	}
	return func(row, k string) cx {
		// The source holds n points: past them the value is +0, and nothing is read.
		z := f.constant(0)
		outside := e.reg("p")
		e.op("setp.ge.s32", outside, k, itoa(n))
		skip := e.label()
		e.opIf(outside, "bra", skip)
		v := at(row, k)
		e.op("mov."+f.t, z.re, v.re)
		e.op("mov."+f.t, z.im, v.im)
		e.place(skip)
		return z
	}
}

// output writes element k of a row's transform to the destination tile, as the reference
// finishes it: Bluestein's final chirp (conj(a_k) * (1/m) * c_k), the inverses' conjugation,
// the scale when it is not 1, then complex pairs, or real parts for c2r; an r2c row's bin 0
// and even-n bin n/2 get an exact +0 imaginary part. Elements past the kind's output (the
// bins r2c drops, Bluestein's tail) are not written.
func (f *fftGen) output(tab *fftTable) writer {
	g, e, n := f.g, f.g.e, f.x.N
	inverse := f.x.Kind == tile.FFTInverse || f.x.Kind == tile.FFTC2R
	_, outCols := tile.FFTCols(f.x.Kind, n)
	count := outCols / 2
	if f.x.Kind == tile.FFTC2R {
		count = n
	}
	var chirp string
	if tab.m > 0 {
		chirp = f.table("chirp", n, tab.chirp)
	}
	scale := f.x.Scale
	if !f.wide {
		scale = float64(float32(scale))
	}
	return func(row, k string, z cx) {
		if count < tab.work() {
			past := e.reg("p")
			e.op("setp.ge.s32", past, k, itoa(count))
			skip := e.label()
			e.opIf(past, "bra", skip)
			defer e.place(skip)
		}
		if tab.m > 0 {
			z = f.mul(f.mul(f.conj(z), f.constant(complex(1/float64(tab.m), 0))), f.ldTable(chirp, k))
		}
		if inverse {
			z = f.conj(z)
		}
		if scale != 1 {
			z = f.mul(z, f.constant(complex(scale, 0)))
		}
		if f.x.Kind == tile.FFTC2R {
			f.put(g.lin(row, outCols, k), val{z.re, !f.wide})
			return
		}
		im := z.im
		if f.x.Kind == tile.FFTR2C {
			zero := e.reg("p")
			e.op("setp.eq.u32", zero, k, "0")
			if n%2 == 0 {
				mid := e.reg("p")
				e.op("setp.eq.u32", mid, k, itoa(n/2))
				e.op("or.pred", zero, zero, mid)
			}
			im = e.reg(f.cls)
			e.op("selp."+f.t, im, f.constant(0).re, z.im, zero)
		}
		f.putPair(g.lin(row, outCols, g.bin32("shl.b32", k, "1")), val{z.re, !f.wide}, val{im, !f.wide})
	}
}

// copyStep is the whole chain of a length-1 transform: input to output.
func (f *fftGen) copyStep(rd reader, wr writer) {
	f.g.forEach(f.rows, func(row string) {
		k := f.imm(0)
		wr(row, k, rd(row, k))
	})
}

// passes returns plan tab's Stockham passes, innermost radix first.
func (f *fftGen) passes(tab *fftTable) []func(reader, writer) {
	var out []func(reader, writer)
	for l := len(tab.radices) - 1; l >= 0; l-- {
		out = append(out, func(rd reader, wr writer) { f.pass(tab, l, rd, wr) })
	}
	return out
}

// pass is Stockham pass l of plan tab on every row, one thread per butterfly.
func (f *fftGen) pass(tab *fftTable, l int, rd reader, wr writer) {
	g, e, n := f.g, f.g.e, tab.n
	tw := f.table("twiddles", n, tab.tw)
	r := tab.radices[l]
	s := 1
	for _, q := range tab.radices[:l] {
		s *= q
	}
	m := n / (s * r)
	e.comment("fft n=%d pass %d: radix %d, %d offsets x %d points", n, l, r, s, m)
	g.forEach(f.rows*(n/r), func(idx string) {
		row, b := g.rowCol(idx, n/r)
		o, k := g.rowCol(b, m)
		y := make([]cx, r)
		for j := range r {
			// (o + j*s)*m + k
			y[j] = rd(row, g.lin(g.bin32("add.s32", o, itoa(j*s)), m, k))
		}
		ks := g.bin32("mul.lo.s32", k, itoa(s))
		twj := func(j int) cx { return f.ldTable(tw, g.bin32("mul.lo.s32", ks, itoa(j))) }
		outs := make([]cx, r)
		switch r {
		case 2:
			a, bb := y[0], f.mul(y[1], twj(1))
			outs[0], outs[1] = f.add(a, bb), f.sub(a, bb)
		case 4:
			a, bb, c, d := y[0], f.mul(y[1], twj(1)), f.mul(y[2], twj(2)), f.mul(y[3], twj(3))
			s0, s1 := f.add(a, c), f.sub(a, c)
			s2, s3 := f.add(bb, d), f.sub(bb, d)
			s3 = f.mulNegI(s3)
			outs[0], outs[1], outs[2], outs[3] = f.add(s0, s2), f.add(s1, s3), f.sub(s0, s2), f.sub(s1, s3)
		default:
			buf := make([]cx, r)
			buf[0] = y[0]
			for j := 1; j < r; j++ {
				buf[j] = f.mul(y[j], twj(j))
			}
			wr := n / r
			for q := range r {
				acc := buf[0]
				for j := 1; j < r; j++ {
					acc = f.add(acc, f.mul(buf[j], f.constant(tab.tw[(j*q%r)*wr])))
				}
				outs[q] = acc
			}
		}
		base := g.lin(o, m*r, k)
		for q := range r {
			wr(row, g.bin32("add.s32", base, itoa(m*q)), outs[q])
		}
	})
}

// bluesteinMiddle wraps the first transform's last writer with the pointwise step between
// Bluestein's two transforms: multiply by the chirp filter's transform, conjugate (the
// inverse transform by conjugation).
func (f *fftGen) bluesteinMiddle(tab *fftTable, wr writer) writer {
	bf := f.table("bluestein filter", f.x.N, tab.bfft)
	return func(row, k string, z cx) {
		wr(row, k, f.conj(f.mul(z, f.ldTable(bf, k))))
	}
}

func (g *gen) bin32(op, a, b string) string {
	d := g.e.reg("r")
	g.e.op(op, d, a, b)
	return d
}

func (g *gen) mov32(v string) string {
	d := g.e.reg("r")
	g.e.op("mov.u32", d, v)
	return d
}

// extraParam returns the global address of the launcher-provided buffer x (one per name),
// declared as the next entry param after the kernel's own and loaded in the prologue.
func (g *gen) extraParam(x Extra) string {
	for i, have := range g.extra {
		if have.Name == x.Name {
			return g.extraAddr[i]
		}
	}
	idx := len(g.k.Params) + len(g.extra)
	raw, glob := g.pro.reg("rd"), g.pro.reg("rd")
	g.pro.op("ld.param.u64", raw, fmt.Sprintf("[%s_p%d]", g.entry, idx))
	g.pro.op("cvta.to.global.u64", glob, raw)
	g.extra = append(g.extra, x)
	g.extraAddr = append(g.extraAddr, glob)
	return glob
}

func fftTableOf(n int, wide bool) *fftTable {
	if wide {
		return fftTableFrom(fftplan.For[complex128](n))
	}
	return fftTableFrom(fftplan.For[complex64](n))
}

func fftTableFrom[C fftplan.Complex](p *fftplan.Plan[C]) *fftTable {
	widen := func(v []C) []complex128 {
		out := make([]complex128, len(v))
		for i, z := range v {
			out[i] = complex128(z)
		}
		return out
	}
	t := &fftTable{n: p.N, radices: p.Radices, tw: widen(p.Tw), m: p.M, chirp: widen(p.Chirp), bfft: widen(p.BFFT)}
	if p.Sub != nil {
		t.sub = fftTableFrom(p.Sub)
	}
	return t
}

func appendF32(b []byte, v ...float32) []byte {
	for _, x := range v {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(x))
	}
	return b
}

func appendF64(b []byte, v ...float64) []byte {
	for _, x := range v {
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(x))
	}
	return b
}
