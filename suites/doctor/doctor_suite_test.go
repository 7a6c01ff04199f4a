// Package doctor_test is node health (issue 25, package doctor): recorded NVML sessions of
// healthy and faulty GPUs give their documented verdicts, the SDC scan compares every device's
// bits with golden/pins, and a level 2 run on this machine is a complete report in which what
// could not run is skipped with its reason.
package doctor_test

import (
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

func TestDoctor(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Doctor Suite")
}
