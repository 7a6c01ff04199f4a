package golden_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/tessera-qa/tessera-qa/engine/backend"
	"github.com/tessera-qa/tessera-qa/engine/dist"
	"github.com/tessera-qa/tessera-qa/golden"
	"github.com/tessera-qa/tessera-qa/harness"
)

// The multi-rank golden cases (golden.DistCatalogue): every collective op x float/int dtype on
// 2 and 4 ranks and on one axis of a 2x2 mesh. Each case runs as the engine runs a rank
// program: compiler.CompileDist, every rank a goroutine over the in-process transport
// (engine/dist/run), deterministic mode, the segments between collectives on the backend. One
// Describe per op, one It per (case, backend).
var _ = func() bool {
	files, err := golden.LoadAllDist(golden.Data())
	if err != nil {
		It("loads the multi-rank golden files", func() { Fail(err.Error()) })
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
		Describe(op+" (collective)", Label(op, "collective"), func() {
			for _, f := range byOp[op] {
				for _, c := range f.Cases {
					Context(c.Name, func() {
						for _, b := range backend.All() {
							It("matches its golden file on inproc ranks, deterministic mode, "+b.Name(), backendLabels(b), func() {
								if err := b.Available(); err != nil {
									Skip(b.Name() + " unavailable: " + err.Error())
								}
								Expect(c.World).To(BeNumerically(">=", 2))
								r := golden.CheckDist(c, b, dist.Options{Mode: dist.Deterministic})
								Expect(r.Verdict).To(Equal(harness.VerdictPass), "%s on %d inproc ranks (%s): %s", c.Name, c.World, b.Name(), r.Reason)
								again := golden.CheckDist(c, b, dist.Options{Mode: dist.Deterministic})
								Expect(again.Digest).To(Equal(r.Digest), "%s: a second run gave other bits", c.Name)
							})
						}
						It("is reproduced by the golden model", Label("cpu"), func() {
							r := golden.CheckReference(c)
							Expect(r.Verdict).To(Equal(harness.VerdictPass), "engine/ref's RunDist drifted from %s: %s", c.File, r.Reason)
						})
					})
				}
			}
		})
	}
	return true
}()
