// Package qabin builds the tessera-qa binary once for a Ginkgo suite whose specs run it as a
// process (collectives, training, chaos, stress). Build runs on Ginkgo's first process and
// returns what SynchronizedBeforeSuite hands to every process; Parse reads it back.
package qabin

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
)

// Env names a prebuilt binary to use instead of building one (the GPU machine has no Go);
// "-" says there is none, and the specs that run the CLI skip (the mutation check runs only a
// suite's in-process specs and saves the build).
const Env = "TESSERA_QA_BIN"

// Build returns the binary's path, or "!" and the reason there is none. A built binary lives
// in a fresh temporary folder named after the suite; Remove deletes it.
func Build(suite string) []byte {
	if p := os.Getenv(Env); p == "-" {
		return []byte("!$" + Env + "=- (no tessera-qa binary)")
	} else if p != "" {
		return []byte(p)
	}
	goTool := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(goTool); err != nil {
		if goTool, err = exec.LookPath("go"); err != nil {
			return []byte("!no go tool to build tessera-qa and no $" + Env)
		}
	}
	dir, err := os.MkdirTemp("", suite+"-suite-")
	if err != nil {
		return []byte("!temporary folder for tessera-qa: " + err.Error())
	}
	out := filepath.Join(dir, "tessera-qa")
	build := exec.Command(goTool, "build", "-o", out, "github.com/tessera-qa/tessera-qa/cmd/tessera-qa")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if msg, err := build.CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return []byte("!go build ./cmd/tessera-qa: " + err.Error() + ": " + string(msg))
	}
	return []byte(out)
}

// Parse splits Build's result into the binary's path and the reason there is none.
func Parse(data []byte) (bin, reason string) {
	if s := string(data); len(s) > 0 && s[0] == '!' {
		return "", s[1:]
	}
	return string(data), ""
}

// Remove deletes a binary Build made (never one named by $TESSERA_QA_BIN).
func Remove(bin string) {
	if bin != "" && os.Getenv(Env) == "" {
		os.RemoveAll(filepath.Dir(bin))
	}
}
