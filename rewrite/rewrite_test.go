package rewrite

import (
	"pgregory.net/rapid"
	"strings"
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/backend"
	_ "github.com/tessera-qa/tessera-qa/engine/backend/cpu"
)

func TestCatalogueHoldsOnTheCPU(t *testing.T) {
	cpu, err := backend.Get("cpu")
	if err != nil {
		t.Fatal(err)
	}
	passes := map[string][2]int{}
	for _, e := range Catalogue() {
		k := passes[e.Pass]
		if e.Rewrite {
			k[0]++
		} else {
			k[1]++
			if e.Condition == "" {
				t.Errorf("%s: a near miss names the condition it fails", e.Name)
			}
		}
		passes[e.Pass] = k
		if !strings.HasPrefix(e.Name, e.Pass+"/") {
			t.Errorf("%s: name does not start with its pass", e.Name)
		}
		if err := e.CheckStructure(); err != nil {
			t.Error(err)
		}
		if err := e.CheckNumbers(cpu, 7); err != nil {
			t.Error(err)
		}
	}
	for _, p := range []string{Canonicalize, FuseAttention, FuseElementwise} {
		if k := passes[p]; k[0] == 0 || k[1] == 0 {
			t.Errorf("%s: %d matches and %d near misses; want both", p, k[0], k[1])
		}
	}
}

// Random candidates: the matcher rewrites exactly the drawn matches, and the numbers agree.
func TestGeneratedCandidatesOnTheCPU(t *testing.T) {
	cpu, err := backend.Get("cpu")
	if err != nil {
		t.Fatal(err)
	}
	rapid.Check(t, func(rt *rapid.T) {
		e := Gen().Draw(rt, "entry")
		if err := e.CheckStructure(); err != nil {
			rt.Fatal(err)
		}
		if err := e.CheckNumbers(cpu, 11); err != nil {
			rt.Fatal(err)
		}
	})
}
