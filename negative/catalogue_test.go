package negative

import (
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/graph"
)

func TestEveryCaseIsRefused(t *testing.T) {
	for _, c := range Cases() {
		if err := Refuse(c); err != nil {
			t.Error(err)
		}
	}
}

// TestEveryRuleHeavyOpHasACase: each op with a rule of its own beyond the dtype list (one
// that takes attributes or more than one input) has at least one case.
func TestEveryRuleHeavyOpHasACase(t *testing.T) {
	have := map[string]bool{}
	for _, c := range Cases() {
		have[c.Op] = true
	}
	for _, d := range append(graph.Ops(), graph.CollectiveOps()...) {
		if (len(d.Attrs) > 0 || d.MinArgs > 1) && !have[d.Name] {
			t.Errorf("op %s has no negative case", d.Name)
		}
	}
}
