package determinism_test

import (
	"encoding/json"
	"fmt"
	"github.com/tessera-qa/tessera-qa/engine/compiler/ptx"
	"os"
	"path"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/tessera-qa/tessera-qa/determinism/pins"
	"github.com/tessera-qa/tessera-qa/engine/backend"
	"github.com/tessera-qa/tessera-qa/golden"
	"github.com/tessera-qa/tessera-qa/harness"
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
	if err != nil && strings.Contains(err.Error(), ptx.NotLowered) {
		Skip(err.Error())
	}
	Expect(err).NotTo(HaveOccurred())
	return d
}

// classPins is pins.Load's answer for one device class.
type classPins struct {
	f  pins.File
	ok bool
}

// pinsOf returns the pins compiled into this binary for b's device class, or skips the spec
// when the class has none: a class nobody recorded is reported, never passed.
func pinsOf(b backend.Backend, load func() (classPins, error)) pins.File {
	GinkgoHelper()
	p, err := load()
	Expect(err).NotTo(HaveOccurred())
	if !p.ok {
		Skip(fmt.Sprintf("no pinned digests for class %s; record them with `tessera-qa determinism pin --backend %s` and check in %s",
			b.DeviceClass(), b.Name(), path.Join(golden.PinsRoot, pins.FileName(b.DeviceClass()))))
	}
	return p.f
}

// acceptHint says how a change on purpose is accepted (docs/determinism.md).
func acceptHint(b backend.Backend, name, digest string) string {
	return fmt.Sprintf("if the change is on purpose: `tessera-qa determinism pin --backend %s` stores the new digests, then `%s`, then pin again and check in %s",
		b.Name(), pins.AckCommand(b.DeviceClass(), name, digest), path.Join(golden.PinsRoot, pins.FileName(b.DeviceClass())))
}

var _ = Describe("determinism", func() {
	for _, b := range backend.All() {
		Describe("on "+b.Name(), backendLabels(b), func() {
			BeforeEach(func() {
				if err := b.Available(); err != nil {
					Skip(b.Name() + " unavailable: " + err.Error())
				}
			})
			// Loaded on first use, after BeforeEach found the backend available (an
			// unavailable one has no real class).
			load := sync.OnceValues(func() (classPins, error) {
				f, ok, err := pins.Load(golden.Pins(), golden.PinsRoot, b.DeviceClass())
				return classPins{f, ok}, err
			})

			It("pins every catalogue case and nothing else", func() {
				f := pinsOf(b, load)
				var unpinned, stale []string
				names := map[string]bool{}
				refused := 0
				for _, s := range golden.Catalogue() {
					names[s.Name] = true
					if _, ok := f.Cases[s.Name]; !ok {
						// a case this backend cannot lower yet has nothing to pin
						if _, err := golden.RunDigests(s, b); err != nil && strings.Contains(err.Error(), ptx.NotLowered) {
							refused++
							continue
						}
						unpinned = append(unpinned, s.Name)
					}
				}
				if refused > 0 {
					By(fmt.Sprintf("%d catalogue cases are not lowered on %s yet (no pin expected)", refused, b.Name()))
				}
				for name := range f.Cases {
					if !names[name] {
						stale = append(stale, name)
					}
				}
				slices.Sort(stale)
				Expect(unpinned).To(BeEmpty(), "E_INPUT: %d catalogue cases have no pin on %s (first %s); record them with `tessera-qa determinism pin --backend %s`",
					len(unpinned), b.DeviceClass(), strings.Join(unpinned[:min(3, len(unpinned))], ", "), b.Name())
				Expect(stale).To(BeEmpty(), "E_INPUT: %d pins on %s name no catalogue case (first %s); refresh with `tessera-qa determinism pin --backend %s`",
					len(stale), b.DeviceClass(), strings.Join(stale[:min(3, len(stale))], ", "), b.Name())
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
						if e := child.Set.Errors[k]; strings.Contains(e, ptx.NotLowered) {
							Skip(e)
						}
						Expect(child.Set.Errors).NotTo(HaveKey(k), "the child could not run %s", s.Name)
						Expect(child.Set.Digests).To(HaveKey(k), "the child did not run %s", s.Name)
						Expect(digests(s, b)).To(Equal(child.Set.Digests[k]), "E_NONDETERMINISTIC: %s on %s: this process and a second one differ", s.Name, b.Name())
					})

					It("returns the digests pinned for its device class", func() {
						f := pinsOf(b, load)
						p, ok := f.Cases[s.Name]
						if !ok {
							Skip(fmt.Sprintf("%s has no pin on %s (the spec above lists every unpinned case)", s.Name, b.DeviceClass()))
						}
						got := digests(s, b)
						if !slices.Equal(got, p.Outputs) {
							g := harness.CombineDigests(got)
							Fail(fmt.Sprintf("E_NONDETERMINISTIC: %s on %s: digest %.16s, pinned %.16s; %s",
								s.Name, b.DeviceClass(), g, p.Digest(), acceptHint(b, s.Name, g)))
						}
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
