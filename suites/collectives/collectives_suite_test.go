// Package collectives_test checks the engine's collectives as nccl-tests checks NCCL's (issue 9,
// item 6): every op, reduction, dtype and count on in-process worlds of 1, 2, 3, 4 and 8 ranks
// and on 2 and 4 processes over tcp matches the float64 global answer; the bits repeat run to
// run, across transports and under injected delays; exact mode's bits do not depend on the
// world size; mismatched calls are E_DESYNC and bad input one coded line, with no rank left.
//
// The process specs run the tessera-qa binary, built once for the suite (or $TESSERA_QA_BIN).
package collectives_test

import (
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/tessera-qa/tessera-qa/suites/internal/qabin"
)

func TestCollectives(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Collectives Suite")
}

// bin is the tessera-qa binary the process specs run; binErr says why there is none.
var bin, binErr string

var _ = SynchronizedBeforeSuite(func() []byte { return qabin.Build("collectives") },
	func(data []byte) { bin, binErr = qabin.Parse(data) })

var _ = SynchronizedAfterSuite(func() {}, func() { qabin.Remove(bin) })
