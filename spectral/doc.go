// Package spectral holds the checks of the spectral ops (issue 26), the way FFT libraries are
// judged (FFTW's accuracy method):
//
//   - accuracy.go: relative L2 and L-infinity error of the engine's forward, inverse and
//     round-trip transforms on inputs uniform in [-0.5, 0.5), against reference.go, with the
//     bound c * u * sqrt(log2 N) per dtype (Bound);
//   - growth.go: a least-squares fit of log(error) against log(N); a slope near 1/2 is the
//     sqrt(N) growth of a twiddle-factor bug (FitGrowth, the planted fault
//     cpu/fft/twiddle-recurrence);
//   - reference.go: the float64 reference, independent of the engine's FFT: the DFT by its
//     definition with compensated sums for N <= DirectMax, an iterative radix-2 transform
//     (Bluestein's chirp for other lengths) above, twiddles from exactly reduced angles;
//   - metamorphic.go: linearity, Parseval, the shift and modulation theorems,
//     ifft(fft(x)) = x and the Hermitian symmetry of a real input's spectrum, on the engine.
//
// The engine's transforms run as one-op graphs through the compiler and the CPU backend.
package spectral
