//go:build !failpoints

package failpoint

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/errs"
)

// childEnv marks a re-executed copy of this test binary that reports what it sees.
const childEnv = "TESSERA_FAILPOINT_TEST_CHILD"

func TestNormalBuildHasNoFaults(t *testing.T) {
	if Compiled {
		t.Fatal("Compiled is true in a build without -tags failpoints")
	}
	for _, n := range Names() {
		if Enabled(n) {
			t.Errorf("Enabled(%q) is true in a normal build", n)
		}
		if got := Pick(n, 1, 2); got != 1 {
			t.Errorf("Pick(%q, 1, 2) = %d in a normal build, want 1", n, got)
		}
		if got := Apply(n, 1, func(int) int { t.Errorf("Apply(%q) ran the fault in a normal build", n); return 2 }); got != 1 {
			t.Errorf("Apply(%q, 1, f) = %d, want 1", n, got)
		}
	}
}

func TestActivateIsRefusedInANormalBuild(t *testing.T) {
	for _, n := range Names() {
		err := Activate(n)
		if errs.CodeOf(err) != errs.Unsupported || !strings.Contains(err.Error(), n) || !strings.Contains(err.Error(), "-tags failpoints") {
			t.Errorf("Activate(%q) = %v, want E_UNSUPPORTED naming the fault and the build tag", n, err)
		}
		if Enabled(n) || len(Active()) != 0 {
			t.Errorf("after a refused Activate(%q): Enabled %v, Active %v", n, Enabled(n), Active())
		}
	}
	if err := Activate(); err != nil {
		t.Errorf("Activate() with nothing to switch on = %v, want nil", err)
	}
}

// TestEnvironmentIsIgnored starts this binary again with every fault named in EnvVar: a
// normal build must not read it at all.
func TestEnvironmentIsIgnored(t *testing.T) {
	if os.Getenv(childEnv) == "1" {
		var on []string
		for _, n := range Names() {
			if Enabled(n) {
				on = append(on, n)
			}
		}
		os.Stdout.WriteString("ACTIVE=" + strings.Join(append(on, Active()...), ",") + "\n")
		return
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^TestEnvironmentIsIgnored$")
	cmd.Env = append(os.Environ(), childEnv+"=1", EnvVar+"="+strings.Join(Names(), ","))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "ACTIVE=\n") {
		t.Errorf("a normal build with %s set reports faults on:\n%s", EnvVar, out)
	}
}

// TestBuildTagSelectsTheFile asks the go command which files each build compiles: the
// registry (on.go) only under the tag, the constant-false stub (off.go) only without it.
func TestBuildTagSelectsTheFile(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH: cannot ask go list which files each build compiles")
	}
	list := func(tags ...string) []string {
		args := append([]string{"list"}, tags...)
		args = append(args, "-f", "{{range .GoFiles}}{{.}} {{end}}", ".")
		cmd := exec.Command(goTool, args...)
		cmd.Dir, _ = filepath.Abs(".")
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go %v: %v", args, err)
		}
		return strings.Fields(string(out))
	}
	normal, tagged := list(), list("-tags", "failpoints")
	if !slices.Contains(normal, "off.go") || slices.Contains(normal, "on.go") {
		t.Errorf("normal build compiles %v: want off.go and not on.go", normal)
	}
	if !slices.Contains(tagged, "on.go") || slices.Contains(tagged, "off.go") {
		t.Errorf("failpoints build compiles %v: want on.go and not off.go", tagged)
	}
}

func TestNamesAreUniqueAndHierarchical(t *testing.T) {
	seen := map[string]bool{}
	for _, n := range Names() {
		layer, rest, ok := strings.Cut(n, "/")
		if !ok || !slices.Contains([]string{"compiler", "cpu", "numerics", "graph", "tensor", "dist", "optim"}, layer) || !strings.Contains(rest, "/") || strings.ContainsAny(n, " ,=") {
			t.Errorf("fault name %q: want LAYER/AREA/BUG (layer compiler, cpu, numerics, graph, tensor, dist or optim) without spaces, commas or '='", n)
		}
		if seen[n] {
			t.Errorf("fault name %q listed twice", n)
		}
		seen[n] = true
	}
	if len(seen) < 12 {
		t.Errorf("%d faults, want at least 12", len(seen))
	}
}
