package rounding_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/tessera-qa/tessera-qa/engine/backend"
	_ "github.com/tessera-qa/tessera-qa/engine/backend/all"
	"github.com/tessera-qa/tessera-qa/rounding"
)

// backendLabels tags a spec by where it can run: CI runs "cpu"; the nightly GPU runners "gpu".
func backendLabels(b backend.Backend) Labels {
	if b.Name() == "cpu" {
		return Label("cpu")
	}
	return Label("gpu", "nightly")
}

var cases = func() []rounding.Case {
	cs, err := rounding.AllCases()
	if err != nil {
		panic(err) // a bug in the suite's own graphs, before any spec runs
	}
	return cs
}()

// The library cross-check needs Python and torch, not a GPU; it is labelled gpu too so that the
// GPU machine's run (label gpu) repeats it with torch 2.x and JAX's ml_dtypes, which have fp8.
var _ = Describe("the independent encoder", Label("cpu", "gpu"), func() {
	It("agrees with PyTorch, and ml_dtypes (JAX) where installed, on f32 -> f16, bf16 and fp8 (ties, subnormals, overflow, NaN)", func() {
		if why := rounding.TorchAvailable(); why != "" {
			Skip(why)
		}
		compared, err := rounding.CrossCheckTorch()
		GinkgoWriter.Printf("compared: %v\n", compared)
		Expect(err).NotTo(HaveOccurred())
		Expect(len(compared)).To(BeNumerically(">=", 2), "torch converts f32 to f16 and bf16 everywhere")
	})
})

var _ = Describe("numerics.Encode", Label("cpu"), func() {
	for _, c := range cases {
		if c.Graph != nil {
			continue
		}
		It(c.Name+" matches the independent encoder bit for bit", func() {
			got, err := c.Run(nil)
			Expect(err).NotTo(HaveOccurred())
			Expect(c.Compare(got)).To(Succeed())
		})
	}
})

var _ = Describe("kernels", func() {
	for _, b := range backend.All() {
		Describe("on "+b.Name(), backendLabels(b), func() {
			BeforeEach(func() {
				if err := b.Available(); err != nil {
					Skip(b.Name() + " unavailable: " + err.Error())
				}
			})
			for _, c := range cases {
				if c.Graph == nil {
					continue
				}
				It(c.Name+" matches the independent encoder bit for bit", func() {
					got, err := c.Run(b)
					Expect(err).NotTo(HaveOccurred())
					Expect(c.Compare(got)).To(Succeed())
				})
			}
		})
	}
})
