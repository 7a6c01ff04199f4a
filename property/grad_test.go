package property

import (
	"slices"
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/backend"
	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

// The gradient properties at their CI counts on the cpu backend.
func TestGradProperties(t *testing.T) {
	b, err := backend.Get("cpu")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []Property{gradAgree, gradLinear, gradChain} {
		t.Run(p.Name, func(t *testing.T) {
			tally := &Tally{}
			Check(t, p, Env{Backend: b, Config: DefaultConfig()}, Options{Tally: tally})
			if tally.Passed == 0 {
				t.Errorf("%s: no case passed: %+v", p.Name, *tally)
			}
		})
	}
}

// Split cuts a graph with a path around the split value: g1 computes v, g2 takes v and the
// inputs and drops v's node and the nodes only v needed.
func TestSplit(t *testing.T) {
	b := graph.NewBuilder("g")
	x := b.Input("x", numerics.F64, 3)
	y := b.Input("y", numerics.F64, 3)
	e := b.Named("e", "exp", nil, x)
	v := b.Named("v", "mul", nil, e, y)
	w := b.Named("w", "add", nil, v, x) // x also reaches w around v
	b.Output(b.Named("out", "tanh", nil, w))
	g, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	g1, g2, err := Split(g, "v")
	if err != nil {
		t.Fatal(err)
	}
	names := func(vs []*graph.Value) []string {
		var out []string
		for _, v := range vs {
			out = append(out, v.Name)
		}
		return out
	}
	var ops1, ops2 []string
	for _, n := range g1.Nodes {
		ops1 = append(ops1, n.Output.Name)
	}
	for _, n := range g2.Nodes {
		ops2 = append(ops2, n.Output.Name)
	}
	if !slices.Equal(names(g1.Inputs), []string{"x", "y"}) || !slices.Equal(ops1, []string{"e", "v"}) || !slices.Equal(names(g1.Outputs), []string{"v"}) {
		t.Errorf("g1:\n%s", graph.Print(g1))
	}
	if !slices.Equal(names(g2.Inputs), []string{"x", "v"}) || !slices.Equal(ops2, []string{"w", "out"}) || !slices.Equal(names(g2.Outputs), []string{"out"}) {
		t.Errorf("g2:\n%s", graph.Print(g2))
	}
	if _, _, err := Split(g, "x"); err == nil {
		t.Error("splitting at an input must fail")
	}
}
