package ptx

import (
	"strings"
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/compiler"
	"github.com/tessera-qa/tessera-qa/golden"
)

// The launch plan of a program with empty tensors (issue 21): cuLaunchKernel refuses a grid
// of 0, so no module may have one. A program whose outputs are all empty launches nothing; a
// non-empty output read from an empty operand is one fill launch. Every catalogue empty-* case
// is generated on both code paths.
func TestEmptyTensorsNeverGiveAZeroGridLaunch(t *testing.T) {
	simt := H100
	simt.SIMTOnly = true
	seen := 0
	for _, s := range golden.Catalogue() {
		if !strings.Contains(s.Name, "/empty-") {
			continue
		}
		seen++
		p, err := compiler.Compile(s.Graph, compiler.Options{})
		if err != nil {
			t.Fatalf("%s: %v", s.Name, err)
		}
		allEmpty := true
		for _, v := range s.Graph.Outputs {
			allEmpty = allEmpty && v.Type.NumElems() == 0
		}
		for _, target := range []Target{H100, simt} {
			mods, err := GenerateProgram(p, target)
			if err != nil {
				t.Fatalf("%s: %v", s.Name, err)
			}
			if allEmpty && len(mods) != 0 {
				t.Errorf("%s: every output is empty but the plan has %d launches", s.Name, len(mods))
			}
			if !allEmpty && len(mods) == 0 {
				t.Errorf("%s: a non-empty output but no launch", s.Name)
			}
			for i, m := range mods {
				if m.Grid[0] < 1 || m.Grid[1] < 1 || m.Grid[2] < 1 || m.Threads < 1 {
					t.Errorf("%s kernel %d: launch grid %v x %d threads", s.Name, i, m.Grid, m.Threads)
				}
				if err := checkPTX(m.PTX, len(p.Kernels[i].Params)); err != nil {
					t.Errorf("%s kernel %d: %v", s.Name, i, err)
				}
			}
		}
	}
	if seen < 50 {
		t.Fatalf("only %d empty catalogue cases", seen)
	}
}
