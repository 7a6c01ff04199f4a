// Package sanitizer_test runs our kernels under NVIDIA compute-sanitizer's four tools
// (memcheck, racecheck, initcheck, synccheck) on the GPU machine: this test binary starts
// itself again as the child, under each tool, on a small case set (package sanitizer/cases:
// golden catalogue cases for every PTX generator path plus ragged GEMM, transpose and
// elementwise graphs), with the CUDA allocator's exact sizes so a byte past a buffer is
// outside every allocation. Any report fails, naming the tool, the kernel and the access; a
// tool the machine refuses is skipped with the tool's own line. In a failpoints build the
// two planted code-generator faults are run too and each must be caught. Without a GPU or
// without compute-sanitizer every spec skips with the reason.
package sanitizer_test

import (
	"os"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/tessera-qa/tessera-qa/engine/backend"
	_ "github.com/tessera-qa/tessera-qa/engine/backend/all"
	"github.com/tessera-qa/tessera-qa/sanitizer/cases"
)

func TestSanitizer(t *testing.T) {
	if names := os.Getenv(cases.ChildEnv); names != "" {
		os.Exit(child(names))
	}
	RegisterFailHandler(Fail)
	RunSpecs(t, "Sanitizer Suite")
}

// child is this binary started by a tool: it runs the cases named and exits.
func child(names string) int {
	b, err := backend.Get(cases.ChildBackend(os.Getenv))
	if err != nil {
		os.Stdout.WriteString("tessera-sanitizer-child: " + err.Error() + "\n")
		return 3
	}
	return cases.Child(os.Stdout, names, b)
}
