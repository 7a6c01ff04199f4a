package training_test

import (
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/tessera-qa/tessera-qa/optimizers"
)

// Every rank and every rerun shares the optimizer, so the specs that compare runs with each
// other cannot see a changed update rule; a reference of the rule itself can.
var _ = Describe("the optimizers", func() {
	It("update every configuration as torch.optim's algorithm does (package optimizers' reference): f32, f16 and bf16 params and state bit for bit, f64 normwise 1e-14, ten steps", func() {
		lines, err := optimizers.Check(cpu())
		Expect(err).NotTo(HaveOccurred())
		Expect(lines).To(BeEmpty(), "%d disagreements:\n%s", len(lines), strings.Join(lines, "\n"))
	})
})
