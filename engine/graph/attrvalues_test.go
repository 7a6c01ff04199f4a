package graph

import (
	"strings"
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/dist/mesh"
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

// meshNamed are string attributes whose values come from the graph's mesh, not from a fixed
// list: the op's shape rule checks them against the mesh's axes.
var meshNamed = map[string]bool{"axis": true}

// TestStringAttrsDeclareTheirValues: every string attribute of the registry lists its allowed
// values (so the verifier can refuse others before lowering), every alias maps to one of them,
// and every default is allowed.
func TestStringAttrsDeclareTheirValues(t *testing.T) {
	for _, d := range append(Ops(), CollectiveOps()...) {
		for _, s := range d.Attrs {
			if s.Kind != AttrString {
				if s.Values != nil || s.Aliases != nil {
					t.Errorf("%s.%s: Values/Aliases on a %s attribute", d.Name, s.Name, s.Kind)
				}
				continue
			}
			if meshNamed[s.Name] && d.Kind == KindCollective {
				continue
			}
			if len(s.Values) == 0 {
				t.Errorf("%s.%s: a string attribute without Values: the verifier cannot refuse a misspelling", d.Name, s.Name)
			}
			for k, v := range s.Aliases {
				if !contains(s.Values, v) || contains(s.Values, k) {
					t.Errorf("%s.%s: alias %q -> %q: must map a new spelling to one of %v", d.Name, s.Name, k, v, s.Values)
				}
			}
			if s.Default != nil && !s.allows(*s.Default) {
				t.Errorf("%s.%s: default %q is not allowed", d.Name, s.Name, s.Default.Str)
			}
		}
	}
}

func contains(xs []string, x string) bool {
	for _, s := range xs {
		if s == x {
			return true
		}
	}
	return false
}

// TestVerifierRefusesUnknownAttrValues: a value outside the registry's list is E_INPUT at
// verification, naming the node, the attribute and the allowed values (never E_INTERNAL at
// lowering); PyTorch's spelling approx="none" is accepted, reads as "erf" and prints as written.
func TestVerifierRefusesUnknownAttrValues(t *testing.T) {
	for _, bad := range []string{"fast", "Tanh", "", "exact"} {
		src := "graph g {\n  input %x: f32[3]\n  %y = gelu(%x) {approx=\"" + bad + "\"}\n  output %y\n}\n"
		_, err := Parse(src, "g.tg")
		if errs.CodeOf(err) != errs.Input {
			t.Errorf("gelu approx=%q: %v, want E_INPUT", bad, err)
			continue
		}
		for _, want := range []string{"%y", "approx", `"erf", "tanh"`, `"none" = "erf"`} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("gelu approx=%q: %q does not name %s", bad, err, want)
			}
		}
	}
	g := mustParse(t, "graph g {\n  input %x: f32[3]\n  %y = gelu(%x) {approx=\"none\"}\n  output %y\n}\n")
	if got := g.Nodes[0].StringAttr("approx"); got != "erf" {
		t.Errorf(`approx="none" reads as %q, want "erf"`, got)
	}
	if !strings.Contains(Print(g), `approx="none"`) {
		t.Errorf("the printer must keep the spelling written:\n%s", Print(g))
	}
	roundTrip(t, g)

	b := NewBuilder("coll")
	m, err := mesh.ParseMesh("tp=2")
	if err != nil {
		t.Fatal(err)
	}
	b.Mesh(m)
	x := b.Input("x", numerics.F32, 4)
	b.Output(b.Op("all_reduce", Attrs{"axis": String("tp"), "op": String("prod")}, x))
	if _, err := b.Build(); errs.CodeOf(err) != errs.Input || !strings.Contains(err.Error(), `"sum", "max", "min", "avg"`) {
		t.Errorf("all_reduce op=prod: %v, want E_INPUT listing the reductions", err)
	}
}
