package cases

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/backend"
	_ "github.com/tessera-qa/tessera-qa/engine/backend/cpu"
	"github.com/tessera-qa/tessera-qa/sanitizer"
)

// TestMain makes this test binary the child when ChildEnv is set, as the sanitizer suite's
// binary is on the GPU machine.
func TestMain(m *testing.M) {
	if names := os.Getenv(ChildEnv); names != "" {
		b, err := backend.Get(ChildBackend(os.Getenv))
		if err != nil {
			os.Stdout.WriteString("tessera-sanitizer-child: " + err.Error() + "\n")
			os.Exit(3)
		}
		os.Exit(Child(os.Stdout, names, b))
	}
	os.Exit(m.Run())
}

// fakeTool stands in for compute-sanitizer: it drops the tool's options, runs the child with
// its output passed through, prints FAKE_REPORT's report when set, then the summary, and exits
// like the tool (the error exit code after a report, else the child's).
const fakeTool = `#!/bin/sh
[ "$1" = --tool ] || exit 64
shift 2
[ "$1" = --error-exitcode ] || exit 64
code=$2; shift 2
echo "========= COMPUTE-SANITIZER"
"$@"; rc=$?
if [ -n "$FAKE_REPORT" ]; then
  echo "========= Invalid __global__ write of size 4 bytes"
  echo "=========     at $FAKE_REPORT+0x3f0"
  echo "=========     by thread (34,0,0) in block (0,0,0)"
  echo "========= ERROR SUMMARY: 1 error"
  exit $code
fi
echo "========= ERROR SUMMARY: 0 errors"
exit $rc
`

// The whole protocol across processes: a tool (the stand-in) starts this binary as the child
// on the cases named, the child runs them on the CPU backend and writes case lines, Check
// keeps the log and judges it: a pass with every case seen, a fail naming the kernel when the
// tool reports, an error when the child is given a name it does not know.
func TestCheckAcrossProcesses(t *testing.T) {
	if _, err := os.Stat("/bin/sh"); err != nil {
		t.Skip("no /bin/sh")
	}
	dir := t.TempDir()
	tool := filepath.Join(dir, "compute-sanitizer")
	if err := os.WriteFile(tool, []byte(fakeTool), 0o755); err != nil {
		t.Fatal(err)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cs, err := Select(1)
	if err != nil {
		t.Fatal(err)
	}
	names := OnPaths(cs, "simt-transpose", "simt-stream")
	env := []string{BackendEnv + "=cpu"}
	ctx := context.Background()
	log := filepath.Join(dir, "memcheck.log")
	r, err := Check(ctx, tool, sanitizer.Memcheck, []string{exe}, names, env, time.Minute, log)
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != sanitizer.Pass || len(r.Cases) != len(names) || r.Log != log {
		t.Fatalf("clean run: %s %q, %d case lines for %d cases", r.Status, r.Reason, len(r.Cases), len(names))
	}
	if b, _ := os.ReadFile(log); !strings.Contains(string(b), "ERROR SUMMARY: 0 errors") {
		t.Errorf("log:\n%s", b)
	}
	r, err = Check(ctx, tool, sanitizer.Memcheck, []string{exe}, names, append(env, "FAKE_REPORT=tq_k0"), time.Minute, "")
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != sanitizer.Fail || len(r.Kernels) != 1 || r.Kernels[0] != "tq_k0" || !strings.Contains(r.Reason, "__global__ write") {
		t.Errorf("a report: %s %q kernels %v", r.Status, r.Reason, r.Kernels)
	}
	r, err = Check(ctx, tool, sanitizer.Memcheck, []string{exe}, []string{"no/such"}, env, time.Minute, "")
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != sanitizer.Error || !strings.Contains(r.Reason, "E_INPUT") {
		t.Errorf("an unknown case: %s %q", r.Status, r.Reason)
	}
}
