package harness

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
)

func failingManifest(t *testing.T) (Case, Result, Manifest) {
	t.Helper()
	c := testCase(t)
	r := RunCase(c, zeroStub)
	if r.Verdict != VerdictFail {
		t.Fatalf("setup: verdict %s", r.Verdict)
	}
	m, err := ManifestFor(c, r)
	if err != nil {
		t.Fatal(err)
	}
	return c, r, m
}

func TestManifestRoundTrip(t *testing.T) {
	c, r, m := failingManifest(t)
	dir := filepath.Join(t.TempDir(), "artifacts")
	path, err := WriteManifest(dir, m)
	if err != nil {
		t.Fatal(err)
	}
	back, err := LoadManifest(path)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, m) {
		t.Errorf("round trip changed the manifest:\n got %+v\nwant %+v", back, m)
	}
	rc, err := back.BuildCase()
	if err != nil {
		t.Fatal(err)
	}
	for name, in := range c.Inputs {
		if rc.Inputs[name].Digest() != in.Digest() {
			t.Errorf("input %s changed bits", name)
		}
	}
	if rc.Graph.Name != c.Graph.Name || len(rc.Tolerances) != 1 || rc.Tolerances[0] != c.Tolerances[0] || rc.Seed != c.Seed {
		t.Errorf("rebuilt case differs: %+v", rc)
	}
	if m.Env.Backend != r.Backend || m.Failure != r.Reason {
		t.Errorf("env/failure not recorded: %+v", m)
	}
}

func TestManifestDefaultsResolved(t *testing.T) {
	c := testCase(t)
	c.Tolerances = nil
	m, err := ManifestFor(c, Result{Backend: "cpu"})
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Tolerances) != 1 || m.Tolerances[0] != DefaultTolerance(c.Graph.Outputs[0].Type.DType) {
		t.Errorf("tolerances %+v, want the f32 default", m.Tolerances)
	}
}

// corrupt writes m after edit(JSON object) to a file and returns LoadManifest's error.
func corrupt(t *testing.T, m Manifest, edit func(map[string]any)) (string, error) {
	t.Helper()
	data, _ := json.Marshal(m)
	var obj map[string]any
	json.Unmarshal(data, &obj)
	edit(obj)
	data, _ = json.Marshal(obj)
	path := filepath.Join(t.TempDir(), "m.replay.json")
	os.WriteFile(path, data, 0o644)
	_, err := LoadManifest(path)
	return path, err
}

func TestLoadManifestRejects(t *testing.T) {
	_, _, m := failingManifest(t)

	cases := []struct {
		name string
		edit func(map[string]any)
		code errs.Code
		msg  string
	}{
		{"wrong version", func(o map[string]any) { o["version"] = 2 }, errs.Parse, "manifest version 2"},
		{"unknown field", func(o map[string]any) { o["extra"] = true }, errs.Parse, `unknown field "extra"`},
		{"unknown kind", func(o map[string]any) { o["kind"] = "golden" }, errs.Parse, `kind "golden"`},
		{"bad graph", func(o map[string]any) { o["graph"] = "graph g( {" }, errs.Parse, "graph"},
		{"tampered digest", func(o map[string]any) {
			o["input_digests"].(map[string]any)["x"] = strings.Repeat("0", 64)
		}, errs.Input, "input %x digest mismatch"},
		{"replaced inputs", func(o map[string]any) { o["inputs_npz"] = npzOf(t, m, "x", 999) }, errs.Input, "input %x digest mismatch"},
		{"flipped byte", func(o map[string]any) { o["inputs_npz"] = flipLastDataByte(t, m.InputsNPZ) }, errs.Input, "inputs_npz"},
		{"missing input", func(o map[string]any) { delete(o["input_digests"].(map[string]any), "w") }, errs.Input, "input_digests lacks input %w"},
		{"not base64", func(o map[string]any) { o["inputs_npz"] = "***" }, errs.Parse, "illegal base64"},
		{"seed as number", func(o map[string]any) { o["seed"] = 11 }, errs.Parse, "uint64"},
		{"tolerance count", func(o map[string]any) { o["tolerances"] = []any{} }, errs.Parse, "0 tolerances for 1 outputs"},
		{"digest kind without digests", func(o map[string]any) { o["kind"] = KindDigest }, errs.Parse, "without expect_digests"},
	}
	for _, tc := range cases {
		path, err := corrupt(t, m, tc.edit)
		if err == nil {
			t.Errorf("%s: accepted", tc.name)
			continue
		}
		if errs.CodeOf(err) != tc.code || !strings.Contains(err.Error(), tc.msg) || !strings.Contains(err.Error(), path) {
			t.Errorf("%s: got %q, want %s mentioning %q and the file", tc.name, err, tc.code, tc.msg)
		}
	}

	dir := t.TempDir()
	for name, body := range map[string]string{
		"truncated": `{"version": 1, "suite": `,
		"trailing":  mustJSON(t, m) + ` {}`,
		"array":     `[]`,
	} {
		p := filepath.Join(dir, name)
		os.WriteFile(p, []byte(body), 0o644)
		if _, err := LoadManifest(p); errs.CodeOf(err) != errs.Parse || !strings.Contains(err.Error(), p) {
			t.Errorf("%s: got %v, want E_PARSE naming the file", name, err)
		}
	}
	if _, err := LoadManifest(filepath.Join(dir, "absent")); errs.CodeOf(err) != errs.Input {
		t.Errorf("absent file: %v", err)
	}
}

