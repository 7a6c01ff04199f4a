package rewrite_test

import (
	"os"
	"path/filepath"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"pgregory.net/rapid"

	"github.com/tessera-qa/tessera-qa/engine/backend"
	_ "github.com/tessera-qa/tessera-qa/engine/backend/all"
	"github.com/tessera-qa/tessera-qa/engine/compiler/ptx"
	"github.com/tessera-qa/tessera-qa/property"
	"github.com/tessera-qa/tessera-qa/rewrite"
)

// backendLabels tags a spec by where it can run: CI runs "cpu"; the nightly GPU runners "gpu".
func backendLabels(b backend.Backend) Labels {
	if b.Name() == "cpu" {
		return Label("cpu")
	}
	return Label("gpu", "nightly")
}

// artifacts is where a failing property leaves rapid's fail file (never the checkout).
func artifacts() string {
	if d := os.Getenv("TESSERA_QA_ARTIFACTS"); d != "" {
		return d
	}
	if d := os.Getenv("TESSERA_CI_OUT"); d != "" {
		return filepath.Join(d, "rewrite")
	}
	return filepath.Join(os.TempDir(), "tessera-qa-rewrite")
}

var _ = Describe("the compiler's rewrites", func() {
	for _, e := range rewrite.Catalogue() {
		what := "leaves it alone (" + e.Condition + ")"
		if e.Rewrite {
			what = "rewrites it"
		}
		Describe(e.Name, func() {
			It(e.Pass+" "+what+", as the dump after the pass shows", Label("cpu"), func() {
				Expect(e.CheckStructure()).To(Succeed())
			})
			for _, b := range backend.All() {
				It("computes the same with and without "+e.Pass+" and agrees with engine/ref on "+b.Name(), backendLabels(b), func() {
					if err := b.Available(); err != nil {
						Skip(b.Name() + " unavailable: " + err.Error())
					}
					err := e.CheckNumbers(b, uint64(GinkgoRandomSeed()))
					if err != nil && strings.Contains(err.Error(), ptx.NotLowered) {
						Skip("a declared gap (tessera-qa ops --coverage): " + err.Error())
					}
					Expect(err).To(Succeed())
				})
			}
		})
	}
})

var _ = Describe("random rewrite candidates", Label("cpu"), func() {
	It("are rewritten exactly when every matcher condition holds, and compute the same either way", func() {
		cpu, err := backend.Get("cpu")
		Expect(err).NotTo(HaveOccurred())
		defer property.AdoptFailFile(GinkgoT().Name(), artifacts())
		seed := uint64(GinkgoRandomSeed())
		rapid.Check(GinkgoT(), func(t *rapid.T) {
			g := NewWithT(t)
			e := rewrite.Gen().Draw(t, "candidate")
			g.Expect(e.CheckStructure()).To(Succeed())
			g.Expect(e.CheckNumbers(cpu, seed)).To(Succeed())
		})
	})
})
