// Package pipeline_test checks pipeline-parallel training (issue 27) against the unpipelined
// run: every rank's gradients within PyTorch's pipeline-test tolerance, the gradient norm
// invariant to the micro-batch count, the accumulation steps and the pp size, the bits the same
// run after run and over tcp, the bubble the schedule's formula, and a deadlocking schedule
// refused before it runs. Every spec runs in process (no binary), in a few seconds.
package pipeline_test

import (
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

func TestPipeline(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Pipeline Suite")
}
