package collectives_test

import (
	"context"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/tessera-qa/tessera-qa/collectives/framefaults"
)

// Each fault changes one header field of the frames rank 1 sends rank 0 and keeps the rest
// valid, checksum included: only the check of that field can refuse it.
var _ = Describe("a frame wrong in one header field", Label("cpu"), func() {
	for _, kind := range []string{"inproc", "tcp"} {
		for _, f := range framefaults.Faults {
			if !f.Applies(kind) {
				continue
			}
			It("is refused with E_DESYNC naming header field "+f.Field+" ("+f.Name+", "+string(f.Call)+" over "+kind+"), and no rank keeps wrong data", func() {
				o, err := framefaults.Run(context.Background(), kind, &f, f.Call)
				Expect(err).NotTo(HaveOccurred())
				Expect(o.Judge(f)).To(BeEmpty())
			})
		}
	}
	It("changes nothing when no field is wrong: every call of every rank succeeds with the same bytes on tcp as in process", func() {
		for _, call := range []framefaults.Call{framefaults.CallAllGather, framefaults.CallAllReduce, framefaults.CallBroadcast} {
			o, err := framefaults.Run(context.Background(), "tcp", nil, call)
			Expect(err).NotTo(HaveOccurred())
			for r, e := range o.Errs {
				Expect(e).NotTo(HaveOccurred(), "rank %d, %s", r, call)
			}
			Expect(o.Wrong).To(BeEmpty(), string(call))
		}
	})
})
