// Package verifier_test is the negative suite (issue 21): every verifier rule is broken by at
// least one graph of the catalogue in package negative, which the parser, graph.Verify,
// compiler.Compile and the CLI (exec, compile: exit 2, one line) must refuse with the rule's
// error code and a message naming the node and op; and graphs one edit away from a valid one
// must be refused or run and agree with engine/ref. Specs are labelled with their op, so the
// mutation check runs only the cases a fault's ops can reach.
//
// The CLI specs run the tessera-qa binary, built once for the suite (or $TESSERA_QA_BIN; "-"
// skips them, as the mutation check does).
package verifier_test

import (
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/tessera-qa/tessera-qa/suites/internal/qabin"
)

func TestVerifier(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Verifier Suite")
}

var bin, binErr string

var _ = SynchronizedBeforeSuite(func() []byte { return qabin.Build("verifier") },
	func(data []byte) { bin, binErr = qabin.Parse(data) })

var _ = SynchronizedAfterSuite(func() {}, func() { qabin.Remove(bin) })
