// Package property_test is the property-based suite (docs/property.md): every property of
// property on every backend, each a rapid.Check under GinkgoT(), so a failure reports the
// case rapid shrank it to and leaves its replay manifest and rapid's fail file under the run's
// artifacts folder ($TESSERA_QA_ARTIFACTS, $TESSERA_CI_OUT/property or the temp dir; the fail
// file in its rapid/ folder), never in the checkout (replay it with -rapid.failfile=PATH).
//
// Reproduce a run with `go tool ginkgo --seed N ./suites/property` (each property's rapid seed
// derives from Ginkgo's), or one failing case with -rapid.seed / -rapid.failfile as rapid's
// report says; -rapid.checks=N overrides every property's count.
package property_test

import (
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

func TestProperty(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Property Suite")
}
