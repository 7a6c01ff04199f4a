package ref

import "github.com/tessera-qa/tessera-qa/engine/graph"

// Hand-computed spectral cases (issue 26): a delta, the DFT of 1..4, their inverses, the 2-D
// forms of a constant, one complex product and one conjugate.
var spectralCases = []opCase{
	{"fft/delta", "fft", nil, ins(tt(f64, sh(4, 2), 1, 0, 0, 0, 0, 0, 0, 0)), f64, sh(4, 2), []float64{1, 0, 1, 0, 1, 0, 1, 0}, 1e-15},
	{"fft/1234", "fft", nil, ins(tt(f64, sh(4, 2), 1, 0, 2, 0, 3, 0, 4, 0)), f64, sh(4, 2), []float64{10, 0, -2, 2, -2, 0, -2, -2}, 1e-14},
	{"ifft/1234", "ifft", nil, ins(tt(f64, sh(4, 2), 10, 0, -2, 2, -2, 0, -2, -2)), f64, sh(4, 2), []float64{1, 0, 2, 0, 3, 0, 4, 0}, 1e-14},
	{"rfft/1234", "rfft", nil, ins(tt(f64, sh(4), 1, 2, 3, 4)), f64, sh(3, 2), []float64{10, 0, -2, 2, -2, 0}, 1e-14},
	{"irfft/1234", "irfft", nil, ins(tt(f64, sh(3, 2), 10, 0, -2, 2, -2, 0)), f64, sh(4), []float64{1, 2, 3, 4}, 1e-14},
	{"fft2/ones", "fft2", nil, ins(tt(f64, sh(2, 2, 2), 1, 0, 1, 0, 1, 0, 1, 0)), f64, sh(2, 2, 2), []float64{4, 0, 0, 0, 0, 0, 0, 0}, 1e-15},
	{"ifft2/dc", "ifft2", nil, ins(tt(f64, sh(2, 2, 2), 4, 0, 0, 0, 0, 0, 0, 0)), f64, sh(2, 2, 2), []float64{1, 0, 1, 0, 1, 0, 1, 0}, 1e-15},
	{"rfft2/ones", "rfft2", graph.Attrs{"norm": graph.String("forward")}, ins(tt(f64, sh(2, 2), 1, 1, 1, 1)), f64, sh(2, 2, 2), []float64{1, 0, 0, 0, 0, 0, 0, 0}, 1e-15},
	{"irfft2/dc", "irfft2", nil, ins(tt(f64, sh(2, 2, 2), 4, 0, 0, 0, 0, 0, 0, 0)), f64, sh(2, 2), []float64{1, 1, 1, 1}, 1e-15},
	{"complex_mul", "complex_mul", nil, ins(tt(f64, sh(2), 1, 2), tt(f64, sh(2), 3, 4)), f64, sh(2), []float64{-5, 10}, 0},
	{"conj", "conj", nil, ins(tt(f32, sh(2), 1, 2)), f32, sh(2), []float64{1, -2}, 0},
}
