package spectral_test

import (
	"os"
	"sync"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/tessera-qa/tessera-qa/engine/compiler"
	"github.com/tessera-qa/tessera-qa/engine/compiler/ptx"
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/spectral"
)

func lengths() []int {
	if os.Getenv("TESSERA_SPECTRAL_FULL") == "1" {
		return spectral.FullLengths()
	}
	return spectral.CILengths
}

// measured is the f32 accuracy table, computed once for the specs below (not an Ordered
// container: the growth fit must run, and report, also when a bound check failed).
var measured = sync.OnceValues(func() ([]spectral.Row, error) {
	var rows []spectral.Row
	for _, n := range lengths() {
		r, err := spectral.Measure(numerics.F32, n, 1)
		if err != nil {
			return nil, err
		}
		GinkgoWriter.Println(r)
		rows = append(rows, r)
	}
	return rows, nil
})

var _ = Describe("FFT accuracy on the cpu backend", Label("cpu"), func() {
	It("keeps every f32 forward, inverse and round trip within c*u*sqrt(log2 N)", func() {
		rows, err := measured()
		Expect(err).NotTo(HaveOccurred())
		for _, r := range rows {
			Expect(r.OK()).To(BeTrue(), "%s", r)
		}
	})
	It("has an error that does not grow like sqrt(N) (the growth fit)", func() {
		rows, err := measured()
		Expect(err).NotTo(HaveOccurred())
		g, err := spectral.FitGrowth(rows)
		Expect(err).NotTo(HaveOccurred())
		GinkgoWriter.Printf("growth: error ~ N^%.3f over %d lengths\n", g.Slope, g.Points)
		Expect(g.Slope).To(BeNumerically("<=", spectral.MaxSlope))
	})
	It("keeps f64 within its bound against the compensated definition", func() {
		for _, n := range []int{2, 3, 16, 17, 60, 97, 256, 1000} {
			r, err := spectral.Measure(numerics.F64, n, 2)
			Expect(err).NotTo(HaveOccurred())
			Expect(r.OK()).To(BeTrue(), "%s", r)
		}
	})
})

var _ = Describe("the DFT's metamorphic relations on the cpu backend", Label("cpu"), func() {
	DescribeTable("hold: linearity, Parseval, shift, modulation, round trip, Hermitian symmetry",
		func(n int) {
			ps, err := spectral.Properties(numerics.F32, n, 5)
			Expect(err).NotTo(HaveOccurred())
			Expect(ps).To(HaveLen(6))
			for _, p := range ps {
				Expect(p.OK()).To(BeTrue(), "%s", p)
			}
		},
		Entry("N=2", 2), Entry("N=7 (radix 7)", 7), Entry("N=64", 64), Entry("N=97 (Bluestein)", 97),
		Entry("N=1000", 1000), Entry("N=4093 (Bluestein)", 4093))
})

var _ = Describe("the GPU code generator", func() {
	It("lowers an FFT on the SIMT path with its tables and scratch as launcher buffers", func() {
		b := graph.NewBuilder("fft_ptx")
		b.Output(b.Op("rfft", nil, b.Input("x", numerics.F32, 4, 64)))
		g, err := b.Build()
		Expect(err).NotTo(HaveOccurred())
		p, err := compiler.Compile(g, compiler.Options{})
		Expect(err).NotTo(HaveOccurred())
		m, err := ptx.Generate(p.Kernels[0], ptx.H100)
		Expect(err).NotTo(HaveOccurred())
		Expect(m.Path).To(Equal("simt"))
		Expect(m.Extra).NotTo(BeEmpty()) // the twiddle table and the scratch (bits: engine/compiler/ptx/fft_emu_test.go)
		// A long row whose passes read and write global memory themselves (radix <= 5 at both
		// ends) needs no tiles: its work rows go to global scratch.
		big := func(op string, attrs graph.Attrs, shape ...int) (*ptx.Module, error) {
			b := graph.NewBuilder("fft_ptx_big")
			b.Output(b.Op(op, attrs, b.Input("x", numerics.F64, shape...)))
			g, err := b.Build()
			Expect(err).NotTo(HaveOccurred())
			p, err := compiler.Compile(g, compiler.Options{})
			Expect(err).NotTo(HaveOccurred())
			return ptx.Generate(p.Kernels[0], ptx.H100)
		}
		m, err = big("irfft", graph.Attrs{"n": graph.Int(16384)}, 1, 8193, 2)
		Expect(err).NotTo(HaveOccurred())
		Expect(m.Extra).To(ContainElement(HaveField("Name", "fft scratch")))
		// One whose first pass is radix 7 keeps its source tile, and a row of 7*4096 f64
		// points does not fit: refused with a coded error.
		_, err = big("fft", nil, 1, 7*4096, 2)
		Expect(errs.CodeOf(err)).To(Equal(errs.Unsupported))
		Expect(err.Error()).To(ContainSubstring("shared memory"))
	})
})
