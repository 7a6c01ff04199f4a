// Package stress_test runs short, bounded stress soaks of the tessera-qa binary (issue 12):
// concurrent jobs as processes and as goroutines give the bits their graphs gave alone and
// leak nothing; a planted leak (a buffer kept per graph) is caught by the RSS monitor; no
// worker process outlives its run; `devices` lists GPU partitions where a driver is present.
// The pressure specs (pressure_test.go) add a memory hog that fills the backend's memory until
// E_OOM and must recover with its neighbours, and processes hammering one autotune cache that
// the runner corrupts halfway (with --device cuda, also one shared JIT cache).
// The whole CPU suite takes well under a minute on two cores; the GPU specs skip with the
// reason where there is no GPU, and the MIG-only ones where MIG is disabled.
//
// The specs run the tessera-qa binary, built once for the suite (or $TESSERA_QA_BIN).
package stress_test

import (
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/tessera-qa/tessera-qa/suites/internal/qabin"
)

func TestStress(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Stress Suite")
}

// bin is the tessera-qa binary the specs run; binErr says why there is none.
var bin, binErr string

var _ = SynchronizedBeforeSuite(func() []byte { return qabin.Build("stress") },
	func(data []byte) { bin, binErr = qabin.Parse(data) })

var _ = SynchronizedAfterSuite(func() {}, func() { qabin.Remove(bin) })
