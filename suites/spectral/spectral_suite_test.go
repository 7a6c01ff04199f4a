// Package spectral_test is the spectral suite (issue 26): the FFT accuracy table against a
// float64 reference with the bound c*u*sqrt(log2 N) and the error-growth fit (a twiddle-factor
// bug grows like sqrt(N)), the DFT's metamorphic relations, and what the GPU path does with
// an FFT. TESSERA_SPECTRAL_FULL=1 measures every N from 2 to 4096 and powers of two and primes
// up to 2^20 (nightly); CI measures spectral.CILengths, which include 2^20 and the prime 131071.
package spectral_test

import (
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

func TestSpectral(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Spectral Suite")
}
