package ptx

import (
	"strings"

	"github.com/tessera-qa/tessera-qa/engine/compiler/tile"
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/graph"
)

// Lowers reports whether the code generator lowers graph op d: every op but the Fourier
// transforms, which compile to tile.FFT (the one-axis forms, and the two-axis ones that
// desugar into them; complex_mul and conj are elementwise and lower). Random-graph suites on
// cuda draw only such ops; catalogue suites skip the others with NotLowered as the reason.
func Lowers(d *graph.OpDef) bool {
	return d.Kind != graph.KindSpectral && !(d.Kind == graph.KindComplex && strings.Contains(d.Name, "fft"))
}

// NotLowered is the phrase of every refusal of an op the code generator does not lower yet:
// suites that run the whole catalogue on cuda skip such a case with the refusal as the reason
// (a declared gap, listed by `ops --coverage`), and fail on any other error.
const NotLowered = "has no PTX lowering yet"

// refuseSpectral: the code generator has no FFT yet, so a kernel holding a tile.FFT is refused
// at compile time with E_UNSUPPORTED naming the graph op (docs/spectral.md), before any
// generator path could mistake it for something it knows.
// A conv kernel is not refused: it is plain loads with multi-dimensional accesses, MMAs and a
// masked store on a 4-D grid, which the general path lowers (SIMT, or mma.sync for 16-bit
// operands in blocks of 16); conv_emu_test.go runs the golden convs' PTX against the CPU.
func refuseSpectral(k *tile.Kernel) error {
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
