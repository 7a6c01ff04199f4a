package ptx

import "github.com/tessera-qa/tessera-qa/engine/graph"

// Lowers reports whether the code generator lowers graph op d. Every op of the catalogue does:
// the convolutions on the general path (conv_emu_test.go runs the golden convs' PTX against
// the CPU), the Fourier transforms as tile.FFT on the SIMT path (fft.go; the two-axis forms
// desugar into one-axis ones, complex_mul and conj are elementwise). It stays the one place a
// new op without a lowering is declared: random-graph suites on cuda draw only ops it accepts,
// catalogue suites skip the others with NotLowered as the reason.
func Lowers(d *graph.OpDef) bool {
	return d != nil
}

// NotLowered is the phrase of every refusal of an op the code generator does not lower yet:
// suites that run the whole catalogue on cuda skip such a case with the refusal as the reason
// (a declared gap, listed by `ops --coverage`), and fail on any other error.
const NotLowered = "has no PTX lowering yet"
