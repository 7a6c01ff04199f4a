package mutate

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// needToolchain skips a test that builds failpoints binaries where it cannot (a machine
// without Go, such as the GPU runner), and in -short runs.
func needToolchain(t *testing.T) (goTool, root string) {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: the mutation check builds and runs the suites under every fault")
	}
	goTool, err := GoTool()
	if err != nil {
		t.Skip(err.Error())
	}
	root, err = FindRoot(".")
	if err != nil {
		t.Skip(err.Error())
	}
	return goTool, root
}

// TestEveryFaultIsCaughtByTheCISuites is the mutation check CI runs: the golden, rewrite,
// rounding, determinism and property suites, the engine's unit tests, training's one-rank specs
// and collectives' bitwise specs (second: a fault of another layer runs none of their specs,
// in no time, and the dist faults skip every suite that cannot see them), built with -tags failpoints, must pass and
// reproduce the normal build's bits with no fault on, and every catalogue fault must make at
// least one of them fail. The property suite comes last because it is the slowest and only
// one fault needs it (the running max initialised to 0, which takes extreme logits). To stay within a few minutes, each fault stops at its first catch
// and the Ginkgo suites run only the specs of the ops it can change; `tessera-qa mutate` runs
// the full table (docs/mutations.md).
// The judge layer's faults (the harness's own checkers loosened) run against the judges
// suite only, the judges' unit tests, and the engine faults never reach it.
func TestEveryFaultIsCaughtByTheCISuites(t *testing.T) {
	_, root := needToolchain(t)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	rep, err := Run(ctx, Options{Root: root, Suites: []string{"golden", "collectives", "verifier", "numpyio", "rewrite", "rounding", "determinism", "engine", "property", "training", "pipeline", "moe", "sharded", "frames", "profile", "spectral", "judges", "doctor"}, StopAtFirstCatch: true, FocusOps: true,
		WorkDir: t.TempDir(), Timeout: 4 * time.Minute,
		Progress: func(e Event) {
			if e.Outcome != nil {
				t.Logf("%s %s %s: %s (%.1fs) %s", e.Phase, e.Fault, e.Suite, e.Outcome.Verdict, e.Outcome.Seconds, e.Outcome.Detail)
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	var table bytes.Buffer
	WriteTable(&table, rep)
	t.Log("\n" + table.String())
	for _, o := range rep.BaselineFailures() {
		t.Errorf("suite %s fails with no fault on (a failpoints build must behave like a normal one): %s", o.Suite, o.Detail)
	}
	if !rep.Bits.OK() {
		t.Errorf("bits: %s", rep.Bits)
	}
	if len(rep.Faults) != len(Catalogue()) {
		t.Errorf("%d faults run, catalogue has %d", len(rep.Faults), len(Catalogue()))
	}
	for _, f := range rep.Faults {
		if len(f.CaughtBy) == 0 {
			t.Errorf("fault %s is caught by no CI suite: %s", f.Name, f.Breaks)
		}
	}
}

// TestFailpointPackageUnderTheTag runs engine/failpoint's own tests in a failpoints build
// (activation, the environment, misspelt names), which plain `go test ./...` never compiles.
func TestFailpointPackageUnderTheTag(t *testing.T) {
	goTool, root := needToolchain(t)
	cmd := exec.Command(goTool, "test", "-tags", "failpoints", "-count=1", "./engine/failpoint")
	cmd.Dir = root
	cmd.Env = append(withoutFailpoints(os.Environ()), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go test -tags failpoints ./engine/failpoint: %v\n%s", err, out)
	}
}

// TestNormalBinaryHasNoRegistry looks inside the tessera-qa binary: a normal build must not
// contain the failpoint registry (the active set in on.go) at all, a failpoints build must,
// which shows the check can tell them apart.
func TestNormalBinaryHasNoRegistry(t *testing.T) {
	goTool, root := needToolchain(t)
	const registry = "engine/failpoint.active"
	for _, tc := range []struct {
		tags []string
		want bool
	}{{nil, false}, {[]string{"-tags", "failpoints"}, true}} {
		bin := filepath.Join(t.TempDir(), "tessera-qa")
		args := append(append([]string{"build"}, tc.tags...), "-o", bin, "./cmd/tessera-qa")
		cmd := exec.Command(goTool, args...)
		cmd.Dir = root
		cmd.Env = append(withoutFailpoints(os.Environ()), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go %v: %v\n%s", args, err, out)
		}
		out, err := exec.Command(goTool, "tool", "nm", bin).Output()
		if err != nil {
			t.Fatalf("go tool nm: %v", err)
		}
		if got := bytes.Contains(out, []byte(registry)); got != tc.want {
			t.Errorf("go %v: symbol %s present = %v, want %v", args, registry, got, tc.want)
		}
	}
}
