package pins

import (
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/golden"
)

func TestMarshalIsSortedAndReadsBack(t *testing.T) {
	f := file("cpu/amd64+fma", map[string][]string{"softmax/f32/3": {"s"}, "add/f32/1": {"a"}, "matmul/bf16/7": {"m", "m2"}})
	f.Cases["add/f32/1"] = Pin{Outputs: f.Cases["add/f32/1"].Outputs,
		Accepted: &Accepted{Previous: digest("old"), Reason: "tile order changed <on purpose>", By: "Ada L", Date: "2026-11-25"}}
	a, err := Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5; i++ { // map order differs between iterations; the bytes must not
		if b, _ := Marshal(f); string(b) != string(a) {
			t.Fatal("Marshal is not deterministic")
		}
	}
	s := string(a)
	if !(strings.Index(s, `"add/f32/1"`) < strings.Index(s, `"matmul/bf16/7"`) && strings.Index(s, `"matmul/bf16/7"`) < strings.Index(s, `"softmax/f32/3"`)) {
		t.Errorf("cases not sorted:\n%s", s)
	}
	if !strings.Contains(s, "<on purpose>") || !strings.HasSuffix(s, "}\n") {
		t.Errorf("want HTML left alone and one trailing newline:\n%s", s)
	}
	g, err := Parse(a)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(g, f) {
		t.Errorf("Parse(Marshal(f)) = %+v, want %+v", g, f)
	}
}

func TestParseRefusesBadFiles(t *testing.T) {
	d := digest("x")
	ok := `{"format":"tessera.pins","version":1,"device_class":"cpu/amd64","cases":{"add/f32/1":{"outputs":["` + d + `"]}}}`
	if _, err := Parse([]byte(ok)); err != nil {
		t.Fatalf("the good file: %v", err)
	}
	acc := func(prev, reason, by, date string) string {
		return `{"format":"tessera.pins","version":1,"device_class":"cpu/amd64","cases":{"add/f32/1":{"outputs":["` + d +
			`"],"accepted":{"previous":"` + prev + `","reason":"` + reason + `","by":"` + by + `","date":"` + date + `"}}}}`
	}
	for _, tc := range []struct{ name, data, want string }{
		{"not JSON", `{`, "not a pin file"},
		{"unknown field", strings.Replace(ok, `"version"`, `"extra":1,"version"`, 1), "unknown field"},
		{"trailing data", ok + `{}`, "data after"},
		{"format", strings.Replace(ok, "tessera.pins", "tessera.golden", 1), `format "tessera.golden"`},
		{"newer version", strings.Replace(ok, `"version":1`, `"version":2`, 1), "version 2"},
		{"no version", strings.Replace(ok, `"version":1`, `"version":0`, 1), "version 0"},
		{"empty class", strings.Replace(ok, "cpu/amd64", "", 1), "device class"},
		{"class with a blank", strings.Replace(ok, "cpu/amd64", "cpu amd64", 1), "character ' '"},
		{"no cases", strings.Replace(ok, `{"add/f32/1":{"outputs":["`+d+`"]}}`, `{}`, 1), "no cases"},
		{"case name with a newline", strings.Replace(ok, "add/f32/1", `add\nf32`, 1), "case name"},
		{"no outputs", strings.Replace(ok, `["`+d+`"]`, `[]`, 1), "1 to 64 output digests"},
		{"short digest", strings.Replace(ok, d, d[:63], 1), "output 0"},
		{"upper-case digest", strings.Replace(ok, d, strings.ToUpper(d), 1), "64 lowercase hex"},
		{"bad previous", acc("abc", "why", "me", "2026-11-25"), "accepted.previous"},
		{"empty reason", acc(d, "  ", "me", "2026-11-25"), "accepted.reason"},
		{"reason over two lines", acc(d, `a\nb`, "me", "2026-11-25"), "accepted.reason"},
		{"no author", acc(d, "why", "", "2026-11-25"), "accepted.by"},
		{"bad date", acc(d, "why", "me", "25/11/2026"), "accepted.date"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.data))
			wantCode(t, err, errs.Input, tc.want)
		})
	}
}

func TestFileName(t *testing.T) {
	for class, want := range map[string]string{"cpu/amd64+fma": "cpu_amd64+fma.json", "cpu/amd64+fma/v3": "cpu_amd64+fma_v3.json", "cuda/sm_90": "cuda_sm_90.json"} {
		if got := FileName(class); got != want {
			t.Errorf("FileName(%s) = %s, want %s", class, got, want)
		}
	}
}

