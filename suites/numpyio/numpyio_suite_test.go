// Package numpyio_test is the NumPy round trip of the engine's tensor files (issue 21): every
// dtype at ranks 0, 1 and higher (and size-0 dims where engine/tensor writes them), written by
// the engine and read by NumPy with the same bits, dtype, shape and C order; written by NumPy
// (np.save, np.savez, np.savez_compressed) and read by the engine with the same bits, or
// refused with a coded error (big-endian data, Fortran order). It runs /usr/bin/python3, or
// $TESSERA_QA_PYTHON (then a missing NumPy fails instead of skipping).
package numpyio_test

import (
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

func TestNumPyIO(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "NumPy IO Suite")
}
