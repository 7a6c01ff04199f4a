// Package ptxas_test assembles the generator's PTX with NVIDIA's assembler on machines without
// a GPU: the golden catalogue's kernels and random graphs' kernels, for sm_90 (the SIMT,
// stream, row, reduction, transpose and mma.sync paths). What only the driver's JIT on the GPU
// machine checked before (that ptxas accepts every kernel) is checked in CI, with what each
// kernel costs the assembler.
package ptxas_test

import (
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

func TestPTXAS(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "PTXAS Suite")
}
