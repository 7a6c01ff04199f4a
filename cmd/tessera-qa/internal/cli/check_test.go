package cli

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tessera-qa/tessera-qa/harness"
)

// noSecondProcess keeps check from starting this test binary as its second process.
func noSecondProcess(t *testing.T) {
	exe := checkExe
	t.Cleanup(func() { checkExe = exe })
	checkExe = func() (string, error) { return "", errors.New("in-process test") }
}

func TestCheckPrintsItsVerdictTable(t *testing.T) {
	noSecondProcess(t)
	dir := t.TempDir()
	js := filepath.Join(dir, "check.json")
	o := cli(t, "check", exampleGraph(t), "--backend", "cpu", "--oracle", "none", "--meta-checks", "3", "--artifacts", dir, "--json", js)
	o.want(t, ExitOK, "")
	for _, s := range []string{"random inputs, seed 1", "CHECK", "golden", "determinism/in-process", "gradients", "metamorphic/softmax-shift", "passed, 0 failed"} {
		if !strings.Contains(o.stdout, s) {
			t.Errorf("stdout lacks %q:\n%s", s, o.stdout)
		}
	}
	rs, err := harness.ReadResults(js)
	if err != nil || len(rs) < 8 {
		t.Fatalf("%d results: %v", len(rs), err)
	}
}

func TestCheckFailsOnABrokenBackendWithAReplayThatStillFails(t *testing.T) {
	noSecondProcess(t)
	dir := t.TempDir()
	o := cli(t, "check", exampleGraph(t), "--backend", "zz-broken", "--oracle", "none", "--meta-checks", "2", "--artifacts", dir)
	o.want(t, ExitFailed, "")
	if !strings.Contains(o.stdout, "FAIL") || !strings.Contains(o.stdout, "replay: tessera-qa replay ") {
		t.Fatalf("stdout:\n%s", o.stdout)
	}
	ms, _ := filepath.Glob(filepath.Join(dir, "check--mlp_golden--zz-broken*.replay.json"))
	if len(ms) != 1 {
		t.Fatalf("manifests %v", ms)
	}
	cli(t, "replay", ms[0]).want(t, ExitFailed, "")
}

func TestCheckBadInputIsOneCodedLine(t *testing.T) {
	noSecondProcess(t)
	g := exampleGraph(t)
	bad := filepath.Join(t.TempDir(), "bad.tg")
	os.WriteFile(bad, []byte("graph {"), 0o644)
	cli(t, "check", bad).want(t, ExitUsage, "E_PARSE")
	cli(t, "check", g, "--layout", "w1=col:tp").want(t, ExitUsage, "E_INPUT")
	cli(t, "check", g, "--oracle", "numpy", "--backend", "cpu").want(t, ExitUsage, "E_INPUT")
	cli(t, "check", g, "--in", filepath.Join(t.TempDir(), "none.npz")).want(t, ExitUsage, "")
	cli(t, "check", g, "--backend", "nosuch").want(t, ExitUsage, "")
}

func TestOpsCoveragePrintsTheMatrix(t *testing.T) {
	o := cli(t, "ops", "--coverage")
	o.want(t, ExitOK, "")
	for _, s := range []string{"golden-model", "cpu-lowering", "mse_loss", "all_reduce", "0 gaps"} {
		if !strings.Contains(o.stdout, s) {
			t.Errorf("stdout lacks %q:\n%s", s, o.stdout)
		}
	}
	var j coverageJSON
	mustJSON(t, cli(t, "ops", "--coverage", "--json", "-").stdout, &j)
	if len(j.Rows) < 40 || len(j.Checks) != len(j.Rows[0].Cells) {
		t.Fatalf("json: %d rows", len(j.Rows))
	}
}
