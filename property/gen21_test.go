package property

import (
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/graph"
)

// Issue 21's attribute forms are drawn: each div rounding mode (also on integers), axes=[],
// a scalar reduction and softmax, and each mse_loss reduction.
func TestRandomDrawsCoverIssue21Forms(t *testing.T) {
	seen := map[string]int{}
	gen := SpecGen(DefaultConfig().MaxOps)
	for i := range 800 { // 800: every op added (issue 26 added ten) makes each form rarer
		c, err := Build(gen.Example(i), DefaultConfig())
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range c.Graph.Nodes {
			x := n.Inputs[0].Type
			switch {
			case n.Op == "div" && graph.DivRounding(n) != "":
				seen["div "+graph.DivRounding(n)]++
				if x.DType.IsInt() {
					seen["div int"]++
				}
			case n.Def().Kind == graph.KindReduce && n.HasAttrSet("axes") && len(n.Attrs["axes"].Ints) == 0:
				seen["axes=[]"]++
			case n.Def().Kind == graph.KindReduce && x.Rank() == 0:
				seen["scalar reduce"]++
			case (n.Op == "softmax" || n.Op == "log_softmax") && x.Rank() == 0:
				seen["scalar softmax"]++
			case n.Op == "mse_loss":
				seen["mse "+n.StringAttr("reduction")]++
			}
		}
	}
	for _, k := range []string{"div trunc", "div floor", "div int", "axes=[]", "scalar reduce", "scalar softmax", "mse mean", "mse sum", "mse none"} {
		if seen[k] == 0 {
			t.Errorf("%s never drawn in 800 graphs (%v)", k, seen)
		}
	}
	t.Logf("%v", seen)
}
