package mutate

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/onsi/ginkgo/v2/types"

	fp "github.com/tessera-qa/tessera-qa/engine/failpoint"
	"github.com/tessera-qa/tessera-qa/harness"
)

func writeReport(t *testing.T, specs ...types.SpecReport) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "report.json")
	data, err := json.Marshal([]types.Report{{SuiteSucceeded: true, SpecReports: specs}})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func spec(text string, state types.SpecState, msg string) types.SpecReport {
	return types.SpecReport{ContainerHierarchyTexts: []string{"matmul"}, LeafNodeText: text, LeafNodeType: types.NodeTypeIt,
		State: state, Failure: types.Failure{Message: msg}}
}

func TestGinkgoOutcome(t *testing.T) {
	out := &tailBuffer{}
	out.Write([]byte("noise\npanic: boom in BeforeSuite\n"))
	cases := []struct {
		name    string
		passed  bool
		report  string
		verdict Verdict
		detail  string
	}{
		{"a failing spec is a catch", false, writeReport(t, spec("a", types.SpecStatePassed, ""), spec("b", types.SpecStateFailed, "got 1\nwant 2")),
			Caught, "matmul b: got 1"},
		{"a timed-out spec is a catch", false, writeReport(t, spec("c", types.SpecStateTimedout, "slow")), Caught, "matmul c: slow"},
		{"a passing suite misses", true, writeReport(t, spec("a", types.SpecStatePassed, ""), spec("s", types.SpecStateSkipped, "gpu")), Missed, ""},
		{"all skipped is a skip", true, writeReport(t, spec("s", types.SpecStateSkipped, "no torch: install python3-torch")), Skipped, "matmul s: no torch"},
		{"nothing ran is a skip", true, writeReport(t), Skipped, "suites/x: no spec ran"},
		{"failing without a report is a catch", false, filepath.Join(t.TempDir(), "none.json"), Caught, "suites/x: panic: boom in BeforeSuite"},
		{"passing without a report is an error", true, filepath.Join(t.TempDir(), "none.json"), Errored, "report is unreadable"},
	}
	for _, c := range cases {
		o := ginkgoOutcome("suites/x", c.passed, c.report, out)
		if o.Verdict != c.verdict || !strings.Contains(o.Detail, c.detail) {
			t.Errorf("%s: %s %q, want %s containing %q", c.name, o.Verdict, o.Detail, c.verdict, c.detail)
		}
	}
}

func TestGoTestFailure(t *testing.T) {
	out := "=== RUN   TestA\n--- PASS: TestA (0.00s)\n--- FAIL: TestReduceOrder (0.00s)\n    instr_test.go:330: sum/f32[0] = 0, want 1\nFAIL\n"
	if got := goTestFailure(out); got != "--- FAIL: TestReduceOrder (0.00s) instr_test.go:330: sum/f32[0] = 0, want 1" {
		t.Errorf("goTestFailure = %q", got)
	}
	if got := goTestFailure("panic: runtime error\nexit status 2\n"); got != "exit status 2" {
		t.Errorf("goTestFailure without a FAIL line = %q, want the last line", got)
	}
}

