package collectives_test

import (
	"path/filepath"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/tessera-qa/tessera-qa/determinism/pins"
	"github.com/tessera-qa/tessera-qa/engine/backend/cpu"
	"github.com/tessera-qa/tessera-qa/engine/dist"
)

// The collectives catalogue pinned per device class (issue 22), as golden/pins pins the
// single-device catalogue: every row of the wire matrix on 2, 3 and 4 in-process ranks, in
// deterministic and exact mode, must give each rank the output digest pinned for the host's
// device class in golden/collective-pins (the determinism/pins file format, one case per row key,
// one output digest per rank). The bitwise specs check these modes against the contract; the
// pins catch what both the engine and the reference would agree on changing, and any change of
// the inputs' generator. A class without a file skips with the command that records it.

// collectivePins is golden/collective-pins, from this package's directory (where go test runs).
var collectivePins = pins.Set{Name: "the collectives catalogue", Dir: filepath.Join("..", "..", "golden", "collective-pins"),
	RecordEnv: "TESSERA_QA_RECORD_COLLECTIVE_PINS",
	Record:    "TESSERA_QA_RECORD_COLLECTIVE_PINS=1 TESSERA_QA_BIN=- go test ./suites/collectives -count=1 -ginkgo.focus='collectives catalogue'"}

func collectiveDigests() map[string][]string {
	GinkgoHelper()
	got := map[string][]string{}
	for _, n := range []int{2, 3, 4} {
		for _, mode := range []dist.Mode{dist.Deterministic, dist.Exact} {
			m := wire
			m.Root = n - 1
			for _, r := range inproc(n, m, mode, 0) {
				Expect(r.OK).To(BeTrue(), "%s: %s", r.Key(), r.Note)
				got[r.Key()] = r.RankDigests
			}
		}
	}
	return got
}

var _ = Describe("the collectives catalogue", Label("cpu", "pins"), func() {
	It("returns the digests pinned for this device class", func() {
		o, err := collectivePins.Check(new(cpu.Backend).DeviceClass(), collectiveDigests())
		Expect(err).NotTo(HaveOccurred())
		if o.Recorded != "" {
			AddReportEntry("recorded", o.Recorded)
			return
		}
		if o.Skip != "" {
			Skip(o.Skip)
		}
		Expect(o.Problem).To(BeEmpty())
		Expect(o.Diff.Same).To(BeNumerically(">", 500))
	})
})
