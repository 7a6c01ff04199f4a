package tile

import "github.com/tessera-qa/tessera-qa/engine/numerics"

// FFTKind names the transform an FFT instruction applies to each row.
type FFTKind string

const (
	FFTForward FFTKind = "c2c_forward" // complex -> complex, exp(-2 pi i jk/N)
	FFTInverse FFTKind = "c2c_inverse" // complex -> complex, exp(+2 pi i jk/N), unnormalised
	FFTR2C     FFTKind = "r2c"         // real -> the N/2+1 non-negative frequencies
	FFTC2R     FFTKind = "c2r"         // N/2+1 frequencies of a Hermitian signal -> real
)

// FFT transforms every row of Src independently and multiplies the result by Scale. Complex
// rows are interleaved (re, im) pairs, the torch.view_as_real layout:
//
//	c2c: Src [R, 2N]        -> Dst [R, 2N]
//	r2c: Src [R, N]         -> Dst [R, 2(N/2+1)]
//	c2r: Src [R, 2(N/2+1)]  -> Dst [R, N]   (the imaginary parts of bin 0 and, for even N,
//	                                          bin N/2 are ignored, as pocketfft and cuFFT do)
//
// The arithmetic is in DType (f32 or f64): every add and multiply rounds to it, the twiddle
// factors are DType roundings of exactly reduced angles. Op is the graph op (for messages).
// Both backends execute it with engine/fftplan's mixed-radix / Bluestein plan and tables, the
// PTX generator mirroring its operation order, so cpu and cuda give the same bits.
type FFT struct {
	Dst, Src Reg
	Op       string
	Kind     FFTKind
	N        int
	Scale    float64
	DType    numerics.DType
}

// FFTCols returns the input and output tile widths of an FFT of kind k and length n.
func FFTCols(k FFTKind, n int) (in, out int) {
	switch k {
	case FFTR2C:
		return n, 2 * (n/2 + 1)
	case FFTC2R:
		return 2 * (n/2 + 1), n
	}
	return 2 * n, 2 * n
}

func (FFT) isInstr() {}
