package determinism_test

import (
	"encoding/json"
	"os"
	"runtime"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/tessera-qa/tessera-qa/engine/backend"
	"github.com/tessera-qa/tessera-qa/golden"
)

// childAnswer is what the digest child reported, shared with every parallel process.
type childAnswer struct {
	Set golden.DigestSet `json:"set"`
	Err string           `json:"err,omitempty"`
}

var child childAnswer

// One child process for the whole suite: process 1 re-executes this binary once and hands its
// digests to every process. A failing child fails only the specs that need it.
var _ = SynchronizedBeforeSuite(func() []byte {
	var a childAnswer
	exe, err := os.Executable()
	if err == nil {
		a.Set, err = golden.DigestsFromChild(5*time.Minute, exe, "-test.run=^TestDeterminism$")
	}
	if err != nil {
		a.Err = err.Error()
	}
	data, err := json.Marshal(a)
	Expect(err).NotTo(HaveOccurred())
	return data
}, func(data []byte) {
	Expect(json.Unmarshal(data, &child)).To(Succeed())
})

func backendLabels(b backend.Backend) Labels {
	if b.Name() == "cpu" {
		return Label("cpu")
	}
	return Label("gpu", "nightly")
}

// digests runs the spec once and fails the spec on an engine error.
func digests(s golden.Spec, b backend.Backend) []string {
	GinkgoHelper()
	d, err := golden.RunDigests(s, b)
	Expect(err).NotTo(HaveOccurred())
	return d
}

var _ = Describe("determinism", func() {
	for _, b := range backend.All() {
		Describe("on "+b.Name(), backendLabels(b), func() {
			BeforeEach(func() {
				if err := b.Available(); err != nil {
					Skip(b.Name() + " unavailable: " + err.Error())
				}
			})
			for _, s := range golden.Catalogue() {
				Context(s.Name, Label(s.Op), func() {
					It("returns the same bits on every run", func() {
						first := digests(s, b)
						for run := 2; run <= 3; run++ {
							Expect(digests(s, b)).To(Equal(first), "E_NONDETERMINISTIC: %s on %s: run %d differs from run 1", s.Name, b.Name(), run)
						}
					})

					It("returns the same bits in a second process", func() {
						Expect(child.Err).To(BeEmpty(), "the digest child failed")
						k := golden.DigestKey(b.Name(), s.Name)
						Expect(child.Set.Errors).NotTo(HaveKey(k), "the child could not run %s", s.Name)
						Expect(child.Set.Digests).To(HaveKey(k), "the child did not run %s", s.Name)
						Expect(digests(s, b)).To(Equal(child.Set.Digests[k]), "E_NONDETERMINISTIC: %s on %s: this process and a second one differ", s.Name, b.Name())
					})

					It("returns the same bits under GOMAXPROCS 1, 2 and 8", func() {
						DeferCleanup(runtime.GOMAXPROCS, runtime.GOMAXPROCS(1))
						first := digests(s, b)
						for _, n := range []int{2, 8} {
							runtime.GOMAXPROCS(n)
							Expect(digests(s, b)).To(Equal(first), "E_NONDETERMINISTIC: %s on %s: GOMAXPROCS %d differs from GOMAXPROCS 1", s.Name, b.Name(), n)
						}
					})
				})
			}
		})
	}
})
