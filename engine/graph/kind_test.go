package graph

import (
	"strings"
	"testing"
)

// Every registered op's kind has a name: `ops`, `ops --coverage` and the coverage reasons
// ("kind:NAME") print and match kinds by it.
func TestEveryKindHasAName(t *testing.T) {
	for _, d := range registry {
		if s := d.Kind.String(); strings.HasPrefix(s, "kind") {
			t.Errorf("op %s: kind %d has no name in kindNames", d.Name, d.Kind)
		}
	}
	if s := OpKind(250).String(); s != "kind250" {
		t.Errorf("an unnamed kind prints as %q, want kind250", s)
	}
}