func TestSmokeOutcome(t *testing.T) {
	out := &tailBuffer{}
	out.Write([]byte("smoke: 200 cases\nFAIL\n"))
	res := filepath.Join(t.TempDir(), "results.json")
	err := harness.WriteResults(res, []harness.Result{
		{Schema: harness.ResultSchema, Suite: "smoke", Case: "000-add-f32", Verdict: harness.VerdictPass, Outputs: []harness.OutputResult{}},
		{Schema: harness.ResultSchema, Suite: "smoke", Case: "001-concat-f16", Verdict: harness.VerdictFail, Reason: "4 of 20 elements out of tolerance", Outputs: []harness.OutputResult{}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if o := smokeOutcome(0, res, out); o.Verdict != Missed {
		t.Errorf("exit 0: %v", o)
	}
	if o := smokeOutcome(1, res, out); o.Verdict != Caught || o.Detail != "smoke/001-concat-f16: 4 of 20 elements out of tolerance" {
		t.Errorf("exit 1: %v", o)
	}
	if o := smokeOutcome(2, res, out); o.Verdict != Errored || !strings.Contains(o.Detail, "exited 2: FAIL") {
		t.Errorf("exit 2: %v", o)
	}
}

func TestCombine(t *testing.T) {
	c := func(vs ...Verdict) Verdict {
		var outs []Outcome
		for _, v := range vs {
			outs = append(outs, Outcome{Verdict: v, Detail: string(v)})
		}
		return combine("engine", outs).Verdict
	}
	for _, tc := range []struct {
		in   []Verdict
		want Verdict
	}{
		{[]Verdict{Missed, Caught}, Caught},
		{[]Verdict{Errored, Caught}, Caught},
		{[]Verdict{Missed, Errored}, Errored},
		{[]Verdict{Skipped, Missed}, Missed},
		{[]Verdict{Skipped, Skipped}, Skipped},
		{nil, Skipped},
	} {
		if got := c(tc.in...); got != tc.want {
			t.Errorf("combine(%v) = %s, want %s", tc.in, got, tc.want)
		}
	}
}

func TestTailBufferKeepsTheEnd(t *testing.T) {
	var b tailBuffer
	for i := range 5 * tailBytes / 1000 {
		b.Write([]byte(strings.Repeat("x", 999) + "\n"))
		_ = i
	}
	b.Write([]byte("the last line\n"))
	if len(b.String()) != tailBytes || b.lastLine() != "the last line" || len(b.b) > 2*tailBytes {
		t.Errorf("tail of %d bytes (buffer %d), last line %q", len(b.String()), len(b.b), b.lastLine())
	}
}

func TestWithoutFailpoints(t *testing.T) {
	env := withoutFailpoints([]string{"A=1", fp.EnvVar + "=cpu/x", fp.EnvVar + "X=2"})
	if strings.Join(env, " ") != "A=1 "+fp.EnvVar+"X=2" {
		t.Errorf("withoutFailpoints = %v", env)
	}
}

func TestClip(t *testing.T) {
	s := clip(strings.Repeat("é", 400))
	if len(s) > maxDetail || !strings.HasSuffix(s, "...") || !strings.HasPrefix(s, "é") {
		t.Errorf("clip gave %d bytes: %q", len(s), s[len(s)-10:])
	}
	if clip("a\n  b\tc") != "a b c" {
		t.Errorf("clip does not join lines: %q", clip("a\n  b\tc"))
	}
}

func TestLabelFilter(t *testing.T) {
	if got := labelFilter(nil); got != "!gpu" {
		t.Errorf("labelFilter(nil) = %q", got)
	}
	if got := labelFilter([]string{"matmul", "batch_matmul"}); got != "!gpu && (matmul || batch_matmul)" {
		t.Errorf("labelFilter(matmul, batch_matmul) = %q", got)
	}
}

func TestFailureText(t *testing.T) {
	for msg, want := range map[string]string{
		"[rapid] failed after 3 tests: \nagree/nan-inf on cpu: got NaN\nExpected\n    <string>: fail": "[rapid] failed after 3 tests: agree/nan-inf on cpu: got NaN",
		"add/f32/1 on cpu: 1 of 1 elements out of tolerance\nExpected\n    <string>: fail":            "add/f32/1 on cpu: 1 of 1 elements out of tolerance",
		"coverage: \nExpected\n    <[]string | len:1>: [a]":                                           "coverage:",
		"one\n\ntwo\nthree": "one two",
	} {
		if got := failureText(msg); got != want {
			t.Errorf("failureText(%q) = %q, want %q", msg, got, want)
		}
	}
}

func TestByBaseNameKeepsBinaryNamesApart(t *testing.T) {
	got := byBaseName([]string{"suites/determinism", "suites/collectives", "engine/graph", "collectives", "chaos", "x/collectives"})
	want := [][]string{{"suites/determinism", "suites/collectives", "engine/graph", "chaos"}, {"collectives"}, {"x/collectives"}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("byBaseName: %v, want %v", got, want)
	}
}
