package differential_test

import (
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/optimizers"
)

var _ = Describe("optimizers against torch.optim", func() {
	It("agree step by step for every configuration: torch and the reference bit for bit in f32 and f64, the engine bit for bit in f32 and normwise 1e-14 in f64", func() {
		rep, err := optimizers.CheckTorch(engine("cpu"), "", GinkgoT().TempDir())
		if errs.CodeOf(err) == errs.NoDevice && !torchOracle.required() {
			Skip(err.Error())
		}
		Expect(err).NotTo(HaveOccurred())
		GinkgoWriter.Printf("%s: %d runs\n", rep.Torch, rep.Runs)
		Expect(rep.Runs).To(Equal(len(optimizers.Configs()) * len(optimizers.TorchDTypes)))
		Expect(rep.Problems).To(BeEmpty(), "%d disagreements:\n%s", len(rep.Problems), strings.Join(rep.Problems, "\n"))
	})
})
