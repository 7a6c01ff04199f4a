package differential_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

// scaled_matmul's torch oracle is torch._scaled_mm on CUDA where torch has float8, and a
// composite elsewhere (torch 1.13 on the CPU) and for shapes _scaled_mm refuses. On the GPU the
// catalogue's case with N and K multiples of 16 must be computed by _scaled_mm itself, or the
// GPU row would compare against the composite only.
var _ = Describe("scaled_matmul on cuda", Label("gpu", "torch", "scaled_matmul"), func() {
	It("is compared with torch._scaled_mm", func() {
		s := setups[1]
		Expect(s.device).To(Equal("cuda"))
		o := s.oracle.onDevice("cuda")
		if !o.Hello().Float8 {
			Skip(o.Describe() + " has no float8")
		}
		var modes []string
		for _, out := range outcomesOf(s, "scaled_matmul") {
			modes = append(modes, out.Mode)
		}
		Expect(modes).To(ContainElement(ContainSubstring("torch._scaled_mm")), "modes: %v", modes)
	})
})
