package fabric

import (
	"strings"
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/dist/mesh"
	"github.com/tessera-qa/tessera-qa/engine/errs"
)

func TestPlacement(t *testing.T) {
	topo, err := Parse("nodes=4x8")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		mesh  string
		warns int
		want  string
	}{
		{"dp=4,tp=8", 0, ""},                  // tp innermost, one node per tp group
		{"dp=8,tp=4", 0, ""},                  // two tp groups per node
		{"tp=4,dp=8", 1, "8 of 8 tp groups"},  // tp outermost: stride 8, every group spans 4 nodes
		{"dp=2,tp=16", 1, "2 of 2 tp groups"}, // a tp group larger than a node
		{"dp=32", 0, ""},                      // no tp axis
	} {
		m, err := mesh.ParseMesh(tc.mesh)
		if err != nil {
			t.Fatal(err)
		}
		w, err := Placement(topo, m)
		if err != nil {
			t.Fatal(err)
		}
		if len(w) != tc.warns || (tc.want != "" && !strings.Contains(w[0], tc.want)) {
			t.Errorf("%s: warnings %q, want %d containing %q", tc.mesh, w, tc.warns, tc.want)
		}
	}
	m, _ := mesh.ParseMesh("dp=2,tp=8")
	if _, err := Placement(topo, m); errs.CodeOf(err) != errs.Input {
		t.Errorf("mesh of 16 on a topology of 32: want E_INPUT, got %v", err)
	}
}
