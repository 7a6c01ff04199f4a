package ptx

import (
	"github.com/tessera-qa/tessera-qa/engine/compiler/tile"
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/graph"
)

// Lowers reports whether the code generator lowers graph op d: every op but the convolutions,
// whose kernels (Kernel.Op) are refused until a GPU run has validated them. The Fourier
// transforms compile to tile.FFT, which the SIMT path lowers (fft.go; the two-axis forms
// desugar into one-axis ones, complex_mul and conj are elementwise). Random-graph suites on
// cuda draw only such ops; catalogue suites skip the others with NotLowered as the reason.
func Lowers(d *graph.OpDef) bool {
	return d.Kind != graph.KindConv
}

// NotLowered is the phrase of every refusal of an op the code generator does not lower yet:
// suites that run the whole catalogue on cuda skip such a case with the refusal as the reason
// (a declared gap, listed by `ops --coverage`), and fail on any other error.
const NotLowered = "has no PTX lowering yet"

// refuseSpectral: a conv kernel is plain loads, MMAs and stores, which the generic paths might
// take, but no GPU run has checked its 4-D grid and tap-strided operands yet: it is refused by
// its op. (A kernel holding a tile.FFT is lowered by fft.go.)
func refuseSpectral(k *tile.Kernel) error {
	if d, ok := graph.Lookup(k.Op); ok && d.Kind == graph.KindConv {
		return errs.New(errs.Unsupported, "ptx: kernel %s: op %s (direct convolution) %s; it runs on the cpu backend", k.Name, k.Op, NotLowered)
	}
	return nil
}
