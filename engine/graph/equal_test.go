package graph

import (
	"math"
	"strings"
	"testing"
)

func TestEqualAndDiff(t *testing.T) {
	base := mustParse(t, specExample)
	if !Equal(base, base.Clone()) || Diff(base, base.Clone()) != "" {
		t.Fatal("a graph must equal its clone")
	}
	for _, c := range []struct {
		name   string
		mutate func(g *Graph)
		want   string
	}{
		{"name", func(g *Graph) { g.Name = "other" }, `graph name: "mlp" vs "other"`},
		{"input name", func(g *Graph) { g.Inputs[1].Name = "v" }, "input 1: %w vs %v"},
		{"input type", func(g *Graph) { g.Inputs[0].Type.Shape[0] = 5 }, "input 0: %x has type f32[4,8] vs f32[5,8]"},
		{"input count", func(g *Graph) { g.Inputs = g.Inputs[:2] }, "input count: 3 vs 2"},
		{"node count", func(g *Graph) { g.Nodes = g.Nodes[:2] }, "node count: 3 vs 2"},
		{"op", func(g *Graph) { g.Nodes[1].Op = "neg" }, "node 1: op relu vs neg"},
		{"output name", func(g *Graph) { g.Nodes[1].Output.Name = "q" }, "node 1: output %y vs %q"},
		{"output type", func(g *Graph) { g.Nodes[2].Output.Type.DType = f32 }, "node 2: output %z has type bf16[4,16] vs f32[4,16]"},
		{"wiring", func(g *Graph) { g.Nodes[0].Inputs[1] = g.Inputs[0] }, "node 0: matmul %h: input 1: %w vs %x"},
		{"attr value", func(g *Graph) { g.Nodes[0].Attrs["transpose_b"] = Bool(true) }, "attribute transpose_b=false vs true"},
		{"attr kind", func(g *Graph) { g.Nodes[2].Attrs["to"] = String("bf16") }, `attribute to=bf16 vs "bf16"`},
		{"default made explicit", func(g *Graph) { g.Nodes[1].Attrs = Attrs{"x": Int(1)} }, "attribute names [] vs [x]"},
		{"graph outputs", func(g *Graph) { g.Outputs[0], g.Outputs[1] = g.Outputs[1], g.Outputs[0] }, "output 0: %z vs %h"},
		{"nil graph", nil, "one graph is nil"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var other *Graph
			if c.mutate != nil {
				other = base.Clone()
				c.mutate(other)
			}
			d := Diff(base, other)
			if Equal(base, other) || !strings.Contains(d, c.want) {
				t.Fatalf("Diff = %q, want it to contain %q", d, c.want)
			}
		})
	}
	if !Equal(nil, nil) {
		t.Fatal("nil graphs are equal")
	}
}

func TestEqualFloatsByBits(t *testing.T) {
	mk := func(f float64) *Graph {
		return mustParse(t, "graph f {\n input %q: f32[2,2]\n %y = attention(%q, %q, %q) {scale="+FormatAttr(Float(f))+"}\n output %y\n}")
	}
	if !Equal(mk(math.NaN()), mk(math.NaN())) {
		t.Fatal("NaN attributes must compare equal (by bits)")
	}
	if Equal(mk(0), mk(math.Copysign(0, -1))) {
		t.Fatal("+0 and -0 attributes must differ")
	}
}
