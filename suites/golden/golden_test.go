package golden_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/tessera-qa/tessera-qa/engine/compiler/ptx"
	"strings"

	"github.com/tessera-qa/tessera-qa/engine/backend"
	_ "github.com/tessera-qa/tessera-qa/engine/backend/all"
	"github.com/tessera-qa/tessera-qa/golden"
	"github.com/tessera-qa/tessera-qa/harness"
)

// backendLabels tags a spec by where it can run: CI runs "cpu"; the nightly GPU runners run
// "gpu".
func backendLabels(b backend.Backend) Labels {
	if b.Name() == "cpu" {
		return Label("cpu")
	}
	return Label("gpu", "nightly")
}

// One Describe per op, one It per (case, backend). The files are read while the tree is built;
// if they cannot be, a single failing spec says why instead of a silently empty suite.
var _ = func() bool {
	files, err := golden.LoadAll(golden.Data())
	if err != nil {
		It("loads the golden files", func() { Fail(err.Error()) })
		return true
	}
	var ops []string
	byOp := map[string][]*golden.File{}
	for _, f := range files {
		if _, seen := byOp[f.Op]; !seen {
			ops = append(ops, f.Op)
		}
		byOp[f.Op] = append(byOp[f.Op], f)
	}
	for _, op := range ops {
		Describe(op, Label(op), func() {
			for _, f := range byOp[op] {
				for _, c := range f.Cases {
					Context(c.Name, func() {
						for _, b := range backend.All() {
							It("matches its golden file on "+b.Name(), backendLabels(b), func() {
								if err := b.Available(); err != nil {
									Skip(b.Name() + " unavailable: " + err.Error())
								}
								r := golden.CheckSpec(c, b)
								if r.Verdict == harness.VerdictError && strings.Contains(r.Reason, ptx.NotLowered) {
									Skip(r.Reason)
								}
								Expect(r.Verdict).To(Equal(harness.VerdictPass), "%s on %s: %s", c.Name, b.Name(), r.Reason)
							})
						}
						It("is reproduced by the golden model", Label("cpu"), func() {
							r := golden.CheckReference(c)
							Expect(r.Verdict).To(Equal(harness.VerdictPass), "engine/ref drifted from %s: %s", c.File, r.Reason)
						})
					})
				}
			}
		})
	}
	return true
}()
