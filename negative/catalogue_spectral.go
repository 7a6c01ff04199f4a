package negative

import "github.com/tessera-qa/tessera-qa/engine/errs"

const spectralGo = "engine/graph/ops_spectral.go "

// spectralCases break each rule of the spectral ops (issue 26) once.
var spectralCases = []Case{
	node("fft/complex-trailing-2", "fft", spectralGo+"isComplex", errs.Shape, x23, "%y = fft(%x)", "%y", "fft", "trailing dimension of 2"),
	node("fft/dim-range", "fft", spectralGo+"FFTAxis", errs.Shape, []string{"%x: f32[4,8,2]"}, "%y = fft(%x) {dim=2}", "%y", "fft", "dim 2"),
	node("fft/n-positive", "fft", spectralGo+"FFTAxis", errs.Shape, []string{"%x: f32[4,8,2]"}, "%y = fft(%x) {n=0}", "%y", "fft", "n >= 1"),
	node("fft/norm-listed", "fft", regGo, errs.Input, []string{"%x: f32[4,8,2]"}, `%y = fft(%x) {norm="unitary"}`, "%y", "fft", "unitary"),
	node("fft/dtype-float32-64", "fft", regGo, errs.DType, []string{"%x: f16[4,8,2]"}, "%y = fft(%x)", "%y", "fft", "f16"),
	node("ifft/complex-trailing-2", "ifft", spectralGo+"isComplex", errs.Shape, []string{"%x: f32[4,3]"}, "%y = ifft(%x)", "%y", "ifft", "trailing"),
	node("ifft2/n-positive", "ifft2", spectralGo+"FFT2Lengths", errs.Shape, []string{"%x: f32[4,3,2]"}, "%y = ifft2(%x) {s=[0,3]}", "%y", "ifft2", ">= 1"),
	node("rfft/needs-an-axis", "rfft", spectralGo+"FFTAxis", errs.Shape, []string{"%x: f32[]"}, "%y = rfft(%x)", "%y", "rfft", "axis"),
	node("irfft/one-bin-needs-n", "irfft", spectralGo+"FFTAxis", errs.Shape, []string{"%x: f32[3,1,2]"}, "%y = irfft(%x)", "%y", "irfft", "(0)"),
	node("fft2/two-axes", "fft2", spectralGo+"FFT2Lengths", errs.Shape, []string{"%x: f32[8,2]"}, "%y = fft2(%x)", "%y", "fft2", "two"),
	node("rfft2/s-length", "rfft2", spectralGo+"FFT2Lengths", errs.Shape, x23, "%y = rfft2(%x) {s=[4]}", "%y", "rfft2", "2 entries"),
	node("irfft2/s-positive", "irfft2", spectralGo+"FFT2Lengths", errs.Shape, []string{"%x: f32[4,3,2]"}, "%y = irfft2(%x) {s=[4,0]}", "%y", "irfft2", ">= 1"),
	node("complex_mul/broadcast", "complex_mul", spectralGo+"complexMulInfer", errs.Shape, []string{"%x: f32[3,4,2]", "%z: f32[5,2]"}, "%y = complex_mul(%x, %z)", "%y", "complex_mul"),
	node("complex_mul/complex-operands", "complex_mul", spectralGo+"isComplex", errs.Shape, []string{"%x: f32[3,4,2]", "%z: f32[4,3]"}, "%y = complex_mul(%x, %z)", "%y", "complex_mul", "trailing"),
	node("conj/complex", "conj", spectralGo+"isComplex", errs.Shape, x23, "%y = conj(%x)", "%y", "conj", "trailing"),
}
