package gradients

import (
	"strings"
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

// Each ConvCases geometry has the property its tag names, so that the suite's specs cover
// the rule's branches and not only shapes that happen to be even.
func TestConvCasesHaveTheirGeometry(t *testing.T) {
	cs, err := ConvCases([]string{"conv1d", "conv2d"}, []numerics.DType{numerics.F64})
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != len(convGeoms) {
		t.Fatalf("%d cases for %d geometries", len(cs), len(convGeoms))
	}
	for _, c := range cs {
		n := c.Graph.Nodes[0]
		types := make([]graph.Type, len(n.Inputs))
		for i, v := range n.Inputs {
			types[i] = v.Type
		}
		g, err := graph.ConvDims(n, types)
		if err != nil {
			t.Fatalf("%s: %v", c.Name, err)
		}
		var ragged, beyond, skips bool
		for a := 2 - g.Dims; a < 2; a++ {
			span := g.Dil[a] * (g.K[a] - 1)
			ragged = ragged || (g.Padded(a)-span-1)%g.Stride[a] != 0
			beyond = beyond || g.Pad[a] > span
			skips = skips || g.Stride[a] > span+1
		}
		for tag, has := range map[string]bool{"ragged": ragged, "beyond": beyond, "skips": skips} {
			if strings.Contains(c.Name, tag) && !has {
				t.Errorf("%s: named %q but its geometry %s is not", c.Name, tag, g)
			}
		}
		if strings.Contains(c.Name, "pad3x2") && !beyond {
			t.Errorf("%s: padding 3 should exceed the dilated span on h: %s", c.Name, g)
		}
		if strings.Contains(c.Name, "depthwise") && g.Cg != 1 {
			t.Errorf("%s: depthwise with %d channels per group", c.Name, g.Cg)
		}
	}
}
