package cli

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tessera-qa/tessera-qa/differential"
	"github.com/tessera-qa/tessera-qa/engine/backend"
	"github.com/tessera-qa/tessera-qa/engine/graph"
)

func TestDiffUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"diff", "--oracle", "tensorflow"},
		{"diff", "--device", "tpu"},
		{"diff", "--seeds", "0"},
		{"diff", "--ops", "exp,no_such_op"},
		{"diff", "--timeout", "0s"},
		{"diff", "extra"},
	} {
		o := cli(t, args...)
		o.want(t, ExitUsage, "E_INPUT")
		if !strings.Contains(o.stderr, "tessera-qa diff --help") {
			t.Errorf("%v: %s", args, o.stderr)
		}
	}
}

func TestDiffMappingListsEveryOp(t *testing.T) {
	o := cli(t, "diff", "--mapping")
	o.want(t, ExitOK, "")
	var listed []string
	for _, line := range strings.Split(strings.TrimSpace(o.stdout), "\n")[1:] {
		listed = append(listed, strings.Fields(line)[0])
	}
	var ops []string
	for _, d := range graph.Ops() {
		ops = append(ops, d.Name)
	}
	slices.Sort(listed)
	if !slices.Equal(listed, ops) {
		t.Errorf("--mapping lists %v, registry has %v", listed, ops)
	}
	o = cli(t, "diff", "--mapping", "--json", "-")
	o.want(t, ExitOK, "")
	var m []differential.OpMapping
	mustJSON(t, o.stdout, &m)
	if len(m) != len(ops) {
		t.Errorf("--json has %d mappings for %d ops", len(m), len(ops))
	}
}

// fakePython is a stand-in interpreter (a shell script) playing the oracle's part in body.
func fakePython(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "python")
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestDiffMissingEnvironmentIsExit3(t *testing.T) {
	o := cli(t, "diff", "--python", filepath.Join(t.TempDir(), "no-python"))
	o.want(t, ExitMissing, "E_NO_DEVICE")

	noTorch := fakePython(t, `echo '{"type":"hello","protocol":1,"framework":"torch","python":"3.9","error":"ModuleNotFoundError: No module named torch"}'`)
	t.Setenv(differential.PythonEnv, noTorch)
	o = cli(t, "diff", "--ops", "exp")
	o.want(t, ExitMissing, "E_NO_DEVICE")
	if !strings.Contains(o.stderr, "No module named torch") {
		t.Errorf("the reason is missing: %s", o.stderr)
	}

	o = cli(t, "diff", "--backend", "zz-missing")
	o.want(t, ExitMissing, "E_NO_DEVICE")
	o = cli(t, "diff", "--backend", "no-such-backend")
	o.want(t, ExitUsage, "E_UNSUPPORTED")

	if b, err := backend.Get("cuda"); err == nil && b.Available() != nil {
		o = cli(t, "diff", "--device", "cuda")
		o.want(t, ExitMissing, "E_NO_DEVICE")
		if !strings.Contains(o.stderr, "cuda") {
			t.Errorf("--device cuda: %s", o.stderr)
		}
	}
}

// A hung oracle turns into E_TIMEOUT errors in the report and exit 1, never a hang.
func TestDiffHungOracle(t *testing.T) {
	hang := fakePython(t, `echo '{"type":"hello","protocol":1,"framework":"torch","version":"fake","devices":["cpu"]}'
exec sleep 60`)
	o := cli(t, "diff", "--ops", "exp", "--python", hang, "--timeout", "300ms", "--json", "-")
	o.want(t, ExitFailed, "")
	var rep diffJSON
	mustJSON(t, o.stdout, &rep)
	if rep.Passed || len(rep.Rows) == 0 || len(rep.Results) == 0 {
		t.Fatalf("report %+v", rep)
	}
	for _, r := range rep.Rows {
		if r.Verdict != differential.RowError || !strings.Contains(r.Reason, "E_TIMEOUT") || !strings.Contains(r.Reason, "op exp") {
			t.Errorf("row %s/%s: %s %q", r.Op, r.DType, r.Verdict, r.Reason)
		}
	}
}

// The whole registry against torch (skipped when no interpreter has torch and none was named),
// then a broken engine, which must fail.
func TestDiffAgainstTorch(t *testing.T) {
	o := cli(t, "diff", "--oracle", "torch", "--seeds", "2", "--json", "-")
	if o.code == ExitMissing && os.Getenv(differential.PythonEnv) == "" {
		t.Skip(o.stderr)
	}
	o.want(t, ExitOK, "")
	var rep diffJSON
	mustJSON(t, o.stdout, &rep)
	pairs := 0
	for _, d := range graph.Ops() {
		pairs += len(d.DTypes)
	}
	if len(rep.Rows) != pairs || !rep.Passed || rep.Oracle.Framework != "torch" || rep.Seeds != 2 || len(rep.Results) != rep.Cases {
		t.Errorf("report: %d rows for %d registry pairs, passed %v, oracle %+v, seeds %d, %d results for %d cases",
			len(rep.Rows), pairs, rep.Passed, rep.Oracle, rep.Seeds, len(rep.Results), rep.Cases)
	}
	for _, r := range rep.Rows {
		if r.Verdict != differential.RowPass || r.Passed < 2 {
			t.Errorf("row %s/%s: %s, %d passed: %s", r.Op, r.DType, r.Verdict, r.Passed, r.Reason)
		}
	}
	if !strings.Contains(o.stderr, "PASS") || !strings.Contains(o.stderr, "MAX_ULP") {
		t.Errorf("human report:\n%s", o.stderr)
	}

	o = cli(t, "diff", "--ops", "exp", "--backend", "zz-broken", "--out", t.TempDir())
	o.want(t, ExitFailed, "")
	for _, s := range []string{"fail", "FAIL", "golden model agrees with torch", "tessera-qa replay"} {
		if !strings.Contains(o.stdout, s) {
			t.Errorf("broken engine report lacks %q:\n%s", s, o.stdout)
		}
	}
}
