package ptx

import (
	"os"
	"strconv"
	"strings"

	"github.com/tessera-qa/tessera-qa/engine/compiler/tile"
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

// Where an FFT keeps the rows between its Stockham passes. The first pass reads the source
// and the last writes the destination themselves (fft.go), so a chain of T passes needs T-1
// intermediate buffers b_1..b_(T-1), each different from the one before (a pass is out of
// place) and the last different from the destination tile (unless the last pass writes
// global memory itself). They come, cheapest first, from
//
//   - the source tile's own shared memory, once the first pass has read it, when the kernel
//     does not read the source after the FFT and its bytes hold a work buffer (c2c rows do);
//   - the destination tile's shared memory before the last pass writes it, when it is big
//     enough;
//   - at most two extra buffers: in shared memory beside the tile registers when they fit
//     there, else in the global scratch the launcher allocates (Module.Extra, per CTA).
//
// A buffer is rows x work() complex values of the working precision, row-major.

// fftSharedWork lets the tests force the global-scratch fallback on kernels whose buffers
// would fit in shared memory, so both paths are checked against the CPU.
var fftSharedWork = true

const (
	fftBufSrc   = -1
	fftBufDst   = -2
	fftBufExtra = 0 // extra buffer i is fftBufExtra + i
)

// fftWork is the buffer plan of one tile.FFT.
type fftWork struct {
	bufs   []int // b_1..b_(T-1)
	extras int   // extra buffers the plan uses
	bytes  int   // bytes of one buffer
	shared bool  // the extras live in shared memory (at fftKernelWork.sharedOff)
	// The Load right before that defines the source and the Store right after that reads
	// the destination, when nothing else reads those tiles: the first pass then reads global
	// memory as the Load would (tile.Load's element semantics, gen.loadElem), the last pass
	// writes it as the Store would, and neither tile round trip happens.
	load  *tile.Load
	store *tile.Store

	passes   int
	srcDead  bool
	src, dst tile.Reg
}

// fftKernelWork is the plan of every FFT of a kernel, keyed by the instruction's pre-order
// number (liveRanges' numbering), and where their extra buffers live.
type fftKernelWork struct {
	plans     map[int]fftWork
	skip      map[int]bool      // pre-order numbers of the Loads and Stores an FFT took over
	absent    map[tile.Reg]bool // tiles no instruction touches: the layout gives them no bytes
	shared    bool              // extras may go to shared memory (fftOptions)
	sharedOff int               // offset of the extras in shared memory, when shared
	scratch   int               // global scratch bytes a CTA, when not
}

// fftPasses is the length of an FFT's pass chain: one per radix, both of Bluestein's
// transforms, and a single copy step for a length-1 transform.
func fftPasses(t *fftTable) int {
	switch {
	case t.m > 0:
		return 2 * len(t.sub.radices)
	case t.n <= 1:
		return 1
	}
	return len(t.radices)
}

// planFFTWork finds every FFT of kernel k and decides, before the layout, which Loads and
// Stores it takes over (and so which tiles need no shared memory); place then picks the
// buffers.
func planFFTWork(k *tile.Kernel, shapes []tile.Shape, o fftOptions) fftKernelWork {
	kw := fftKernelWork{plans: map[int]fftWork{}, skip: map[int]bool{}, absent: map[tile.Reg]bool{}, shared: o.shared}
	iv := liveRanges(k)
	pc := 0
	var visit func(body []tile.Instr)
	visit = func(body []tile.Instr) {
		for i, in := range body {
			my := pc
			pc++
			if f, ok := in.(tile.For); ok {
				visit(f.Body)
				continue
			}
			x, ok := in.(tile.FFT)
			if !ok {
				continue
			}
			t := fftTableOf(x.N, x.DType == numerics.F64)
			w := fftWork{bytes: shapes[x.Src][0] * t.work() * fftComplexBytes(x.DType), passes: fftPasses(t), srcDead: iv[x.Src].end == my}
			// The first pass of a wide radix already holds its inputs and twiddles in nearly
			// every register; the access arithmetic on top would spill.
			first, last := fftEndRadices(t)
			if ld, ok := at[tile.Load](body, i-1); ok && ld.Dst == x.Src && w.srcDead && first <= fftFuseRadix && o.fuse {
				w.load = &ld
				kw.skip[my-1] = true
			}
			if st, ok := at[tile.Store](body, i+1); ok && st.Src == x.Dst && iv[x.Dst].end == my+1 && last <= fftFuseRadix && o.fuse {
				w.store = &st
				kw.skip[my+1] = true
			}
			if w.load != nil && w.store != nil {
				// Neither tile is ever touched: the layout leaves them out, the work
				// buffers take their place.
				kw.absent[x.Src], kw.absent[x.Dst] = true, true
			}
			w.src, w.dst = x.Src, x.Dst
			kw.plans[my] = w
		}
	}
	visit(k.Body)
	return kw
}

// fftFuseRadix is the widest radix whose pass also does a Load's or Store's element work.
const fftFuseRadix = 5

// fftEndRadices are the radices of the first and last pass of a chain.
func fftEndRadices(t *fftTable) (first, last int) {
	switch {
	case t.m > 0:
		t = t.sub
	case t.n <= 1:
		return 1, 1
	}
	return t.radices[len(t.radices)-1], t.radices[0]
}

// place picks every FFT's buffers once the layout is known; extra buffers go to shared
// memory when all of them fit beside the tile registers (lay.bytes grows to hold them), else
// to global scratch.
func (kw *fftKernelWork) place(shapes []tile.Shape, lay *layout) {
	most := 0
	for pc, w := range kw.plans {
		fits := func(r tile.Reg) bool {
			return !kw.absent[r] && shapes[r][0]*shapes[r][1]*lay.size(r) >= w.bytes
		}
		var cands []int
		if w.srcDead && fits(w.src) {
			cands = append(cands, fftBufSrc)
		}
		if fits(w.dst) {
			cands = append(cands, fftBufDst)
		}
		w.bufs, w.extras = assignFFTBuffers(w.passes, cands, w.store == nil)
		most = max(most, w.extras*w.bytes)
		kw.plans[pc] = w
	}
	off := align16(lay.bytes)
	shared := kw.shared && off+most <= maxShared
	if shared && most > 0 {
		kw.sharedOff = off
		lay.bytes = off + most
	} else if !shared {
		kw.scratch = most
	}
	for pc, w := range kw.plans {
		w.shared = shared
		kw.plans[pc] = w
	}
}

// fftFuseLoadStore lets the tests keep the tile round trips, so both forms are checked.
var fftFuseLoadStore = true

// at is body[i] when it is a T.
func at[T tile.Instr](body []tile.Instr, i int) (T, bool) {
	var zero T
	if i < 0 || i >= len(body) {
		return zero, false
	}
	x, ok := body[i].(T)
	return x, ok
}

// assignFFTBuffers picks b_1..b_(T-1) from the candidate tiles plus as few extra buffers as
// will do: it tries 0, 1, 2 extras, checking by a backward pass which buffers can still
// reach a valid end, then taking the first candidate that can, going forward.
func assignFFTBuffers(passes int, tiles []int, dstTile bool) ([]int, int) {
	n := passes - 1
	if n <= 0 {
		return nil, 0
	}
	for extras := 0; ; extras++ {
		cands := append([]int(nil), tiles...)
		for i := range extras {
			cands = append(cands, fftBufExtra+i)
		}
		// ok[i][c]: b_(i+1) = cands[c] has a valid continuation.
		ok := make([][]bool, n)
		for i := n - 1; i >= 0; i-- {
			ok[i] = make([]bool, len(cands))
			for c, b := range cands {
				if i == n-1 {
					ok[i][c] = b != fftBufDst || !dstTile
					continue
				}
				for c2, b2 := range cands {
					if b2 != b && ok[i+1][c2] {
						ok[i][c] = true
						break
					}
				}
			}
		}
		out, prev := make([]int, 0, n), fftBufSrc
		for i := range n {
			for c, b := range cands {
				if b != prev && ok[i][c] {
					out = append(out, b)
					prev = b
					break
				}
			}
			if len(out) <= i {
				break
			}
		}
		if len(out) == n {
			return out, extras
		}
	}
}

// fftEnv takes comma-separated options for timing the FFT's variants against each other on
// a GPU (the bits are the same in all of them): "global" keeps the work rows in global
// scratch, "tiles" keeps the Load and Store round trips, "threads=N" (256, 512, 1024) sets
// the CTA size of an FFT kernel.
const fftEnv = "TESSERA_PTX_FFT"

// fftOneCTAShared is the most shared memory a CTA may use for two to fit an SM of sm_90
// (228 KiB an SM, 1 KiB of it reserved per CTA).
const fftOneCTAShared = 113 * 1024

// fftOptions is the generator's FFT configuration: the test knobs, then fftEnv.
type fftOptions struct {
	shared, fuse bool
	threads      int // 0: fftThreads decides
}

func fftOptionsNow() (fftOptions, error) {
	o := fftOptions{shared: fftSharedWork, fuse: fftFuseLoadStore}
	v := os.Getenv(fftEnv)
	if v == "" {
		return o, nil
	}
	for _, f := range strings.Split(v, ",") {
		switch {
		case f == "global":
			o.shared = false
		case f == "tiles":
			o.fuse = false
		case f == "threads=256" || f == "threads=512" || f == "threads=1024":
			o.threads, _ = strconv.Atoi(strings.TrimPrefix(f, "threads="))
		default:
			return o, errs.New(errs.Input, "ptx: %s=%q: unknown option %q (global, tiles, threads=256|512|1024)", fftEnv, v, f)
		}
	}
	return o, nil
}

// fftThreads is the CTA size for kernel k, whose CTA uses shared bytes of shared memory: for
// a kernel of FFT work only (the FFTs and the Loads and Stores around them) whose radices are
// at most fftFuseRadix and whose passes have the butterflies for it, 512 threads, or 1024 when
// shared memory leaves room for one CTA an SM only (so an SM still runs 1024 threads); the
// option's when it sets one; else the SIMT path's 256. Small radices keep ptxas within the 64
// registers a thread 1024 threads allow (ptxas -v: 32-50 for radix 4 and 2, f32 and f64).
func fftThreads(k *tile.Kernel, shapes []tile.Shape, o fftOptions, shared int) int {
	want := 512
	if shared > fftOneCTAShared {
		want = 1024
	}
	if o.threads > 0 {
		want = o.threads
	}
	most := 0
	for _, in := range k.Body {
		switch x := in.(type) {
		case tile.Load, tile.Store:
		case tile.FFT:
			t := fftTableOf(x.N, x.DType == numerics.F64)
			if t.m > 0 {
				t = t.sub
			}
			for _, r := range t.radices {
				if r > fftFuseRadix {
					return simtThreads
				}
				most = max(most, shapes[x.Src][0]*t.n/r)
			}
		default:
			return simtThreads
		}
	}
	if most < want {
		return simtThreads
	}
	return want
}
