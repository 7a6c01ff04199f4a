package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tessera-qa/tessera-qa/harness"
)

func TestPropPassesOnCPU(t *testing.T) {
	t.Chdir(t.TempDir())
	o := cli(t, "prop", "--backend", "cpu", "--checks", "4", "--seed", "9", "--property", "meta/cast-round-trip,agree/ref", "--json", "-")
	o.want(t, ExitOK, "")
	var rep propJSON
	mustJSON(t, o.stdout, &rep)
	if !rep.Passed || rep.Seed != 9 || len(rep.Properties) != 2 {
		t.Fatalf("report %+v: want 2 passing properties under seed 9", rep)
	}
	for _, p := range rep.Properties {
		if p.Backend != "cpu" || p.Checks != 4 || p.Passed != 4 || p.Failed != 0 || p.Verdict != "pass" {
			t.Errorf("%+v: want 4 of 4 passed on cpu", p)
		}
	}
	for _, want := range []string{"seed 9", "PROPERTY", "agree/ref", "meta/cast-round-trip", "PASS"} {
		if !strings.Contains(o.stderr, want) {
			t.Errorf("human report (stderr with --json -) lacks %q:\n%s", want, o.stderr)
		}
	}
}

// A backend that corrupts its outputs fails agree/ref: exit 1, the minimal case's manifest
// and rapid's fail file under --out, and a line saying how to rerun.
func TestPropFailureLeavesManifestAndFailFile(t *testing.T) {
	t.Chdir(t.TempDir())
	out := t.TempDir()
	o := cli(t, "prop", "--backend", "zz-broken", "--checks", "20", "--seed", "4", "--property", "agree/ref", "--out", out)
	o.want(t, ExitFailed, "")
	if !strings.Contains(o.stdout, "FAIL agree/ref on zz-broken") || !strings.Contains(o.stdout, "rerun: tessera-qa prop --property agree/ref --backend zz-broken --seed 4") {
		t.Fatalf("stdout lacks the failure and its rerun line:\n%s", o.stdout)
	}
	manifests, _ := filepath.Glob(filepath.Join(out, "*.replay.json"))
	fails, _ := filepath.Glob(filepath.Join(out, "rapid", "*.fail"))
	if len(manifests) != 1 || len(fails) != 1 {
		t.Fatalf("manifests %v, fail files %v: want one of each", manifests, fails)
	}
	m, err := harness.LoadManifest(manifests[0])
	if err != nil {
		t.Fatal(err)
	}
	if m.Backend != "zz-broken" || m.Suite != "property" {
		t.Errorf("manifest of %s/%s on %s", m.Suite, m.Case, m.Backend)
	}
	if _, err := os.Stat("testdata"); !os.IsNotExist(err) {
		t.Error("rapid's testdata/ was left in the working directory")
	}
}

func TestPropErrors(t *testing.T) {
	cli(t, "prop", "--property", "nope").want(t, ExitUsage, "E_INPUT")
	cli(t, "prop", "--checks=-1").want(t, ExitUsage, "E_INPUT")
	cli(t, "prop", "--failfile", "x.fail").want(t, ExitUsage, "E_INPUT")
	cli(t, "prop", "--backend", "nosuch").want(t, ExitUsage, "E_UNSUPPORTED")
	cli(t, "prop", "--backend", "zz-missing").want(t, ExitMissing, "E_NO_DEVICE")
}
