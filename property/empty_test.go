package property

import (
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/backend"
	_ "github.com/tessera-qa/tessera-qa/engine/backend/cpu"
	"github.com/tessera-qa/tessera-qa/engine/compiler"
	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/harness"
)

// Random graphs hold empty tensors sometimes, not mostly, and the judgeable ones among them
// agree with the golden model on the CPU backend, empty outputs compared by their exact shape
// (harness.ModeEmpty), never passed on nothing.
func TestRandomGraphsSometimesHoldEmptyTensorsAndStillAgree(t *testing.T) {
	gen := SpecGen(DefaultConfig().MaxOps)
	cpu, err := backend.Get("cpu")
	if err != nil {
		t.Fatal(err)
	}
	const draws = 300
	withEmpty, emptyOutputs, judged := 0, 0, 0
	for i := range draws {
		c, err := Build(gen.Example(i), DefaultConfig())
		if err != nil {
			t.Fatal(err)
		}
		if !holdsEmpty(c.Graph) {
			continue
		}
		withEmpty++
		if !Judgeable(c) {
			continue
		}
		judged++
		p, err := compiler.Compile(c.Graph, compiler.Options{})
		if err != nil {
			t.Fatalf("draw %d: %v\n%s", i, err, graph.Print(c.Graph))
		}
		got, err := cpu.Run(p, c.Inputs)
		if err != nil {
			t.Fatalf("draw %d: %v\n%s", i, err, graph.Print(c.Graph))
		}
		for j, w := range c.Want {
			r := harness.Check(got[j], w, c.Tolerances[j])
			if !r.Pass {
				t.Errorf("draw %d output %d: %s\n%s", i, j, r.Reason, graph.Print(c.Graph))
			}
			if w.Len() == 0 {
				emptyOutputs++
				if r.Mode != harness.ModeEmpty {
					t.Errorf("draw %d output %d: empty output checked in mode %q", i, j, r.Mode)
				}
			}
		}
	}
	t.Logf("%d of %d graphs hold an empty tensor; %d judgeable, %d empty outputs compared", withEmpty, draws, judged, emptyOutputs)
	if withEmpty < draws/20 || withEmpty > draws/2 {
		t.Errorf("%d of %d graphs hold an empty tensor: want sometimes (5%%..50%%)", withEmpty, draws)
	}
	if judged == 0 || emptyOutputs == 0 {
		t.Errorf("no judgeable graph with an empty output among %d (%d judged)", withEmpty, judged)
	}
}

func holdsEmpty(g *graph.Graph) bool {
	for _, v := range g.Inputs {
		if v.Type.NumElems() == 0 {
			return true
		}
	}
	return false
}
