package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// An explicit artifacts folder is used as given while it holds no run; once it holds one, a
// rerun goes into a folder of its own inside it and says so, leaving the earlier run's files.
func TestFreshArtifactsMovesAsideFromAnEarlierRun(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "soak")
	var w bytes.Buffer
	if got := freshArtifacts(&w, "stress", dir, "history.jsonl"); got != dir || w.Len() != 0 {
		t.Fatalf("empty folder: %s, said %q", got, w.String())
	}
	os.MkdirAll(filepath.Join(dir, "000-x"), 0o755)
	os.WriteFile(filepath.Join(dir, "history.jsonl"), []byte("{}\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "000-x", "history-agent-0.jsonl"), []byte("{}\n"), 0o644)
	for _, mark := range []string{"history.jsonl", "*/history-agent-*.jsonl"} {
		w.Reset()
		got := freshArtifacts(&w, "chaos", dir, mark)
		if filepath.Dir(got) != dir || got == dir || !strings.Contains(w.String(), "holds an earlier run (kept)") || !strings.Contains(w.String(), got) {
			t.Errorf("%s: %s, said %q", mark, got, w.String())
		}
	}
}
