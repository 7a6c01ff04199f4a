// Package autotune_test is the autotuner's GPU suite: the CUDA backend's event timer choosing
// real configs, the cache on a real device. The CPU side is engine/autotune's unit tests,
// which drive the same code with fake timers.
package autotune_test

import (
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

func TestAutotune(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Autotune Suite")
}
