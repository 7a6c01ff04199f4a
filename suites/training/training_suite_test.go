// Package training_test checks the reference training workload (issue 10): the same seed gives
// the same loss curve and final digest bit for bit, in one process and over tcp; a run killed by SIGKILL
// and resumed from its checkpoint ends with the digest of the uninterrupted run.
//
// The process specs run the tessera-qa binary, built once for the suite (or $TESSERA_QA_BIN).
package training_test

import (
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/tessera-qa/tessera-qa/suites/internal/qabin"
)

func TestTraining(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Training Suite")
}

// bin is the tessera-qa binary the process specs run; binErr says why there is none.
var bin, binErr string

var _ = SynchronizedBeforeSuite(func() []byte { return qabin.Build("training") },
	func(data []byte) { bin, binErr = qabin.Parse(data) })

var _ = SynchronizedAfterSuite(func() {}, func() { qabin.Remove(bin) })
