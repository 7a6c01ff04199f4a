package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	fp "github.com/tessera-qa/tessera-qa/engine/failpoint"
	"github.com/tessera-qa/tessera-qa/mutate"
)

func TestMutateListsTheCatalogue(t *testing.T) {
	o := cli(t, "mutate", "--list")
	o.want(t, ExitOK, "")
	for _, n := range fp.Names() {
		if !strings.Contains(o.stdout, n+"  [") {
			t.Errorf("mutate --list does not list %s:\n%s", n, o.stdout)
		}
	}

	o = cli(t, "mutate", "--list", "--faults", "cpu/", "--json", "-")
	o.want(t, ExitOK, "")
	var faults []mutate.Fault
	mustJSON(t, o.stdout, &faults)
	var names []string
	for _, f := range faults {
		names = append(names, f.Name)
		if f.Layer != mutate.LayerCPU || f.Hook == "" || f.Breaks == "" || len(f.Ops) == 0 {
			t.Errorf("--faults cpu/ listed %+v", f)
		}
	}
	var want []string
	for _, n := range fp.Names() {
		if strings.HasPrefix(n, "cpu/") {
			want = append(want, n)
		}
	}
	if len(want) < 4 || !slices.Equal(names, want) {
		t.Errorf("--faults cpu/ listed %v, want %v", names, want)
	}
	if !strings.Contains(o.stderr, fp.CPUReduceRightToLeft+"  [cpu,") {
		t.Errorf("with --json -, the human list belongs on stderr:\n%s", o.stderr)
	}
}

func TestMutateUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"mutate", "--faults", "cpu/no-such-fault"},
		{"mutate", "--list", "--faults", "cpu"},
		{"mutate", "--suites", "goldne"},
		{"mutate", "--jobs", "-1"},
		{"mutate", "extra"},
	} {
		o := cli(t, args...)
		o.want(t, ExitUsage, "E_INPUT")
	}
}

// TestMutateExitsOneWhenAFaultEscapes runs the real thing on a small scale: against the
// golden suite alone, the concat fault is caught and the reduction-order fault is not (only
// the engine's unit tests pin the order), so the verb must exit 1 and name it.
func TestMutateExitsOneWhenAFaultEscapes(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds failpoints binaries")
	}
	if _, err := mutate.GoTool(); err != nil {
		t.Skip(err.Error())
	}
	dir := t.TempDir()
	js, md := filepath.Join(dir, "m.json"), filepath.Join(dir, "m.md")
	o := cli(t, "mutate", "--faults", fp.CPUReduceRightToLeft+","+fp.ConcatOffsetOffByOne, "--suites", "golden",
		"--work", filepath.Join(dir, "bin"), "--json", js, "--markdown", md)
	o.want(t, ExitFailed, "")
	if !strings.Contains(o.stdout, "NOT CAUGHT by any suite (1 of 2): "+fp.CPUReduceRightToLeft) {
		t.Errorf("stdout does not name the escaped fault:\n%s", o.stdout)
	}
	if !strings.Contains(o.stderr, "baseline golden") || !strings.Contains(o.stderr, fp.ConcatOffsetOffByOne+" golden: caught") {
		t.Errorf("progress lines missing on stderr:\n%s", o.stderr)
	}
	data, err := os.ReadFile(js)
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Passed   bool     `json:"passed"`
		Uncaught []string `json:"uncaught"`
		Bits     struct {
			Specs int `json:"specs"`
		} `json:"bits"`
		Faults []struct {
			Name     string   `json:"name"`
			CaughtBy []string `json:"caught_by"`
		} `json:"faults"`
	}
	if err := json.Unmarshal(data, &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Passed || !slices.Equal(rep.Uncaught, []string{fp.CPUReduceRightToLeft}) || rep.Bits.Specs == 0 || len(rep.Faults) != 2 ||
		!slices.Equal(rep.Faults[0].CaughtBy, []string{"golden"}) {
		t.Errorf("JSON report: %+v", rep)
	}
	if mdText, err := os.ReadFile(md); err != nil || !strings.Contains(string(mdText), "| `"+fp.ConcatOffsetOffByOne+"` | compiler | **caught** |") {
		t.Errorf("markdown: %v\n%s", err, mdText)
	}
}
