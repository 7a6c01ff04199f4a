package sharded_test

import (
	"fmt"
	"path/filepath"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/tessera-qa/tessera-qa/determinism/pins"
	"github.com/tessera-qa/tessera-qa/engine/dist"
	"github.com/tessera-qa/tessera-qa/sharded"
)

// The sharded catalogue's rank outputs pinned per device class (golden/sharded-pins): the
// specs above compare a sharded run with one device within a tolerance and with itself, so a
// change that keeps inside the tolerance, and every rerun alike, shows only here.
var shardedPins = pins.Set{Name: "the sharded catalogue", Dir: filepath.Join("..", "..", "golden", "sharded-pins"),
	RecordEnv: "TESSERA_QA_RECORD_SHARDED_PINS",
	Record:    "TESSERA_QA_RECORD_SHARDED_PINS=1 go test ./suites/sharded -count=1 -ginkgo.focus='sharded catalogue'"}

var _ = Describe("The sharded catalogue", Label("cpu", "pins"), func() {
	It("gives every rank the output digests pinned for this device class, in deterministic and exact mode", func() {
		cases, err := sharded.Cases()
		Expect(err).NotTo(HaveOccurred())
		got := map[string][]string{}
		for _, c := range cases {
			for _, mode := range []dist.Mode{dist.Deterministic, dist.Exact} {
				o, err := c.Run(cpu(), mode)
				Expect(err).NotTo(HaveOccurred(), c.Name)
				var ds []string
				for _, outs := range o.Ranks {
					for _, t := range outs {
						ds = append(ds, t.Digest())
					}
				}
				got[fmt.Sprintf("%s/%s", c.Name, mode)] = ds
			}
		}
		o, err := shardedPins.Check(cpu().DeviceClass(), got)
		Expect(err).NotTo(HaveOccurred())
		if o.Recorded != "" {
			AddReportEntry("recorded", o.Recorded)
			return
		}
		if o.Skip != "" {
			Skip(o.Skip)
		}
		Expect(o.Problem).To(BeEmpty())
		Expect(o.Diff.Same).To(Equal(2 * len(cases)))
	})
})
