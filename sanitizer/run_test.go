package sanitizer

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/errs"
)

func TestLocateOrder(t *testing.T) {
	have := map[string]bool{}
	look := func(p string) (string, error) {
		if have[p] {
			return "/found/" + p, nil
		}
		if strings.HasPrefix(p, "/") && have["abs:"+p] {
			return p, nil
		}
		return "", errors.New("not found")
	}
	glob := func(string) ([]string, error) {
		return []string{"/usr/local/cuda-13.0/bin/compute-sanitizer", "/usr/local/cuda-12.8/bin/compute-sanitizer"}, nil
	}
	env := map[string]string{}
	getenv := func(k string) string { return env[k] }
	if _, err := locate(getenv, look, glob); errs.CodeOf(err) != errs.Unsupported || !strings.Contains(err.Error(), "/usr/local/cuda*/bin") {
		t.Errorf("nothing installed: %v, want E_UNSUPPORTED naming where it looked", err)
	}
	have["abs:/usr/local/cuda-12.8/bin/compute-sanitizer"] = true
	have["abs:/usr/local/cuda-13.0/bin/compute-sanitizer"] = true
	if p, _ := locate(getenv, look, glob); p != "/usr/local/cuda-13.0/bin/compute-sanitizer" {
		t.Errorf("two toolkits: %q, want the newest", p)
	}
	have["compute-sanitizer"] = true
	if p, _ := locate(getenv, look, glob); p != "/found/compute-sanitizer" {
		t.Errorf("on PATH: %q, want PATH's", p)
	}
	env[Var] = "/nowhere/cs"
	if _, err := locate(getenv, look, glob); errs.CodeOf(err) != errs.Unsupported || !strings.Contains(err.Error(), Var) {
		t.Errorf("a bad %s: %v", Var, err)
	}
}

func TestArgsUseOnlyLongStandingOptions(t *testing.T) {
	got := Args(Racecheck, []string{"/bin/child", "-x"})
	if want := []string{"--tool", "racecheck", "--error-exitcode", "86", "/bin/child", "-x"}; !slices.Equal(got, want) {
		t.Errorf("%q, want %q", got, want)
	}
}

// A fake tool (a shell script) stands in for compute-sanitizer: Exec passes the tool and the
// child's command, adds the environment, returns the exit and output, and kills the whole
// process group at the deadline.
func TestExecAgainstAFakeTool(t *testing.T) {
	if _, err := os.Stat("/bin/sh"); err != nil {
		t.Skip("no /bin/sh")
	}
	dir := t.TempDir()
	fake := filepath.Join(dir, "compute-sanitizer")
	script := `#!/bin/sh
echo "========= COMPUTE-SANITIZER"
echo "args: $*"
echo "env: $TESSERA_FAILPOINTS"
if [ "$2" = synccheck ]; then sleep 30 & wait; fi
echo "========= ERROR SUMMARY: 0 errors"
exit 3
`
	if err := os.WriteFile(fake, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	r, err := Exec(context.Background(), fake, Memcheck, []string{"child", "-a"}, []string{"TESSERA_FAILPOINTS=x/y/z"}, 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if r.Exit != 3 || r.TimedOut || !strings.Contains(r.Output, "args: --tool memcheck --error-exitcode 86 child -a") || !strings.Contains(r.Output, "env: x/y/z") {
		t.Errorf("run %+v", r)
	}
	start := time.Now()
	r, err = Exec(context.Background(), fake, Synccheck, []string{"child"}, nil, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if !r.TimedOut || r.Exit != -1 || time.Since(start) > 15*time.Second {
		t.Errorf("deadline: %+v after %s", r, time.Since(start))
	}
	if j := Judge(r, nil); j.Status != Error {
		t.Errorf("a run stopped by its deadline judged %s", j.Status)
	}
	if _, err := Exec(context.Background(), filepath.Join(dir, "missing"), Memcheck, nil, nil, time.Second); errs.CodeOf(err) != errs.Unsupported {
		t.Errorf("a missing tool: %v, want E_UNSUPPORTED", err)
	}
}
