package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// tuneGraph writes a graph whose kernels have config spaces of more than one point (the
// example graph's are too small for any tile but the default).
func tuneGraph(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "mm.tg")
	src := `graph mm {
  input %a: f32[48,40]
  input %b: f32[40,72]
  %c: f32[48,72] = matmul(%a, %b)
  %d = softmax(%c) {axis=-1}
  output %d
}
`
	if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestTuneOnCPUThenFromCache(t *testing.T) {
	dir := t.TempDir()
	cache := filepath.Join(dir, "cache")
	args := []string{"tune", tuneGraph(t), "--cache", cache, "--reps", "1", "--max-candidates", "3", "--json", "-"}
	o := cli(t, args...)
	o.want(t, ExitOK, "")
	var r tuneJSON
	mustJSON(t, o.stdout, &r)
	if r.Backend != "cpu" || r.Cache != cache || r.Clock != "cpu wall-clock timer" || r.Reps != 1 || len(r.Kernels) != 2 {
		t.Fatalf("report %+v", r)
	}
	for _, k := range r.Kernels {
		if k.CacheHit || k.Skipped != "" || k.Measured < 2 || k.Measured > 3 || k.Candidates <= 3 {
			t.Errorf("first run, kernel %s: %+v", k.Key, k)
		}
	}
	if !strings.Contains(o.stderr, "cpu wall-clock timer") || !strings.Contains(o.stderr, "schedule-hash") {
		t.Errorf("human report (on stderr with --json -):\n%s", o.stderr)
	}
	files, _ := filepath.Glob(filepath.Join(cache, "*.json"))
	if len(files) != 1 {
		t.Errorf("cache files %v, want one for this device", files)
	}
	o = cli(t, args...)
	o.want(t, ExitOK, "")
	mustJSON(t, o.stdout, &r)
	for _, k := range r.Kernels {
		if !k.CacheHit || k.Measured != 0 {
			t.Errorf("second run, kernel %s: %+v", k.Key, k)
		}
	}
	if strings.Count(o.stderr, "cache hit") != len(r.Kernels) {
		t.Errorf("second run does not say cache hit per kernel:\n%s", o.stderr)
	}
}

func TestTuneErrors(t *testing.T) {
	g := exampleGraph(t)
	cli(t, "tune", g, "--backend", "zz-missing", "--no-cache").want(t, ExitMissing, "E_NO_DEVICE")
	cli(t, "tune", g, "--backend", "nope").want(t, ExitUsage, "E_UNSUPPORTED")
	cli(t, "tune", g, "--backend", "ref").want(t, ExitUsage, "E_INPUT")
	cli(t, "tune", g, "--reps", "-1").want(t, ExitUsage, "E_INPUT")
	cli(t, "tune").want(t, ExitUsage, "E_INPUT")
	bad := filepath.Join(t.TempDir(), "bad.tg")
	if err := os.WriteFile(bad, []byte("graph {"), 0o644); err != nil {
		t.Fatal(err)
	}
	cli(t, "tune", bad).want(t, ExitUsage, "E_PARSE")
	// A backend that runs but has no kernel timer: the environment the user asked for is missing.
	cli(t, "tune", g, "--backend", "zz-broken", "--no-cache").want(t, ExitMissing, "E_NO_DEVICE")
}

func TestTuneCUDAWithoutGPU(t *testing.T) {
	o := cli(t, "tune", exampleGraph(t), "--backend", "cuda", "--no-cache")
	if o.code == ExitOK {
		t.Skip("a usable GPU is present")
	}
	o.want(t, ExitMissing, "E_NO_DEVICE")
}
