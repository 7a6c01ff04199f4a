// Package stress_test runs short, bounded stress soaks of the tessera-qa binary (issue 12):
// concurrent jobs as processes and as goroutines give the bits their graphs gave alone and
// leak nothing; a planted leak (a buffer kept per graph) is caught by the RSS monitor; no
// worker process outlives its run; `devices` lists GPU partitions where a driver is present.
// The whole CPU suite takes well under a minute on two cores; the GPU specs skip with the
// reason where there is no GPU, and the MIG-only ones where MIG is disabled.
//
// The specs run the tessera-qa binary, built once for the suite (or $TESSERA_QA_BIN).
package stress_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

func TestStress(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Stress Suite")
}

// bin is the tessera-qa binary the specs run; binErr says why there is none.
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
	dir, err := os.MkdirTemp("", "stress-suite-")
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
