package numpyio_test

import (
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/numpyio"
)

// The specs carry the label cast, the op the tensor faults of mutate/fault.go name: the
// mutation check runs a suite's specs of a fault's ops only, so it runs these under those
// faults and skips them, at no cost, under the others.
var ioLabel = Label("cast")

// python returns the interpreter with NumPy, skipping (or failing, when asked for) without.
func python() string {
	py, asked := numpyio.Python()
	if err := numpyio.Available(py); err != nil {
		if asked {
			Fail(err.Error())
		}
		Skip(err.Error())
	}
	return py
}

var _ = Describe("engine-written .npy and .npz", ioLabel, func() {
	It("read in NumPy with the engine's bits, dtype, shape and C order, for every dtype and rank", func() {
		py := python()
		dir := GinkgoT().TempDir()
		entries, err := numpyio.WriteEngine(dir)
		Expect(err).NotTo(HaveOccurred())
		seen := map[string]bool{}
		for _, e := range entries {
			seen[e.Descr] = true
		}
		Expect(seen).To(HaveLen(len(numerics.All) - 2)) // f16 and bf16 share '<u2', both fp8 '|u1'
		problems, err := numpyio.CheckInNumPy(py, entries, dir)
		Expect(err).NotTo(HaveOccurred())
		Expect(problems).To(BeEmpty(), strings.Join(problems, "\n"))
	})
})

var _ = Describe("NumPy-written .npy and .npz", ioLabel, func() {
	It("read in the engine with NumPy's bits and shape (np.save, np.savez, np.savez_compressed), or refused with a code", func() {
		py := python()
		entries, err := numpyio.WriteNumPy(py, GinkgoT().TempDir())
		Expect(err).NotTo(HaveOccurred())
		var refused, read int
		for _, e := range entries {
			Expect(numpyio.ReadInEngine(e)).To(Succeed())
			if e.Refuse != "" {
				refused++
			} else {
				read++
			}
		}
		Expect(refused).To(BeNumerically(">=", 4), "big-endian and Fortran-order files")
		Expect(read).To(BeNumerically(">=", 100))
	})
})
