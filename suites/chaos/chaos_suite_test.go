// Package chaos_test is the chaos suite (issue 11): every fault kind of package chaos that can
// act on this machine is injected into a real data-parallel training job (process ranks over
// tcp, goroutine ranks in-process, containers under Docker), the job recovers through the
// launcher's restarts from its last committed checkpoint, and the checker verifies the
// history: every step and the final parameters bit-identical to the fault-free run, nothing
// lost or applied twice, every fault detected with its code, no hang, no process left.
//
// Labels: chaos (all), docker (needs a Docker daemon; skipped with the reason when none
// answers), slow (the nightly size). $TESSERA_CHAOS_SCHEDULES sets how many random schedules
// run (10 by default, 100 nightly). The process specs run the tessera-qa binary, built once
// for the suite (or $TESSERA_QA_BIN).
package chaos_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

func TestChaos(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Chaos Suite")
}

// bin is the tessera-qa binary the process specs run; binErr says why there is none.
var bin, binErr string

var _ = SynchronizedBeforeSuite(func() []byte {
	if p := os.Getenv("TESSERA_QA_BIN"); p != "" {
		return []byte(p)
	}
	goTool := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(goTool); err != nil {
		if goTool, err = exec.LookPath("go"); err != nil {
			return []byte("!no go tool to build tessera-qa and no $TESSERA_QA_BIN")
		}
	}
	dir, err := os.MkdirTemp("", "chaos-suite-")
	Expect(err).NotTo(HaveOccurred())
	out := filepath.Join(dir, "tessera-qa")
	build := exec.Command(goTool, "build", "-o", out, "github.com/tessera-qa/tessera-qa/cmd/tessera-qa")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if msg, err := build.CombinedOutput(); err != nil {
		return []byte("!go build ./cmd/tessera-qa: " + err.Error() + ": " + string(msg))
	}
	return []byte(out)
}, func(data []byte) {
	if s := string(data); len(s) > 0 && s[0] == '!' {
		binErr = s[1:]
	} else {
		bin = s
	}
})

var _ = SynchronizedAfterSuite(func() {}, func() {
	if bin != "" && os.Getenv("TESSERA_QA_BIN") == "" {
		os.RemoveAll(filepath.Dir(bin))
	}
})
