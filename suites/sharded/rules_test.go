package sharded_test

import (
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/tessera-qa/tessera-qa/sharded"
)

// One rule of the shard pass at a time, under every legal layout of its inputs on a 2x2 mesh
// (a seeded sample of 48 where there are more): the catalogue models and the random-layout
// property meet most rules under a few layouts only.
var _ = Describe("Each rule of the shard pass", Label("cpu"), func() {
	for _, r := range sharded.Rules() {
		It("shards "+r.Name+" under every legal layout of its inputs as one device computes it, with a collective over every axis that shards a summed dim", func() {
			problems, n, err := sharded.CheckRule(cpu(), r)
			Expect(err).NotTo(HaveOccurred())
			Expect(n).To(BeNumerically(">=", 13), "layouts run")
			Expect(problems).To(BeEmpty(), "%d of %d layouts:\n%s", len(problems), n, strings.Join(problems, "\n"))
		})
	}
})
