package property_test

import (
	"os"
	"path/filepath"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"pgregory.net/rapid"

	"github.com/tessera-qa/tessera-qa/engine/backend"
	_ "github.com/tessera-qa/tessera-qa/engine/backend/all"
	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/property"
)

// backendLabels tags a spec by where it can run: CI runs "cpu"; the nightly GPU runners "gpu".
func backendLabels(b backend.Backend) Labels {
	if b.Name() == "cpu" {
		return Label("cpu")
	}
	return Label("gpu", "nightly")
}

// artifacts is where failing properties leave replay manifests: $TESSERA_QA_ARTIFACTS, else
// $TESSERA_CI_OUT/property (CI uploads that folder), else a folder in the temp dir.
func artifacts() string {
	if d := os.Getenv("TESSERA_QA_ARTIFACTS"); d != "" {
		return d
	}
	if d := os.Getenv("TESSERA_CI_OUT"); d != "" {
		return filepath.Join(d, "property")
	}
	return filepath.Join(os.TempDir(), "tessera-qa-property")
}

var _ = Describe("the random graph generator", Label("cpu"), func() {
	It("draws graphs that verify, stay within their budgets and survive the text format", func() {
		cfg := property.DefaultConfig()
		defer property.AdoptFailFile(GinkgoT().Name(), artifacts()) // a fail file goes to the artifacts, not the checkout
		rapid.Check(GinkgoT(), func(t *rapid.T) {
			g := NewWithT(t)
			c := property.Raw(cfg).Draw(t, "case")
			g.Expect(graph.Verify(c.Graph)).To(Succeed())
			g.Expect(len(c.Graph.Nodes)).To(BeNumerically("<=", cfg.MaxOps))
			for _, v := range c.Graph.Inputs {
				g.Expect(v.Type.NumElems()).To(BeNumerically("<=", cfg.MaxElems), "input %%%s", v.Name)
			}
			back, err := graph.Parse(graph.Print(c.Graph), "generated")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(graph.Diff(back, c.Graph)).To(BeEmpty())
		})
	})
})

var _ = Describe("properties", func() {
	for _, b := range backend.All() {
		Describe("on "+b.Name(), backendLabels(b), func() {
			BeforeEach(func() {
				if err := b.Available(); err != nil {
					Skip(b.Name() + " unavailable: " + err.Error())
				}
			})
			for _, p := range property.All() {
				It(p.Name+" ("+p.Judged+")", Label("property"), func() {
					seed := property.PropertySeed(uint64(GinkgoRandomSeed()), p.Name, b.Name())
					GinkgoWriter.Printf("%s: %s\nrapid seed %d\n", p.Name, p.Doc, seed)
					env := property.Env{Backend: b, Config: property.DefaultConfig(), Artifacts: artifacts()}
					property.Check(GinkgoT(), p, env, property.Options{Seed: seed})
				})
			}
		})
	}
})
