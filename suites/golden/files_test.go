package golden_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/golden"
)

var _ = Describe("the golden files", Label("cpu"), func() {
	It("verify clean", func() {
		problems, err := golden.Verify(golden.Data())
		Expect(err).NotTo(HaveOccurred())
		Expect(problems).To(BeEmpty(), "regenerate with `tessera-qa golden update` if the catalogue changed on purpose")
	})

	It("reject a corrupted golden file with a clear error", func() {
		fsys, err := golden.MapFS(golden.Data())
		Expect(err).NotTo(HaveOccurred())
		data := fsys["matmul/bf16.golden"].Data
		data[len(data)/2] ^= 0x40

		problems, err := golden.Verify(fsys)
		Expect(err).NotTo(HaveOccurred())
		Expect(problems).To(HaveLen(1))
		Expect(problems[0].String()).To(Equal("E_INPUT: golden/data/matmul/bf16.golden: checksum mismatch (file corrupted or edited by hand)"))

		_, err = golden.Load(fsys, "matmul", numerics.BF16)
		Expect(err).To(MatchError(ContainSubstring("golden/data/matmul/bf16.golden: checksum mismatch")))
	})

	It("report a stale file as stale", func() {
		specs := golden.SpecsFor("softmax", numerics.F32)
		specs[1].Tolerances[0].ATol *= 10 // what a tolerance edit without `golden update` leaves behind
		f, err := golden.Generate(specs)
		Expect(err).NotTo(HaveOccurred())
		data, err := golden.Encode(f)
		Expect(err).NotTo(HaveOccurred())
		fsys, err := golden.MapFS(golden.Data())
		Expect(err).NotTo(HaveOccurred())
		fsys["softmax/f32.golden"].Data = data

		problems, err := golden.Verify(fsys)
		Expect(err).NotTo(HaveOccurred())
		Expect(problems).To(HaveLen(1))
		Expect(problems[0].Kind).To(Equal("stale"))
		Expect(problems[0].String()).To(And(
			HavePrefix("E_INPUT: golden/data/softmax/f32.golden: stale: case "+specs[1].Name+": tolerances"),
			HaveSuffix("run `tessera-qa golden update`")))
	})
})
