package cpu

import (
	"github.com/tessera-qa/tessera-qa/engine/compiler/tile"
	"github.com/tessera-qa/tessera-qa/engine/fftplan"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

// The CPU backend runs engine/fftplan's reference executor as it is: the plan, the tables and
// the operation order live there, shared with the PTX generator, so both backends give the
// same bits (docs/spectral.md).

// fft executes a tile.FFT: each row of Src transformed on its own, in the instruction's
// precision, then scaled.
func (w *worker) fft(in tile.FFT) {
	src := w.regs[in.Src].get64()
	rows := w.regs[in.Src].rows
	incols, outcols := tile.FFTCols(in.Kind, in.N)
	td := &w.regs[in.Dst]
	td.rows, td.cols = rows, outcols
	out := td.out64()
	if in.DType == numerics.F64 {
		fftRows[complex128](in, src, out, rows, incols, outcols, func(x float64) float64 { return x })
		return
	}
	fftRows[complex64](in, src, out, rows, incols, outcols, func(x float64) float64 { return float64(float32(x)) })
}

func fftRows[C fftplan.Complex](in tile.FFT, src, out []float64, rows, incols, outcols int, rnd func(float64) float64) {
	n := in.N
	p := fftplan.For[C](n)
	a, z := make([]C, n), make([]C, n)
	scale := rnd(in.Scale)
	mk := func(re, im float64) C { return C(complex(rnd(re), rnd(im))) }
	for r := range rows {
		row := src[r*incols : (r+1)*incols]
		switch in.Kind {
		case tile.FFTForward, tile.FFTInverse:
			for k := range n {
				a[k] = mk(row[2*k], row[2*k+1])
			}
		case tile.FFTR2C:
			for k := range n {
				a[k] = mk(row[k], 0)
			}
		case tile.FFTC2R:
			// The Hermitian extension of bins 0..n/2; bin 0's (and an even n's bin n/2's)
			// imaginary part is dropped.
			for k := 0; k <= n/2; k++ {
				im := row[2*k+1]
				if k == 0 || 2*k == n {
					im = 0
				}
				a[k] = mk(row[2*k], im)
				if k > 0 && n-k != k {
					a[n-k] = fftplan.Conj(a[k])
				}
			}
		}
		if in.Kind == tile.FFTForward || in.Kind == tile.FFTR2C {
			p.Forward(a, z)
		} else {
			p.Inverse(a, z)
		}
		o := out[r*outcols : (r+1)*outcols]
		sc := C(complex(scale, 0))
		switch in.Kind {
		case tile.FFTC2R:
			for k := range n {
				v := z[k]
				if scale != 1 {
					v *= sc
				}
				o[k] = float64(real(complex128(v)))
			}
		default:
			for k := range outcols / 2 {
				v := z[k]
				if scale != 1 {
					v *= sc
				}
				c := complex128(v)
				o[2*k], o[2*k+1] = real(c), imag(c)
			}
			if in.Kind == tile.FFTR2C {
				// A real input's bin 0 and (even n) bin n/2 are real exactly, as torch.fft
				// and the golden model give them; the fast path leaves rounding residue
				// there, which a following div turned into ±Inf where the model has 0/0.
				o[1] = 0
				if n%2 == 0 && n/2 < outcols/2 {
					o[n+1] = 0
				}
			}
		}
	}
}
