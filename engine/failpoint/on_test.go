//go:build failpoints

package failpoint

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/errs"
)

const childEnv = "TESSERA_FAILPOINT_TEST_CHILD"

func TestActivateSwitchesFaults(t *testing.T) {
	if !Compiled {
		t.Fatal("Compiled is false under -tags failpoints")
	}
	t.Cleanup(func() { Activate() })
	a, b := Names()[0], Names()[1]
	if err := Activate(a, " "+b, ""); err != nil {
		t.Fatal(err)
	}
	if !Enabled(a) || !Enabled(b) || Enabled(Names()[2]) {
		t.Errorf("after Activate(%s, %s): Enabled = %v, %v, %v", a, b, Enabled(a), Enabled(b), Enabled(Names()[2]))
	}
	if got := strings.Join(Active(), ","); got != strings.Join([]string{min(a, b), max(a, b)}, ",") {
		t.Errorf("Active() = %s", got)
	}
	if Pick(a, 1, 2) != 2 || Pick(Names()[2], 1, 2) != 1 {
		t.Error("Pick does not follow Enabled")
	}
	if Apply(a, 1, func(x int) int { return x + 10 }) != 11 || Apply(Names()[2], 1, func(x int) int { return x + 10 }) != 1 {
		t.Error("Apply does not follow Enabled")
	}
	if err := Activate(); err != nil || Enabled(a) || Active() != nil {
		t.Errorf("Activate() = %v, then Enabled(%s) = %v, Active = %v: want everything off", err, a, Enabled(a), Active())
	}
}

func TestActivateRejectsUnknownNames(t *testing.T) {
	t.Cleanup(func() { Activate() })
	if err := Activate(Names()[0]); err != nil {
		t.Fatal(err)
	}
	err := Activate(Names()[1], "compiler/matmul/no-such-bug")
	if errs.CodeOf(err) != errs.Input || !strings.Contains(err.Error(), `"compiler/matmul/no-such-bug"`) {
		t.Errorf("Activate(unknown) = %v, want E_INPUT naming it", err)
	}
	if !Enabled(Names()[0]) || Enabled(Names()[1]) {
		t.Error("a rejected Activate changed the active set")
	}
}

// TestEnvironment re-executes this binary: once with two valid names in EnvVar (both on at
// start-up), once with a misspelt one (the process must stop with exit 2, not run clean).
func TestEnvironment(t *testing.T) {
	if os.Getenv(childEnv) == "1" {
		os.Stdout.WriteString("ACTIVE=" + strings.Join(Active(), ",") + "\n")
		return
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	run := func(val string) (string, int) {
		cmd := exec.Command(exe, "-test.run=^TestEnvironment$")
		cmd.Env = append(os.Environ(), childEnv+"=1", EnvVar+"="+val)
		out, err := cmd.CombinedOutput()
		code := 0
		if x, ok := err.(*exec.ExitError); ok {
			code = x.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return string(out), code
	}
	a, b := Names()[3], Names()[0]
	out, code := run(a + "," + b)
	if code != 0 || !strings.Contains(out, "ACTIVE="+min(a, b)+","+max(a, b)+"\n") {
		t.Errorf("child with %s=%s,%s: exit %d\n%s", EnvVar, a, b, code, out)
	}
	out, code = run(a + ",cpu/typo")
	if code != 2 || !strings.Contains(out, `failpoint: `+EnvVar) || !strings.Contains(out, `unknown failpoint "cpu/typo"`) {
		t.Errorf("child with a misspelt fault: exit %d, want 2 and one line naming it\n%s", code, out)
	}
}
