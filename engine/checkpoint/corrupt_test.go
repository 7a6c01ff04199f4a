package checkpoint

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/errs"
)

func flipBit(t testing.TB, path string, at int64) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if at < 0 {
		at += int64(len(data))
	}
	data[at%int64(len(data))] ^= 0x10
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// threeSteps saves steps 10, 20, 30 of world 2 and returns the expected states by step.
func threeSteps(t testing.TB, dir string) map[int][]State {
	t.Helper()
	out := map[int][]State{}
	for _, step := range []int{10, 20, 30} {
		out[step] = mustSaveWorld(t, dir, 0, 11, step, 2, 4096)
	}
	return out
}

func TestCorruptionFallsBackWithNotice(t *testing.T) {
	file := func(dir string, step int, name string) string { return filepath.Join(dir, StepDirName(step), name) }
	cases := []struct {
		name   string
		break_ func(t *testing.T, dir string)
		notice string
	}{
		{"bit flip in a rank file", func(t *testing.T, dir string) {
			flipBit(t, file(dir, 30, "rank-1.npz"), 5000)
		}, "checkpoint step 30: rank-1.npz: sha256 mismatch (torn or corrupted); falling back to step 20"},
		{"bit flip in the last byte", func(t *testing.T, dir string) {
			flipBit(t, file(dir, 30, "rank-0.npz"), -1)
		}, "checkpoint step 30: rank-0.npz: sha256 mismatch (torn or corrupted); falling back to step 20"},
		{"truncated rank file", func(t *testing.T, dir string) {
			p := file(dir, 30, "rank-0.npz")
			info, _ := os.Stat(p)
			if err := os.Truncate(p, info.Size()/2); err != nil {
				t.Fatal(err)
			}
		}, "checkpoint step 30: rank-0.npz: "},
		{"deleted rank file", func(t *testing.T, dir string) {
			if err := os.Remove(file(dir, 30, "rank-1.npz")); err != nil {
				t.Fatal(err)
			}
		}, "checkpoint step 30: rank-1.npz: missing; falling back to step 20"},
		{"manifest not JSON", func(t *testing.T, dir string) {
			if err := os.WriteFile(file(dir, 30, ManifestName), []byte(`{"format": 1, "step": 3`), 0o644); err != nil {
				t.Fatal(err)
			}
		}, "checkpoint step 30: manifest.json: not valid JSON"},
		{"manifest digest edited", func(t *testing.T, dir string) {
			p := file(dir, 30, ManifestName)
			data, _ := os.ReadFile(p)
			i := strings.Index(string(data), `"sha256": "`) + len(`"sha256": "`)
			copy(data[i:], strings.Repeat("0", 64))
			os.WriteFile(p, data, 0o644)
		}, "checkpoint step 30: rank-0.npz: sha256 mismatch (torn or corrupted); falling back to step 20"},
		{"manifest of another step", func(t *testing.T, dir string) {
			data, _ := os.ReadFile(file(dir, 20, ManifestName))
			os.WriteFile(file(dir, 30, ManifestName), data, 0o644)
		}, "checkpoint step 30: manifest.json: says step 20; falling back to step 20"},
		{"manifest empty", func(t *testing.T, dir string) {
			os.WriteFile(file(dir, 30, ManifestName), nil, 0o644)
		}, "checkpoint step 30: manifest.json: not valid JSON"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			want := threeSteps(t, dir)
			c.break_(t, dir)
			ls := mustLoad(t, dir, want[20])
			for r, l := range ls {
				if len(l.Notices) != 1 || !strings.Contains(l.Notices[0], c.notice) || !strings.HasSuffix(l.Notices[0], "falling back to step 20") {
					t.Fatalf("rank %d notices %q, want one containing %q", r, l.Notices, c.notice)
				}
			}
			infos, err := List(dir)
			if err != nil {
				t.Fatal(err)
			}
			if s := infos[2]; s.Step != 30 || (s.Status != Corrupt && s.Status != Torn) || !strings.Contains("checkpoint step 30: "+s.Reason, strings.Split(c.notice, "; ")[0]) {
				t.Fatalf("List step 30 = %+v", s)
			}
		})
	}
}

func TestTwoCorruptStepsFallBackTwice(t *testing.T) {
	dir := t.TempDir()
	want := threeSteps(t, dir)
	flipBit(t, filepath.Join(dir, StepDirName(30), "rank-1.npz"), 77)
	os.Remove(filepath.Join(dir, StepDirName(20), "rank-0.npz"))
	ls := mustLoad(t, dir, want[10])
	wantNotices := []string{
		"checkpoint step 30: rank-1.npz: sha256 mismatch (torn or corrupted); falling back to step 20",
		"checkpoint step 20: rank-0.npz: missing; falling back to step 10",
	}
	if !slices.Equal(ls[1].Notices, wantNotices) {
		t.Fatalf("notices %q, want %q", ls[1].Notices, wantNotices)
	}
}

func TestAllCorruptIsCodedErrorFreshStartIsNil(t *testing.T) {
	dir := t.TempDir()
	threeSteps(t, dir)
	for _, s := range []int{10, 20, 30} {
		flipBit(t, filepath.Join(dir, StepDirName(s), "rank-0.npz"), 300)
	}
	l, err := LoadLatest(dir, 1, 2)
	if l != nil || errs.CodeOf(err) != errs.Checkpoint {
		t.Fatalf("LoadLatest = %v, %v; want E_CHECKPOINT", l, err)
	}
	for _, s := range []string{"step 30: rank-0.npz: sha256 mismatch", "step 20: rank-0.npz", "step 10: rank-0.npz", dir} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not contain %q", err, s)
		}
	}
	// Fresh starts: no dir, an empty dir, only a first save that crashed before its commit.
	empty := t.TempDir()
	pending := t.TempDir()
	os.MkdirAll(filepath.Join(pending, StepDirName(10)), 0o755)
	os.WriteFile(filepath.Join(pending, StepDirName(10), "rank-0.npz"), []byte("x"), 0o644)
	os.WriteFile(filepath.Join(pending, StepDirName(10), ".manifest.json.tmp-1"), []byte("{"), 0o644)
	for _, d := range []string{filepath.Join(empty, "missing"), empty, pending} {
		if l, err := LoadLatest(d, 0, 2); l != nil || err != nil {
			t.Errorf("LoadLatest(%s) = %v, %v; want nil, nil (fresh start)", d, l, err)
		}
	}
	if _, err := Load(pending, 10, 0, 2); errs.CodeOf(err) != errs.Checkpoint || !strings.Contains(err.Error(), "pending") {
		t.Errorf("Load of a pending step: %v", err)
	}
}

func TestWorldMismatchIsAnErrorNotAFallback(t *testing.T) {
	dir := t.TempDir()
	mustSaveWorld(t, dir, 0, 12, 10, 2, 10)
	mustSaveWorld(t, dir, 0, 12, 20, 4, 10)
	_, err := LoadLatest(dir, 0, 2)
	if errs.CodeOf(err) != errs.Checkpoint || !strings.Contains(err.Error(), "step 20") || !strings.Contains(err.Error(), "saved by 4 ranks, this run has 2") {
		t.Fatalf("err = %v", err)
	}
	if _, err := LoadLatest(dir, 2, 2); errs.CodeOf(err) != errs.Input {
		t.Fatalf("rank 2 of 2: %v, want E_INPUT", err)
	}
}
