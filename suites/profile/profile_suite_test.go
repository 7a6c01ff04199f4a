// Package profile_test is the profiling suite (issue 24): profiled runs keep every result's
// bits, every launch is recorded once with the grid the Tile IR gives it, and every trace the
// suite writes passes the trace validator (nesting, units, ids, names).
package profile_test

import (
	"os"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/tessera-qa/tessera-qa/profiling"
)

func TestProfile(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Profile Suite")
}

// traceDir collects every trace the specs write; the suite validates them all at the end.
var traceDir string

var _ = BeforeSuite(func() {
	var err error
	traceDir, err = os.MkdirTemp("", "profile-suite-traces-")
	Expect(err).NotTo(HaveOccurred())
})

var _ = AfterSuite(func() {
	n, err := profiling.ValidateDir(traceDir)
	Expect(err).NotTo(HaveOccurred())
	Expect(n).To(BeNumerically(">", 0), "the suite wrote no trace to validate")
	os.RemoveAll(traceDir)
})
