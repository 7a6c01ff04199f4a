package cli

import (
	"encoding/xml"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tessera-qa/tessera-qa/harness"
	"github.com/tessera-qa/tessera-qa/job"
)

func readResults(t *testing.T, out string) []harness.Result {
	t.Helper()
	rs, err := harness.ReadResults(filepath.Join(out, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

// junitCounts parses junit.xml and returns its tests and failures totals.
func junitCounts(t *testing.T, out string) (tests, failures int) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(out, "junit.xml"))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Tests    int `xml:"tests,attr"`
		Failures int `xml:"failures,attr"`
	}
	if err := xml.Unmarshal(b, &doc); err != nil {
		t.Fatalf("junit.xml: %v", err)
	}
	return doc.Tests, doc.Failures
}

func replayFiles(t *testing.T, out string) []string {
	t.Helper()
	fs, err := filepath.Glob(filepath.Join(out, job.RunsDir, "*", "replay", "*.replay.json"))
	if err != nil {
		t.Fatal(err)
	}
	return fs
}

func TestRunOnCPUPasses(t *testing.T) {
	out := t.TempDir()
	o := cli(t, "run", "--backend", "cpu", "--smoke", "5", "--seed", "9", "--out", out, "--json", "-")
	var rep struct {
		Passed  bool               `json:"passed"`
		Backend string             `json:"backend"`
		Seed    string             `json:"seed"`
		Suites  []job.SuiteSummary `json:"suites"`
		Results string             `json:"results"`
	}
	mustJSON(t, o.stdout, &rep)
	rs := readResults(t, out)
	for _, r := range rs {
		if r.Failed() {
			t.Errorf("%s/%s: %s: %s", r.Suite, r.Case, r.Verdict, r.Reason)
		}
	}
	o.want(t, ExitOK, "")
	if !rep.Passed || rep.Backend != "cpu" || rep.Seed != "9" || len(rep.Suites) != len(job.Suites) {
		t.Errorf("run --json: %+v", rep)
	}
	total := 0
	for _, s := range rep.Suites {
		total += s.Passed + s.Failed + s.Errors + s.Skipped
		if s.Suite == job.SuiteSmoke && s.Passed != 5 {
			t.Errorf("smoke suite: %+v, want 5 passed", s)
		}
		if s.Passed == 0 {
			t.Errorf("suite %s ran no case", s.Suite)
		}
	}
	if len(rs) != total {
		t.Errorf("results.json has %d results, summary counts %d", len(rs), total)
	}
	if tests, failures := junitCounts(t, out); tests != total || failures != 0 {
		t.Errorf("junit.xml: %d tests %d failures, want %d and 0", tests, failures, total)
	}
	if fs := replayFiles(t, out); len(fs) != 0 {
		t.Errorf("a passing run wrote replay manifests: %v", fs)
	}
	// With --json -, the human report (and the progress lines) go to stderr.
	for _, s := range []string{"backend cpu:", "smoke seed 9", "golden:", "PASS"} {
		if !strings.Contains(o.stderr, s) {
			t.Errorf("stderr lacks %q:\n%s", s, o.stderr)
		}
	}
}

func TestRunReportsBackendSeedAndTable(t *testing.T) {
	out := t.TempDir()
	o := cli(t, "run", "--suite", "smoke", "--smoke", "3", "--out", out)
	o.want(t, ExitOK, "")
	for _, s := range []string{"backend cpu: ", "cuda", "smoke seed ", "--seed ", "SUITE", "PASSED", "FAILED", "ERRORS", "TIME", "smoke", "results " + filepath.Join(out, "results.json")} {
		if !strings.Contains(o.stdout, s) {
			t.Errorf("stdout lacks %q:\n%s", s, o.stdout)
		}
	}
	if strings.Contains(o.stdout, "golden") {
		t.Errorf("--suite smoke ran other suites:\n%s", o.stdout)
	}
	if !strings.Contains(o.stderr, "smoke: 3 cases") {
		t.Errorf("no plain progress lines on a non-terminal stderr:\n%s", o.stderr)
	}
}

func TestRunBackendErrors(t *testing.T) {
	out := t.TempDir()
	cli(t, "run", "--backend", "zz-missing", "--out", out).want(t, ExitMissing, "E_NO_DEVICE")
	cli(t, "run", "--backend", "nosuch", "--out", out).want(t, ExitUsage, "E_UNSUPPORTED")
	cli(t, "run", "--suite", "bogus", "--out", out).want(t, ExitUsage, "E_INPUT")
}

