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
// rows, as every SIMT kernel): its source and destination are tile registers in shared memory,
// its work is two ping-pong buffers per row in global scratch that the launcher allocates
// (Module.Extra), and its tables are engine/fftplan's, uploaded by the launcher. It mirrors the
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
// Speed is secondary here: every pass goes through global memory (L2 on a GPU), one thread per
// butterfly, 256 threads a CTA.

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

// fftScratchPerCTA is the global scratch one CTA needs for the FFTs of kernel k: two work
// buffers per tile row, the largest FFT's (they run one after another).
func fftScratchPerCTA(k *tile.Kernel, shapes []tile.Shape) int {
	most := 0
	walk(k.Body, func(in tile.Instr) {
		if x, ok := in.(tile.FFT); ok {
			t := fftTableOf(x.N, x.DType == numerics.F64)
			most = max(most, 2*shapes[x.Src][0]*t.work()*fftComplexBytes(x.DType))
		}
	})
	return most
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
}

func (g *gen) fft(x tile.FFT) error {
	f := &fftGen{g: g, x: x, wide: x.DType == numerics.F64, t: "f32", cls: "f", esz: 4, rows: g.shapes[x.Src][0]}
	if f.wide {
		f.t, f.cls, f.esz = "f64", "fd", 8
	}
	tab := fftTableOf(x.N, f.wide)
	w := tab.work()
	bufA := g.scratchBase()
	bufB := g.e.reg("rd")
	g.e.op("add.s64", bufB, bufA, itoa(f.rows*w*2*f.esz))
	f.prep(tab, bufA)
	cur, other := bufA, bufB
	if tab.m > 0 {
		cur, other = f.passes(tab.sub, w, cur, other)
		f.bluesteinMiddle(tab, cur)
		cur, _ = f.passes(tab.sub, w, cur, other)
	} else if x.N > 1 {
		cur, _ = f.passes(tab, w, cur, other)
	}
	f.post(tab, cur)
	return nil
}

// scratchBase is this CTA's scratch region: the kernel's scratch buffer plus ctaid times the
// per-CTA size, computed once in the prologue.
func (g *gen) scratchBase() string {
	if g.scratch != "" {
		return g.scratch
	}
	buf := g.extraParam(Extra{Name: "fft scratch", Bytes: g.scratchPerCTA * gridTotal(g.k.Grid)})
	cta, off := g.pro.reg("r"), g.pro.reg("rd")
	g.pro.op("mov.u32", cta, "%ctaid.x")
	g.pro.op("mul.wide.s32", off, cta, itoa(g.scratchPerCTA))
	g.scratch = g.pro.reg("rd")
	g.pro.op("add.s64", g.scratch, buf, off)
	return g.scratch
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

func (f *fftGen) ld(a string) cx {
	e := f.g.e
	z := cx{e.reg(f.cls), e.reg(f.cls)}
	e.op("ld.global."+f.t, z.re, "["+a+"]")
	e.op("ld.global."+f.t, z.im, "["+a+"+"+itoa(f.esz)+"]")
	return z
}

func (f *fftGen) st(a string, z cx) {
	e := f.g.e
	e.op("st.global."+f.t, "["+a+"]", z.re)
	e.op("st.global."+f.t, "["+a+"+"+itoa(f.esz)+"]", z.im)
}

// elem is the address of complex element k of row row of a work buffer of width w.
func (f *fftGen) elem(buf, row string, w int, k string) string {
	return f.addr(buf, f.g.lin(row, w, k), 2*f.esz)
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
	v := g.read(f.x.Src, g.lin(row, cols, c))
	if f.wide {
		return g.f64of(v)
	}
	return g.f32of(v)
}

func (f *fftGen) imm(c int) string { return f.g.mov32(itoa(c)) }

// prep writes every row's transform input into buf: the complex row (conjugated for the
// inverses, which the reference computes as conj(F(conj x))), the real row with +0 imaginary
// parts, or the Hermitian extension of a c2r row; for Bluestein multiplied by the chirp, the
// tail to the convolution length zero.
func (f *fftGen) prep(tab *fftTable, buf string) {
	g, e, n := f.g, f.g.e, f.x.N
	w := tab.work()
	inverse := f.x.Kind == tile.FFTInverse || f.x.Kind == tile.FFTC2R
	var chirp string
	if tab.m > 0 {
		chirp = f.table("chirp", n, tab.chirp)
	}
	g.forEach(f.rows*w, func(idx string) {
		row, k := g.rowCol(idx, w)
		out := f.elem(buf, row, w, k)
		var inside string
		if w > n {
			inside = e.reg("p")
			e.op("setp.lt.s32", inside, k, itoa(n))
			skip, done := e.label(), e.label()
			e.opIf("!"+inside, "bra", skip)
			defer func() {
				e.op("bra", done)
				e.place(skip)
				f.st(out, f.constant(0))
				e.place(done)
			}()
		}
		var z cx
		switch f.x.Kind {
		case tile.FFTForward, tile.FFTInverse:
			c := g.bin32("shl.b32", k, "1")
			z = cx{f.srcAt(row, c), f.srcAt(row, g.bin32("add.s32", c, "1"))}
		case tile.FFTR2C:
			z = cx{f.srcAt(row, k), f.constant(0).re}
		case tile.FFTC2R:
			// Bin j = k for k <= n/2, else n-k conjugated; bin 0's and an even n's bin n/2's
			// imaginary parts read as +0.
			hi := e.reg("p")
			e.op("setp.gt.s32", hi, k, itoa(n/2))
			j := e.reg("r")
			e.op("selp.b32", j, g.bin32("sub.s32", f.imm(n), k), k, hi)
			c := g.bin32("shl.b32", j, "1")
			re, im := f.srcAt(row, c), f.srcAt(row, g.bin32("add.s32", c, "1"))
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
			z = f.mul(z, f.ld(f.addr(chirp, k, 2*f.esz)))
		}
		f.st(out, z)
	})
	e.op("bar.sync", "0")
}

// passes runs plan tab's Stockham passes on every row (width w) from cur, ping-ponging with
// other; it returns the buffer holding the result and the free one.
func (f *fftGen) passes(tab *fftTable, w int, cur, other string) (string, string) {
	g, e, n := f.g, f.g.e, tab.n
	tw := f.table("twiddles", n, tab.tw)
	for l := len(tab.radices) - 1; l >= 0; l-- {
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
				at := g.lin(g.bin32("add.s32", o, itoa(j*s)), m, k)
				y[j] = f.ld(f.elem(cur, row, w, at))
			}
			ks := g.bin32("mul.lo.s32", k, itoa(s))
			twj := func(j int) cx { return f.ld(f.addr(tw, g.bin32("mul.lo.s32", ks, itoa(j)), 2*f.esz)) }
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
				f.st(f.elem(other, row, w, g.bin32("add.s32", base, itoa(m*q))), outs[q])
			}
		})
		e.op("bar.sync", "0")
		cur, other = other, cur
	}
	return cur, other
}

