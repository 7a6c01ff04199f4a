package spectral_test

import (
	"fmt"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/tessera-qa/tessera-qa/engine/backend"
	_ "github.com/tessera-qa/tessera-qa/engine/backend/all"
	"github.com/tessera-qa/tessera-qa/engine/compiler"
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/harness"
	"github.com/tessera-qa/tessera-qa/spectral"
)

// cudaOrSkip returns the cuda backend, or skips the spec with the reason there is none.
func cudaOrSkip() backend.Backend {
	b, err := backend.Get("cuda")
	if err != nil {
		Skip("cuda backend not compiled in: " + err.Error())
	}
	if err := b.Available(); err != nil {
		Skip("no GPU: " + err.Error())
	}
	return b
}

// fftGraph is one FFT op on one input of the given shape.
func fftGraph(op string, dt numerics.DType, attrs graph.Attrs, shape ...int) *graph.Graph {
	name := fmt.Sprintf("%s_%s", op, dt)
	for _, d := range shape {
		name += fmt.Sprintf("_%d", d)
	}
	b := graph.NewBuilder(name)
	b.Output(b.Op(op, attrs, b.Input("x", dt, shape...)))
	g, err := b.Build()
	Expect(err).NotTo(HaveOccurred())
	return g
}

// half is the FFT accuracy convention's input distribution: uniform in [-0.5, 0.5). Nothing
// drawn from it is Hermitian, so an irfft of it reads bins a real signal's spectrum would not have.
var half = map[string]harness.Dist{"x": {Kind: harness.DistUniform, Lo: -0.5, Hi: 0.5}}

// sameBitsOnCuda runs g on the cpu and the cuda backend and fails on the first element whose
// bits differ, naming it and its distance in ulps. A refusal by the code generator is
// returned (the caller decides whether the size may be refused); any other error fails.
func sameBitsOnCuda(cuda backend.Backend, g *graph.Graph, seed uint64) error {
	p, err := compiler.Compile(g, compiler.Options{})
	Expect(err).NotTo(HaveOccurred())
	cpu, err := backend.Get("cpu")
	Expect(err).NotTo(HaveOccurred())
	in, err := harness.RandomInputs(g, seed, half)
	Expect(err).NotTo(HaveOccurred())
	want, err := cpu.Run(p, in)
	Expect(err).NotTo(HaveOccurred())
	got, err := cuda.Run(p, in)
	if errs.CodeOf(err) == errs.Unsupported {
		return err
	}
	Expect(err).NotTo(HaveOccurred(), "%s on cuda", g.Name)
	for i := range want {
		w, c := want[i], got[i]
		Expect(c.Shape).To(Equal(w.Shape), "%s output %d", g.Name, i)
		for j := range w.Len() {
			if a, b := w.Bits(j), c.Bits(j); a != b {
				Fail(fmt.Sprintf("%s output %d element %d of %d: cpu %g, cuda %g (%d ulp apart)",
					g.Name, i, j, w.Len(), w.Float64(j), c.Float64(j), numerics.ULPDistance(w.DType, a, b)))
			}
		}
	}
	return nil
}

var _ = Describe("The FFT on cuda", Label("gpu"), func() {
	// The PTX FFT mirrors the cpu backend's plan operation for operation (fftplan; tile.FFT's
	// bit contract), so the contract is the cpu's bits, not a tolerance; the f32 accuracy table
	// on cuda is then the cpu's (the spec below it says how far up cuda goes).
	DescribeTable("gives the cpu backend's bits",
		func(op string, dt numerics.DType, attrs graph.Attrs, shape ...int) {
			cuda := cudaOrSkip()
			Expect(sameBitsOnCuda(cuda, fftGraph(op, dt, attrs, shape...), 3)).To(Succeed())
		},
		Entry("fft f32 radix 2..5", "fft", numerics.F32, nil, 6, 60, 2),
		Entry("fft f32 radix 7, 11, 13", "fft", numerics.F32, nil, 3, 1001, 2),
		Entry("fft f32 Bluestein 97", "fft", numerics.F32, nil, 5, 97, 2),
		Entry("fft f32 Bluestein 4093", "fft", numerics.F32, nil, 2, 4093, 2),
		Entry("fft f64 4096", "fft", numerics.F64, nil, 2, 4096, 2),
		Entry("fft f64 Bluestein 257", "fft", numerics.F64, nil, 3, 257, 2),
		Entry("ifft f32 ortho 1024", "ifft", numerics.F32, graph.Attrs{"norm": graph.String("ortho")}, 4, 1024, 2),
		Entry("ifft f64 forward 243", "ifft", numerics.F64, graph.Attrs{"norm": graph.String("forward")}, 4, 243, 2),
		Entry("rfft f32 n=100 (pad)", "rfft", numerics.F32, graph.Attrs{"n": graph.Int(100)}, 8, 64),
		Entry("rfft f64 odd 63", "rfft", numerics.F64, nil, 8, 63),
		Entry("irfft f32 n=30 (crop)", "irfft", numerics.F32, graph.Attrs{"n": graph.Int(30)}, 4, 33, 2),
		Entry("irfft f64 odd n=17", "irfft", numerics.F64, graph.Attrs{"n": graph.Int(17)}, 4, 9, 2),
		Entry("fft2 f32 12x10", "fft2", numerics.F32, nil, 2, 12, 10, 2),
		Entry("rfft2 f32 16x9", "rfft2", numerics.F32, nil, 3, 16, 9),
		Entry("irfft2 f64 8x5 -> 8x8", "irfft2", numerics.F64, graph.Attrs{"s": graph.Ints(8, 8)}, 2, 8, 5, 2),
	)

	It("gives the cpu's bits for every accuracy-table length it lowers, and refuses the rest by shared memory", func() {
		cuda := cudaOrSkip()
		largest := 0
		for _, n := range spectral.CILengths {
			for _, op := range []string{"fft", "ifft"} {
				err := sameBitsOnCuda(cuda, fftGraph(op, numerics.F32, nil, n, 2), uint64(n))
				if err != nil {
					Expect(err.Error()).To(ContainSubstring("shared memory"), "%s N=%d", op, n)
					continue
				}
				largest = max(largest, n)
			}
		}
		AddReportEntry(fmt.Sprintf("f32 fft/ifft on cuda: cpu bits up to N=%d of spectral.CILengths; any longer refused by shared memory (a wide-radix end keeps its tile)", largest))
		Expect(largest).To(BeNumerically(">=", 8192))
	})

	// cuFFT and the CPU libraries disagree on an irfft whose input is not a real signal's
	// spectrum (the imaginary parts of DC and Nyquist, and bins that are not conjugate pairs);
	// torch reports it at 2^13 and 2^14. Here the contract is the same bits on both backends.
	DescribeTable("agrees with the cpu on irfft of a non-Hermitian input",
		func(dt numerics.DType, n int) {
			cuda := cudaOrSkip()
			shape := []int{3, n/2 + 1, 2}
			Expect(sameBitsOnCuda(cuda, fftGraph("irfft", dt, graph.Attrs{"n": graph.Int(int64(n))}, shape...), 13)).To(Succeed())
		},
		Entry("f32 2^13", numerics.F32, 1<<13),
		Entry("f32 2^14", numerics.F32, 1<<14),
		Entry("f64 2^13", numerics.F64, 1<<13),
	)
})
