package ptx

import (
	"strings"

	"github.com/tessera-qa/tessera-qa/engine/compiler/tile"
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/graph"
)

// Lowers reports whether the code generator lowers graph op d: every op but the Fourier
// transforms, which compile to tile.FFT (the one-axis forms, and the two-axis ones that
// desugar into them; complex_mul and conj are elementwise and lower), and the convolutions,
// whose kernels (Kernel.Op) are refused until a GPU run has validated them. Random-graph suites on
// cuda draw only such ops; catalogue suites skip the others with NotLowered as the reason.
func Lowers(d *graph.OpDef) bool {
	return d.Kind != graph.KindSpectral && d.Kind != graph.KindConv && !(d.Kind == graph.KindComplex && strings.Contains(d.Name, "fft"))
}

// NotLowered is the phrase of every refusal of an op the code generator does not lower yet:
// suites that run the whole catalogue on cuda skip such a case with the refusal as the reason
// (a declared gap, listed by `ops --coverage`), and fail on any other error.
const NotLowered = "has no PTX lowering yet"

// refuseSpectral: the code generator has no FFT yet, so a kernel holding a tile.FFT is refused
// at compile time with E_UNSUPPORTED naming the graph op (docs/spectral.md), before any
// generator path could mistake it for something it knows.
// A conv kernel is plain loads, MMAs and stores, which the generic paths might take, but no
// GPU run has checked its 4-D grid and tap-strided operands yet: it is refused by its op.
func refuseSpectral(k *tile.Kernel) error {
	if d, ok := graph.Lookup(k.Op); ok && d.Kind == graph.KindConv {
		return errs.New(errs.Unsupported, "ptx: kernel %s: op %s (direct convolution) %s; it runs on the cpu backend", k.Name, k.Op, NotLowered)
	}
	var find func([]tile.Instr) error
	find = func(body []tile.Instr) error {
		for _, in := range body {
			switch x := in.(type) {
			case tile.FFT:
				return errs.New(errs.Unsupported, "ptx: kernel %s: op %s (tile fft %s, n=%d) %s; it runs on the cpu backend", k.Name, x.Op, x.Kind, x.N, NotLowered)
			case tile.For:
				if err := find(x.Body); err != nil {
					return err
				}
			}
		}
		return nil
	}
	return find(k.Body)
}