func TestLoadSaveAndTheirErrors(t *testing.T) {
	dir := t.TempDir()
	f := file("cuda/sm_90", map[string][]string{"add/f32/1": {"a"}})
	p, err := Save(dir, f)
	if err != nil || p != filepath.Join(dir, "cuda_sm_90.json") {
		t.Fatalf("Save: %s, %v", p, err)
	}
	g, ok, err := Load(os.DirFS(dir), dir, "cuda/sm_90")
	if err != nil || !ok || !reflect.DeepEqual(g, f) {
		t.Fatalf("Load: %+v, %v, %v", g, ok, err)
	}
	if _, ok, err := Load(os.DirFS(dir), dir, "cuda/sm_100"); ok || err != nil {
		t.Errorf("a class without a file: ok %v, err %v; want false, nil", ok, err)
	}
	data, _ := Marshal(f)
	other := fstest.MapFS{"cuda_sm_100.json": {Data: data}, "cpu_amd64.json": {Data: []byte("{}")}}
	_, _, err = Load(other, golden.PinsRoot, "cuda/sm_100")
	wantCode(t, err, errs.Input, "golden/pins/cuda_sm_100.json", "pins device class cuda/sm_90, want cuda/sm_100")
	_, _, err = Load(other, golden.PinsRoot, "cpu/amd64")
	wantCode(t, err, errs.Input, "golden/pins/cpu_amd64.json", "format")
	_, _, err = Load(other, golden.PinsRoot, `cpu\\amd64`)
	wantCode(t, err, errs.Input, "device class")
	if _, err := Save(dir, File{}); errs.CodeOf(err) != errs.Input {
		t.Errorf("Save of an empty file: %v, want E_INPUT", err)
	}
}

// The checked-in pins are what the determinism suite reads: each must parse, be named after
// its class and pin exactly the catalogue.
func TestCheckedInPinsAreValidAndCoverTheCatalogue(t *testing.T) {
	names, err := fs.Glob(golden.Pins(), "*.json")
	if err != nil || len(names) == 0 {
		t.Fatalf("no pin files in golden/pins (%v)", err)
	}
	for _, name := range names {
		data, _ := fs.ReadFile(golden.Pins(), name)
		f, err := Parse(data)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if FileName(f.DeviceClass) != name {
			t.Errorf("%s pins class %s, whose file is %s", name, f.DeviceClass, FileName(f.DeviceClass))
		}
		if b, _ := Marshal(f); string(b) != string(data) {
			t.Errorf("%s is not as Marshal writes it (edited by hand?)", name)
		}
		names := map[string]bool{}
		awaiting := awaitingPins(t, name)
		for _, s := range golden.Catalogue() {
			names[s.Name] = true
			p, ok := f.Cases[s.Name]
			if !ok && awaiting[s.Name] {
				continue
			}
			if ok && awaiting[s.Name] {
				t.Errorf("%s pins %s, which %s still lists as awaiting its pin: remove it there", name, s.Name, awaitingFile(name))
			}
			if !ok || len(p.Outputs) != len(s.Graph.Outputs) {
				t.Errorf("%s: case %s: %d pinned outputs, the graph has %d; refresh with `tessera-qa determinism pin`", name, s.Name, len(p.Outputs), len(s.Graph.Outputs))
			}
		}
		for c := range f.Cases {
			if !names[c] {
				t.Errorf("%s pins %s, which is no catalogue case; refresh with `tessera-qa determinism pin`", name, c)
				break
			}
		}
	}
}

// awaitingFile lists the catalogue cases a class's pins do not hold yet because that class
// cannot be recorded where they were added (cuda pins need the GPU machine): one case name a
// line. `tessera-qa determinism pin --backend cuda` on the GPU machine pins them; then the
// list must go (the test above fails on a listed case that is pinned).
func awaitingFile(pinFile string) string { return strings.TrimSuffix(pinFile, ".json") + ".awaiting" }

func awaitingPins(t *testing.T, pinFile string) map[string]bool {
	t.Helper()
	data, err := fs.ReadFile(golden.Pins(), awaitingFile(pinFile))
	if err != nil {
		return nil
	}
	out := map[string]bool{}
	cat := map[string]bool{}
	for _, s := range golden.Catalogue() {
		cat[s.Name] = true
	}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		if line = strings.TrimSpace(line); line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if !cat[line] {
			t.Errorf("%s lists %s, which is no catalogue case", awaitingFile(pinFile), line)
		}
		out[line] = true
	}
	return out
}
