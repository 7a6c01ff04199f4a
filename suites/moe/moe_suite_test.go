// Package moe_test checks mixture-of-experts training (issue 27) with experts over an ep axis:
// every gradient as on one rank and as an independent float64 reference says, padded and
// unpadded dispatch alike, capacity respected, exact ties routed as on every backend, a rank
// whose experts receive no token, the bits over tcp. All in process, a few seconds.
package moe_test

import (
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

func TestMoE(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "MoE Suite")
}
