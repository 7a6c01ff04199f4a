package golden

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// TestWriteGoldenData regenerates golden/data in the source tree. It runs only when asked
// (TESSERA_GOLDEN_UPDATE=1), because tests must not write the tree; `tessera-qa golden update`
// does the same through Update.
func TestWriteGoldenData(t *testing.T) {
	if os.Getenv("TESSERA_GOLDEN_UPDATE") != "1" {
		t.Skip("set TESSERA_GOLDEN_UPDATE=1 to regenerate golden/data")
	}
	sum, err := Update("data")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("files %d, cases %d, written %d, removed %v, bytes %d", sum.Files, sum.Cases, len(sum.Written), sum.Removed, sum.Bytes)
}

func TestUpdateIsDeterministicAndVerifiesClean(t *testing.T) {
	dir := t.TempDir()
	first, err := Update(dir)
	if err != nil {
		t.Fatal(err)
	}
	if first.Files == 0 || len(first.Written) != first.Files {
		t.Fatalf("first update into an empty dir wrote %d of %d files", len(first.Written), first.Files)
	}
	snap := readTree(t, dir)
	// A stray file is removed, and a second run rewrites nothing.
	stray := filepath.Join(dir, "nosuchop", "f32.golden")
	os.MkdirAll(filepath.Dir(stray), 0o755)
	os.WriteFile(stray, []byte("x"), 0o644)
	second, err := Update(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(second.Written) != 0 {
		t.Errorf("second update rewrote %v", second.Written)
	}
	if len(second.Removed) != 1 || second.Removed[0] != "nosuchop/f32.golden" {
		t.Errorf("removed %v, want [nosuchop/f32.golden]", second.Removed)
	}
	if _, err := os.Stat(filepath.Dir(stray)); !os.IsNotExist(err) {
		t.Errorf("emptied directory %s was left behind", filepath.Dir(stray))
	}
	again := readTree(t, dir)
	if len(again) != len(snap) {
		t.Fatalf("file count changed: %d then %d", len(snap), len(again))
	}
	for p, b := range snap {
		if !bytes.Equal(again[p], b) {
			t.Errorf("%s differs between two updates", p)
		}
	}
	probs, err := VerifyDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range probs {
		t.Errorf("fresh update does not verify: %s", p)
	}
}

func readTree(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		out[p] = b
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
