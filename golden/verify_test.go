package golden

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

func dataCopy(t *testing.T) fstest.MapFS {
	t.Helper()
	m, err := MapFS(Data())
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// only verifies fsys and returns its single problem, failing the test if there is not exactly one.
func only(t *testing.T, fsys fs.FS) Problem {
	t.Helper()
	ps, err := Verify(fsys)
	if err != nil {
		t.Fatal(err)
	}
	if len(ps) != 1 {
		t.Fatalf("want exactly one problem, got %d: %v", len(ps), ps)
	}
	return ps[0]
}

func TestEmbeddedDataVerifiesClean(t *testing.T) {
	ps, err := Verify(Data())
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range ps {
		t.Errorf("%s (regenerate with TESSERA_GOLDEN_UPDATE=1 go test ./golden -run TestWriteGoldenData)", p)
	}
}

func TestVerifyReportsACorruptedFile(t *testing.T) {
	m := dataCopy(t)
	f := m["matmul/bf16.golden"]
	f.Data[len(f.Data)-5] ^= 0x01 // one bit of an expected output
	p := only(t, m)
	want := "E_INPUT: golden/data/matmul/bf16.golden: checksum mismatch (file corrupted or edited by hand)"
	if p.Kind != "checksum" || p.String() != want || errs.CodeOf(p.Err()) != errs.Input {
		t.Errorf("got %s problem %q, want %q", p.Kind, p, want)
	}
}

func TestVerifyReportsStaleFiles(t *testing.T) {
	for _, tc := range []struct {
		name, why string
		edit      func(s []Spec)
	}{
		{"tolerance", "tolerances", func(s []Spec) { s[0].Tolerances[0].RTol *= 2 }},
		{"seed", "seed", func(s []Spec) { s[1].Seed++ }},
		{"removed case", "cases [", func(s []Spec) { s[2] = s[1] }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			specs := SpecsFor("relu", numerics.F16)
			tc.edit(specs)
			specs = dedupe(specs)
			f, err := Generate(specs)
			if err != nil {
				t.Fatal(err)
			}
			data, err := Encode(f)
			if err != nil {
				t.Fatal(err)
			}
			m := dataCopy(t)
			m["relu/f16.golden"].Data = data
			p := only(t, m)
			if p.Kind != "stale" || !strings.HasPrefix(p.String(), "E_INPUT: golden/data/relu/f16.golden: stale: ") ||
				!strings.Contains(p.Msg, tc.why) || !strings.HasSuffix(p.Msg, "run `tessera-qa golden update`") {
				t.Errorf("got %s problem %q, want stale naming %q", p.Kind, p, tc.why)
			}
		})
	}
}

func dedupe(specs []Spec) []Spec {
	var out []Spec
	seen := map[string]bool{}
	for _, s := range specs {
		if !seen[s.Name] {
			seen[s.Name] = true
			out = append(out, s)
		}
	}
	return out
}

func TestVerifyReportsMissingExtraAndFormat(t *testing.T) {
	m := dataCopy(t)
	delete(m, "exp/f32.golden")
	p := only(t, m)
	if p.Kind != "missing" || !strings.Contains(p.String(), "golden/data/exp/f32.golden: missing") {
		t.Errorf("deleted file: %s problem %q", p.Kind, p)
	}

	m = dataCopy(t)
	m["noop/f32.golden"] = &fstest.MapFile{Data: []byte("x")}
	p = only(t, m)
	if p.Kind != "extra" || !strings.Contains(p.String(), "golden/data/noop/f32.golden: not produced by the catalogue") {
		t.Errorf("extra file: %s problem %q", p.Kind, p)
	}

	m = dataCopy(t)
	d := m["abs/int32.golden"].Data
	copy(d, "tessera-golden v9 ")
	p = only(t, m)
	if p.Kind != "format" || !strings.Contains(p.String(), "format version 9, this build reads version 1") {
		t.Errorf("format 9: %s problem %q", p.Kind, p)
	}
}

func TestVerifyDirAndLoad(t *testing.T) {
	dir := t.TempDir()
	if _, err := VerifyDir(filepath.Join(dir, "nope")); err == nil || errs.CodeOf(err) != errs.Input {
		t.Errorf("VerifyDir of a missing dir: %v, want E_INPUT", err)
	}
	os.MkdirAll(filepath.Join(dir, "tanh"), 0o755)
	os.WriteFile(filepath.Join(dir, "tanh", "f32.golden"), []byte("garbage\n"), 0o644)
	ps, err := VerifyDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var sawTanh bool
	for _, p := range ps {
		if strings.HasPrefix(p.File, dir+"/") && p.File == filepath.Join(dir, "tanh/f32.golden") {
			sawTanh = p.Kind == "format"
		}
	}
	if !sawTanh || len(ps) != len(filesOf(allSpecs())) {
		t.Errorf("a dir with one garbage file: %d problems (want one per file of both catalogues), tanh/f32 format problem %v", len(ps), sawTanh)
	}
	if _, err := Load(Data(), "no_such_op", numerics.F32); err == nil || !strings.Contains(err.Error(), "golden/data/no_such_op/f32.golden: missing") {
		t.Errorf("Load of a missing file: %v", err)
	}
	f, err := Load(Data(), "matmul", numerics.BF16)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Cases) == 0 || f.Cases[0].File != "golden/data/matmul/bf16.golden" {
		t.Errorf("Load: %d cases, first file %q", len(f.Cases), f.Cases[0].File)
	}
}
