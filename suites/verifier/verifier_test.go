package verifier_test

import (
	"flag"
	"math"
	"slices"
	"strconv"

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
		// Ginkgo's seed (fixed in CI, fresh nightly) picks the edits, unless -rapid.seed does.
		if f := flag.Lookup("rapid.seed"); f != nil && f.Value.String() == "0" {
			Expect(f.Value.Set(strconv.FormatInt(GinkgoRandomSeed(), 10))).To(Succeed())
		}
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

var _ = Describe("the text format", Label("attention", "full_like", "layernorm", "matmul"), func() {
	It("prints float attributes over the whole bit space and int64 tile hints and reads them back bit for bit", func() {
		for _, f := range negative.SpecialFloats {
			Expect(negative.FloatAttrsRoundTrip(f, f, f, []int64{1, math.MaxInt64, 1})).To(Succeed())
		}
		rapid.Check(GinkgoT(), func(t *rapid.T) {
			float := func(label string) float64 {
				if rapid.Bool().Draw(t, label+"Special") {
					return rapid.SampledFrom(negative.SpecialFloats).Draw(t, label)
				}
				f := math.Float64frombits(rapid.Uint64().Draw(t, label+"Bits"))
				if math.IsNaN(f) {
					f = math.NaN() // the text has one NaN: payloads are not kept
				}
				return f
			}
			tile := rapid.SliceOfN(rapid.Int64Range(1, math.MaxInt64), 3, 3).Draw(t, "tile")
			if err := negative.FloatAttrsRoundTrip(float("scale"), float("value"), float("eps"), tile); err != nil {
				t.Fatal(err)
			}
		})
	})
})
