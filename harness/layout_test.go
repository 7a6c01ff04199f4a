package harness_test

import (
	"os/exec"
	"strings"
	"testing"
)

// The house rule (design.md §2): harness/ holds what every check shares and sits below the
// checks, so nothing under it, its tests included, may import a methodology package (golden/,
// property/, gradients/ ...); the engine sits below harness/ and its code imports only itself. go list
// gives the real import graph, so a new import anywhere fails here, not in a reader's head.
func TestHarnessImportsNoCheck(t *testing.T) {
	for _, c := range []struct {
		pkgs    string
		tests   bool
		allowed []string
	}{
		{"./...", true, []string{"engine/", "harness"}},
		// The engine's own tests may read the golden catalogue as data; its code may not.
		{"../engine/...", false, []string{"engine/"}},
	} {
		args := []string{"list", "-deps", "-f", "{{.ImportPath}}"}
		if c.tests {
			args = append(args, "-test")
		}
		out, err := exec.Command("go", append(args, c.pkgs)...).CombinedOutput()
		if err != nil {
			t.Fatalf("go list -deps -test %s: %v\n%s", c.pkgs, err, out)
		}
		bad, seen := outside(string(out), c.allowed)
		for _, p := range bad {
			t.Errorf("%s depends on %s, which is outside %v", c.pkgs, p, c.allowed)
		}
		if seen == 0 {
			t.Fatalf("go list -deps %s named no package of the module: the check saw nothing", c.pkgs)
		}
	}
}

const mod = "github.com/tessera-qa/tessera-qa/"

// outside returns the module's packages in go list's output that are under none of allowed,
// and how many of the module's packages it saw.
func outside(out string, allowed []string) (bad []string, seen int) {
	for _, line := range strings.Fields(out) {
		// test variants print as "pkg [pkg.test]": the bracket half names the importer
		if !strings.HasPrefix(line, mod) {
			continue
		}
		seen++
		p := strings.TrimPrefix(line, mod)
		ok := false
		for _, a := range allowed {
			ok = ok || strings.HasPrefix(p, a)
		}
		if !ok {
			bad = append(bad, p)
		}
	}
	return bad, seen
}

// The rule's predicate catches a check package among the deps (a rule that never fires
// proves nothing).
func TestOutsideNamesACheckPackage(t *testing.T) {
	out := mod + "engine/graph\n" + mod + "harness\n" + mod + "golden [" + mod + "harness.test]\n"
	bad, seen := outside(out, []string{"engine/", "harness"})
	if seen != 3 || len(bad) != 1 || bad[0] != "golden" {
		t.Fatalf("outside = %v, %d; want [golden], 3", bad, seen)
	}
}
