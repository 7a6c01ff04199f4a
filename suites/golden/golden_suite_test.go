// Package golden_test is the golden suite: every catalogue case against its golden file on
// every backend, the golden model against the files, and the file checks themselves.
package golden_test

import (
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

func TestGolden(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Golden Suite")
}