// bluesteinMiddle is the pointwise step between Bluestein's two transforms: multiply by the
// chirp filter's transform, conjugate (the inverse transform by conjugation), in place.
func (f *fftGen) bluesteinMiddle(tab *fftTable, buf string) {
	g, w := f.g, tab.work()
	bf := f.table("bluestein filter", f.x.N, tab.bfft)
	g.forEach(f.rows*w, func(idx string) {
		row, k := g.rowCol(idx, w)
		a := f.elem(buf, row, w, k)
		f.st(a, f.conj(f.mul(f.ld(a), f.ld(f.addr(bf, k, 2*f.esz)))))
	})
	g.e.op("bar.sync", "0")
}

// post writes the destination tile from the transform in buf: Bluestein's final chirp
// (conj(a_k) * (1/m) * c_k), the inverses' conjugation, the scale when it is not 1, then
// complex pairs, or real parts for c2r; an r2c row's bin 0 and even-n bin n/2 get an exact +0
// imaginary part.
func (f *fftGen) post(tab *fftTable, buf string) {
	g, e, n := f.g, f.g.e, f.x.N
	w := tab.work()
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
	g.forEach(f.rows*count, func(idx string) {
		row, k := g.rowCol(idx, count)
		z := f.ld(f.elem(buf, row, w, k))
		if tab.m > 0 {
			z = f.mul(f.mul(f.conj(z), f.constant(complex(1/float64(tab.m), 0))), f.ld(f.addr(chirp, k, 2*f.esz)))
		}
		if inverse {
			z = f.conj(z)
		}
		if scale != 1 {
			z = f.mul(z, f.constant(complex(scale, 0)))
		}
		if f.x.Kind == tile.FFTC2R {
			g.write(f.x.Dst, g.lin(row, outCols, k), val{z.re, !f.wide})
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
		c := g.bin32("shl.b32", k, "1")
		g.write(f.x.Dst, g.lin(row, outCols, c), val{z.re, !f.wide})
		g.write(f.x.Dst, g.lin(row, outCols, g.bin32("add.s32", c, "1")), val{im, !f.wide})
	})
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
