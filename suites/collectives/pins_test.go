package collectives_test

import (
	"os"
	"path/filepath"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/tessera-qa/tessera-qa/engine/backend/cpu"
	"github.com/tessera-qa/tessera-qa/engine/dist"
	"github.com/tessera-qa/tessera-qa/harness/pins"
)

// The collectives catalogue pinned per device class (issue 22), as golden/pins pins the
// single-device catalogue: every row of the wire matrix on 2, 3 and 4 in-process ranks, in
// deterministic and exact mode, must give each rank the output digest pinned for the host's
// device class in golden/collective-pins (the harness/pins file format, one case per row key,
// one output digest per rank). The bitwise specs check these modes against the contract; the
// pins catch what both the engine and the reference would agree on changing, and any change of
// the inputs' generator. A class without a file skips with the command that records it.

// collectivePinsDir is golden/collective-pins, from this package's directory (where go test
// runs it).
var collectivePinsDir = filepath.Join("..", "..", "golden", "collective-pins")

// RecordPinsEnv set to 1 makes the spec write the pin file of this class instead of comparing.
const recordPinsEnv = "TESSERA_QA_RECORD_COLLECTIVE_PINS"

// recordCommand (from the repository root) writes golden/collective-pins/<class>.json.
const recordCommand = recordPinsEnv + "=1 TESSERA_QA_BIN=- go test ./suites/collectives -count=1 -ginkgo.focus='collectives catalogue'"

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
		class := new(cpu.Backend).DeviceClass()
		got := collectiveDigests()
		if os.Getenv(recordPinsEnv) == "1" {
			f := pins.File{Format: pins.Format, Version: pins.Version, DeviceClass: class, Cases: map[string]pins.Pin{}}
			for k, d := range got {
				f.Cases[k] = pins.Pin{Outputs: d}
			}
			p, err := pins.Save(collectivePinsDir, f)
			Expect(err).NotTo(HaveOccurred())
			AddReportEntry("recorded", p)
			return
		}
		f, ok, err := pins.Load(os.DirFS(collectivePinsDir), collectivePinsDir, class)
		Expect(err).NotTo(HaveOccurred())
		if !ok {
			Skip("no pinned collective digests for class " + class + "; record them with " + recordCommand)
		}
		diff := pins.Compare(f, got)
		var lines []string
		for _, c := range diff.Changed {
			lines = append(lines, c.Case+": pinned "+c.PinnedDigest()[:16]+", got "+c.GotDigest()[:16])
		}
		Expect(diff.Empty()).To(BeTrue(), "on %s: %d changed, %d added, %d missing (%d same):\n%s\nadded: %v\nmissing: %v\nif the change is on purpose, record again: %s",
			class, len(diff.Changed), len(diff.Added), len(diff.Missing), diff.Same, strings.Join(first(lines, 10), "\n"), first(diff.Added, 5), first(diff.Missing, 5), recordCommand)
		Expect(diff.Same).To(BeNumerically(">", 500))
	})
})

func first(s []string, n int) []string { return s[:min(n, len(s))] }
