package verifier_test

import (
	"slices"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"pgregory.net/rapid"

	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/negative"
)

var _ = Describe("invalid graphs", func() {
	for _, c := range negative.Cases() {
		It("refuses "+c.Rule+" at "+string(c.Stage)+" with "+string(c.Code), Label(c.Label()), func() {
			Expect(negative.Refuse(c)).To(Succeed())
		})
		if c.Stage == negative.StageParse {
			It("refuses "+c.Rule+" in tessera-qa exec and compile: exit 2, one line", Label(c.Label(), "cli"), func() {
				if bin == "" {
					Skip(binErr)
				}
				Expect(negative.RefuseCLI(bin, GinkgoT().TempDir(), c)).To(Succeed())
			})
		}
	}
})

// baseOps are the ops of the one-edit bases: the property's labels.
func baseOps() []string {
	var ops []string
	for _, b := range negative.Bases {
		g, err := graph.Parse(b, "base.tg")
		if err != nil {
			continue
		}
		for _, n := range g.Nodes {
			if !slices.Contains(ops, n.Op) {
				ops = append(ops, n.Op)
			}
		}
	}
	return ops
}

var _ = Describe("graphs one edit away from a valid one", Label(baseOps()...), func() {
	It("are refused with a coded error, or run and agree with engine/ref", func() {
		rapid.Check(GinkgoT(), func(t *rapid.T) {
			base := rapid.IntRange(0, len(negative.Bases)-1).Draw(t, "base")
			e, err := negative.OneEdit(negative.Bases[base], func(n int) int { return rapid.IntRange(0, n-1).Draw(t, "choice") })
			if err != nil {
				t.Fatal(err)
			}
			if err := negative.Judge(e.Text, rapid.Uint64().Draw(t, "seed")); err != nil {
				t.Fatalf("base %d, %s: %v\n%s", base, e.What, err, e.Text)
			}
		})
	})
})