func TestReplay(t *testing.T) {
	_, _, m := failingManifest(t)
	r, err := Replay(m)
	if err != nil {
		t.Fatal(err)
	}
	if r.Verdict != VerdictFail {
		t.Errorf("zero backend replay: %s, want it to still fail", r.Verdict)
	}
	m.Backend = refStub.name
	if r, err := Replay(m); err != nil || r.Verdict != VerdictPass {
		t.Errorf("replay on a correct backend: %v %s %s", err, r.Verdict, r.Reason)
	}
	m.ScheduleHash = "other"
	if r, _ := Replay(m); !strings.Contains(r.Reason, "schedule hash changed: recorded other") {
		t.Errorf("schedule change not noted: %q", r.Reason)
	}
	m.Backend = "no-such-backend"
	if _, err := Replay(m); errs.CodeOf(err) != errs.Unsupported {
		t.Errorf("unknown backend: %v", err)
	}
	m.Version = 0
	if _, err := Replay(m); errs.CodeOf(err) != errs.Parse {
		t.Errorf("invalid manifest: %v", err)
	}
}

func TestReplayDigestKind(t *testing.T) {
	c := testCase(t)
	first := RunCase(c, flakyStub)
	c.ExpectDigests = []string{first.Outputs[0].Digest}
	r := RunCase(c, flakyStub) // the flaky backend flips a bit on every other call
	if r.Verdict != VerdictFail || r.ErrorCode != string(errs.Nondeterministic) {
		t.Fatalf("flaky run: %s %s", r.Verdict, r.ErrorCode)
	}
	m, err := ManifestFor(c, r)
	if err != nil {
		t.Fatal(err)
	}
	if m.Kind != KindDigest || len(m.ExpectDigests) != 1 || m.Tolerances != nil {
		t.Fatalf("manifest: kind %s digests %v tolerances %v", m.Kind, m.ExpectDigests, m.Tolerances)
	}
	path, err := WriteManifest(t.TempDir(), m)
	if err != nil {
		t.Fatal(err)
	}
	loaded, err := LoadManifest(path)
	if err != nil {
		t.Fatal(err)
	}
	// Calls alternate, so one of two consecutive replays reproduces the failure.
	a, _ := Replay(loaded)
	b, _ := Replay(loaded)
	if (a.Verdict == VerdictFail) == (b.Verdict == VerdictFail) {
		t.Errorf("replays: %s then %s, want one pass and one fail", a.Verdict, b.Verdict)
	}
}

func TestManifestFileName(t *testing.T) {
	plain := ManifestFileName(Manifest{Suite: "golden", Case: "relu_f32", Backend: "cpu"})
	if plain != "golden--relu_f32--cpu.replay.json" {
		t.Errorf("plain name %q", plain)
	}
	a := ManifestFileName(Manifest{Suite: "golden", Case: "matmul/f32", Backend: "cpu"})
	b := ManifestFileName(Manifest{Suite: "golden", Case: "matmul_f32", Backend: "cpu"})
	if a == b || !strings.HasPrefix(a, "golden--matmul_f32--cpu-") {
		t.Errorf("sanitized names %q and %q", a, b)
	}
	for _, evil := range []string{"../../etc/passwd", ".hidden", "", strings.Repeat("x", 500)} {
		n := ManifestFileName(Manifest{Suite: evil, Case: evil, Backend: "cpu"})
		if strings.ContainsAny(n, `/\`) || strings.HasPrefix(n, ".") || len(n) > 240 {
			t.Errorf("unsafe file name %q for %q", n, evil)
		}
	}
}

func npzOf(t *testing.T, m Manifest, replace string, seed uint64) []byte {
	t.Helper()
	c, err := m.BuildCase()
	if err != nil {
		t.Fatal(err)
	}
	old := c.Inputs[replace]
	c.Inputs[replace] = RandomTensor(old.DType, old.Shape, seed, DefaultDist(old.DType))
	var buf bytes.Buffer
	if err := tensor.WriteNPZ(&buf, []string{"w", "x"}, []*tensor.Tensor{c.Inputs["w"], c.Inputs["x"]}); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// flipLastDataByte changes one byte of the last array's data inside the (stored, uncompressed)
// archive, which the zip CRC or the digest must catch.
func flipLastDataByte(t *testing.T, npz []byte) []byte {
	t.Helper()
	out := bytes.Clone(npz)
	i := bytes.LastIndex(out, []byte("PK\x01\x02")) // start of the central directory
	if i < 1 {
		t.Fatal("no central directory")
	}
	out[i-1] ^= 0x40
	return out
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
