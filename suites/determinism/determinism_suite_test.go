// Package determinism_test checks the determinism contract (design.md §4): the same inputs,
// program and device class give the same bits run after run, process after process, and
// whatever the number of threads, for every golden catalogue spec on every backend.
package determinism_test

import (
	"os"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/tessera-qa/tessera-qa/engine/backend"
	_ "github.com/tessera-qa/tessera-qa/engine/backend/all"
	"github.com/tessera-qa/tessera-qa/golden"
)

func TestDeterminism(t *testing.T) {
	// A re-executed copy of this binary only reports digests (see "in a second process").
	if os.Getenv(golden.DigestChildEnv) == "1" {
		if err := golden.PrintDigests(os.Stdout, golden.ComputeDigests(golden.Catalogue(), backend.All())); err != nil {
			t.Fatal(err)
		}
		return
	}
	RegisterFailHandler(Fail)
	RunSpecs(t, "Determinism Suite")
}
