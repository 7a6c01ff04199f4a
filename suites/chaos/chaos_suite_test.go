// Package chaos_test is the chaos suite (issue 11): every fault kind of package chaos that can
// act on this machine is injected into a real data-parallel training job (process ranks over
// tcp, goroutine ranks in-process, containers under Docker), the job recovers through the
// launcher's restarts from its last committed checkpoint, and the checker verifies the
// history: every step and the final parameters bit-identical to the fault-free run, nothing
// lost or applied twice, every fault detected with its code, no hang, no process left.
//
// Labels: chaos (all), docker (needs a Docker daemon; skipped with the reason when none
// answers), slow (the nightly size). $TESSERA_CHAOS_SCHEDULES sets how many random schedules
// run (10 by default, 100 nightly). The process specs run the tessera-qa binary, built once
// for the suite (or $TESSERA_QA_BIN).
package chaos_test

import (
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/tessera-qa/tessera-qa/suites/internal/qabin"
)

func TestChaos(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Chaos Suite")
}

// bin is the tessera-qa binary the process specs run; binErr says why there is none.
var bin, binErr string

var _ = SynchronizedBeforeSuite(func() []byte { return qabin.Build("chaos") },
	func(data []byte) { bin, binErr = qabin.Parse(data) })

var _ = SynchronizedAfterSuite(func() {}, func() { qabin.Remove(bin) })