func TestRunFailureLeavesReplayManifests(t *testing.T) {
	out := t.TempDir()
	o := cli(t, "run", "--backend", "zz-broken", "--suite", "smoke", "--smoke", "4", "--seed", "1", "--out", out)
	o.want(t, ExitFailed, "")
	if !strings.Contains(o.stdout, "FAIL smoke/") || !strings.Contains(o.stdout, "tessera-qa replay ") || !strings.HasSuffix(o.stdout, "FAIL\n") {
		t.Errorf("failing run's report:\n%s", o.stdout)
	}
	if !strings.Contains(o.stderr, "FAIL smoke/") {
		t.Errorf("failures are not announced as they happen:\n%s", o.stderr)
	}
	manifests := replayFiles(t, out)
	if len(manifests) != 4 {
		t.Fatalf("%d replay manifests, want 4", len(manifests))
	}
	if tests, failures := junitCounts(t, out); tests != 4 || failures != 4 {
		t.Errorf("junit.xml: %d tests, %d failures", tests, failures)
	}
	for _, r := range readResults(t, out) {
		if r.Verdict != harness.VerdictFail || r.Replay == "" {
			t.Errorf("%s: verdict %s, replay %q", r.Case, r.Verdict, r.Replay)
		}
	}

	m := manifests[0]
	o = cli(t, "replay", m)
	o.want(t, ExitFailed, "")
	if !strings.Contains(o.stdout, "STILL FAILS") {
		t.Errorf("replay on the broken backend:\n%s", o.stdout)
	}
	o = cli(t, "replay", "--backend", "cpu", m, "--json", "-")
	o.want(t, ExitOK, "")
	var rj replayJSON
	mustJSON(t, o.stdout, &rj)
	if rj.StillFails || rj.Backend != "cpu" || rj.Result.Verdict != harness.VerdictPass || rj.OriginalFailure == "" {
		t.Errorf("replay --json on cpu: %+v", rj)
	}
	cli(t, "replay", "--backend", "zz-missing", m).want(t, ExitMissing, "E_NO_DEVICE")

	// A later run has a folder of its own: its replay folder is empty, and the failing run's
	// manifests (named by its results.json and the results store) are still there to replay.
	o = cli(t, "run", "--backend", "cpu", "--suite", "smoke", "--smoke", "2", "--out", out, "--json", "-")
	o.want(t, ExitOK, "")
	var later runJSON
	mustJSON(t, o.stdout, &later)
	if fs, _ := filepath.Glob(filepath.Join(later.RunDir, "replay", "*")); len(fs) != 0 {
		t.Errorf("a passing run's replay folder holds %v", fs)
	}
	if fs := replayFiles(t, out); !slices.Equal(fs, manifests) {
		t.Errorf("manifests after a later run: %v, want the failing run's %v", fs, manifests)
	}
}

func TestReplayBadManifest(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.replay.json")
	os.WriteFile(bad, []byte(`{"version": 1, "surprise": true}`), 0o644)
	cli(t, "replay", bad).want(t, ExitUsage, "E_PARSE")
	cli(t, "replay", filepath.Join(dir, "absent.json")).want(t, ExitUsage, "E_INPUT")
}

func TestGoldenVerifyAndUpdate(t *testing.T) {
	o := cli(t, "golden", "verify")
	o.want(t, ExitOK, "")
	if !strings.Contains(o.stdout, "golden verify (embedded): ok") {
		t.Errorf("stdout: %s", o.stdout)
	}

	empty := t.TempDir()
	o = cli(t, "golden", "verify", "--dir", empty, "--json", "-")
	if o.code != ExitFailed {
		t.Fatalf("verify of an empty dir: exit %d\n%s", o.code, o.stderr)
	}
	var vj goldenVerifyJSON
	mustJSON(t, o.stdout, &vj)
	lines := strings.Split(strings.TrimRight(o.stderr, "\n"), "\n")
	problems := 0
	for _, l := range lines {
		if strings.HasPrefix(l, "tessera-qa: E_INPUT: ") {
			problems++
		}
	}
	if vj.OK || len(vj.Problems) == 0 || problems != len(vj.Problems) {
		t.Errorf("%d problems in JSON, %d error lines on stderr, ok=%v", len(vj.Problems), problems, vj.OK)
	}
	cli(t, "golden", "verify", "--dir", filepath.Join(empty, "absent")).want(t, ExitUsage, "E_INPUT")

	dir := t.TempDir()
	o = cli(t, "golden", "update", "--dir", dir, "--json", "-")
	o.want(t, ExitOK, "")
	var uj goldenUpdateJSON
	mustJSON(t, o.stdout, &uj)
	if uj.Files == 0 || len(uj.Written) != uj.Files {
		t.Errorf("first update into an empty dir: %+v", uj)
	}
	cli(t, "golden", "verify", "--dir", dir).want(t, ExitOK, "")
	// The default --dir is relative to the repository root, which the test is not in.
	cli(t, "golden", "update").want(t, ExitUsage, "E_INPUT")
}
