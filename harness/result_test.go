package harness

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

func TestResultsRoundTrip(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "results.json")
	rs := []Result{{
		Schema: ResultSchema, Suite: "golden", Case: "relu/f32", Backend: "cpu", Verdict: VerdictFail,
		Reason: "output %y: ...", Seed: 1<<63 + 5, Labels: []string{"elementwise"},
		InputDigests: map[string]string{"x": "ab"},
		Outputs: []OutputResult{{Name: "y", DType: "f32", Shape: []int{2}, Digest: "cd",
			Check: Check(f32(1, 2), f32(1, 3), DefaultTolerance(numerics.F32))}},
		Env: CaptureEnv(nil), Timing: Timing{CompileMS: 1.5, RunMS: 2}, Replay: "/tmp/x.replay.json",
	}, {Schema: ResultSchema, Suite: "golden", Case: "skip", Verdict: VerdictSkip, ErrorCode: "E_NO_DEVICE", Outputs: []OutputResult{}}}
	if err := WriteResults(path, rs); err != nil {
		t.Fatal(err)
	}
	back, err := ReadResults(path)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, rs) {
		t.Errorf("round trip changed results:\n got %+v\nwant %+v", back, rs)
	}
	data, _ := os.ReadFile(path)
	for _, key := range []string{`"seed": "9223372036854775813"`, `"verdict": "fail"`, `"device_class"`, `"compile_ms": 1.5`, `"max_abs"`} {
		if !strings.Contains(string(data), key) {
			t.Errorf("results JSON lacks %s", key)
		}
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("temporary files left behind: %v", entries)
	}
	if err := WriteResults(path, nil); err != nil {
		t.Fatal(err)
	}
	if data, _ := os.ReadFile(path); strings.TrimSpace(string(data)) != "[]" {
		t.Errorf("no results wrote %q, want []", data)
	}
}

func TestReadResultsRejects(t *testing.T) {
	dir := t.TempDir()
	for name, body := range map[string]string{
		"garbage.json":  `{"not": "an array"`,
		"future.json":   `[{"schema": 99, "suite": "s", "case": "c"}]`,
		"noschema.json": `[{"suite": "s"}]`,
	} {
		p := filepath.Join(dir, name)
		os.WriteFile(p, []byte(body), 0o644)
		_, err := ReadResults(p)
		if errs.CodeOf(err) != errs.Parse || !strings.Contains(err.Error(), p) {
			t.Errorf("%s: got %v, want E_PARSE naming the file", name, err)
		}
	}
	if _, err := ReadResults(filepath.Join(dir, "missing.json")); errs.CodeOf(err) != errs.Input {
		t.Errorf("missing file: %v", err)
	}
}
