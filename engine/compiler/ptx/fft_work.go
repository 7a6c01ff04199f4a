package ptx

import (
	"github.com/tessera-qa/tessera-qa/engine/compiler/tile"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

// Where an FFT keeps the rows between its Stockham passes. The first pass reads the source
// tile and the last writes the destination tile (fft.go), so a chain of T passes needs T-1
// intermediate buffers b_1..b_(T-1), each different from the one before (a pass is out of
// place) and the last different from the destination. They come, cheapest first, from
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
}

// fftKernelWork is the plan of every FFT of a kernel, keyed by the instruction's pre-order
// number (liveRanges' numbering), and where their extra buffers live.
type fftKernelWork struct {
	plans     map[int]fftWork
	sharedOff int // offset of the extras in shared memory, when shared
	scratch   int // global scratch bytes a CTA, when not
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

// planFFTWork decides every FFT's buffers; extra buffers go to shared memory when all of them
// fit beside the tile registers (lay.bytes grows to hold them), else to global scratch.
func planFFTWork(k *tile.Kernel, shapes []tile.Shape, lay *layout) fftKernelWork {
	kw := fftKernelWork{plans: map[int]fftWork{}}
	iv := liveRanges(k)
	pc, most := 0, 0
	walk(k.Body, func(in tile.Instr) {
		my := pc
		pc++
		x, ok := in.(tile.FFT)
		if !ok {
			return
		}
		t := fftTableOf(x.N, x.DType == numerics.F64)
		rows := shapes[x.Src][0]
		bytes := rows * t.work() * fftComplexBytes(x.DType)
		fits := func(r tile.Reg) bool { return shapes[r][0]*shapes[r][1]*lay.size(r) >= bytes }
		var cands []int
		if iv[x.Src].end == my && fits(x.Src) {
			cands = append(cands, fftBufSrc)
		}
		if fits(x.Dst) {
			cands = append(cands, fftBufDst)
		}
		w := fftWork{bytes: bytes}
		w.bufs, w.extras = assignFFTBuffers(fftPasses(t), cands)
		kw.plans[my] = w
		most = max(most, w.extras*bytes)
	})
	off := align16(lay.bytes)
	shared := fftSharedWork && off+most <= maxShared
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
	return kw
}

// assignFFTBuffers picks b_1..b_(T-1) from the candidate tiles plus as few extra buffers as
// will do: it tries 0, 1, 2 extras, checking by a backward pass which buffers can still
// reach a valid end, then taking the first candidate that can, going forward.
func assignFFTBuffers(passes int, tiles []int) ([]int, int) {
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
					ok[i][c] = b != fftBufDst
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
