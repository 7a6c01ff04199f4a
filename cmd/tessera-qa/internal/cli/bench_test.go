package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tessera-qa/tessera-qa/bench"
	"github.com/tessera-qa/tessera-qa/engine/backend"
)

// fakeBench replaces the GPU and torch with the CPU backend on a fixed clock (1 ms) and the
// golden model (2 ms, skewed by skew) for the duration of a test.
func fakeBench(t *testing.T, skew float64) {
	t.Helper()
	old := benchSides
	t.Cleanup(func() { benchSides = old })
	benchSides = func(string, time.Duration) (bench.Engine, bench.Oracle, error) {
		cpu, err := backend.Get("cpu")
		if err != nil {
			return nil, nil, err
		}
		return bench.FixedClock{Backend: cpu, MS: 1}, bench.RefOracle{MS: 2, Skew: skew}, nil
	}
}

func TestBenchEndToEndWithFakes(t *testing.T) {
	fakeBench(t, 0)
	out := filepath.Join(t.TempDir(), "bench.json")
	o := cli(t, "bench", "--vs", "torch", "--ops", "softmax,copy,matmul", "--shapes", "16x300,matmul:8x16x24",
		"--dtypes", "f32,bf16", "--seed", "5", "--json", out)
	o.want(t, ExitOK, "")
	for _, want := range []string{"SPEEDUP = torch ms / engine ms (>1: the engine is faster)", "softmax", "16x300", "2.00x", "copy bandwidth"} {
		if !strings.Contains(o.stdout, want) {
			t.Errorf("table lacks %q:\n%s", want, o.stdout)
		}
	}
	if !strings.Contains(o.stderr, "[6/6]") || !strings.Contains(o.stderr, "seed 5") {
		t.Errorf("progress on stderr:\n%s", o.stderr)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var rep bench.Report
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Kind != bench.ReportKind || len(rep.Rows) != 6 || rep.Rows[0].Op != "copy" || rep.Rows[0].Ratio != 0.5 ||
		!strings.Contains(rep.Env["command"], "--seed 5") {
		t.Errorf("bench JSON: %+v", rep)
	}
}

func TestBenchFailedCheckExits1(t *testing.T) {
	fakeBench(t, 0.05)
	o := cli(t, "bench", "--vs", "torch", "--ops", "softmax", "--shapes", "16x300", "--dtypes", "f32", "--reps", "3")
	if o.code != ExitFailed || !strings.Contains(o.stdout, "FAIL vs torch") {
		t.Fatalf("exit %d\n%s\n%s", o.code, o.stdout, o.stderr)
	}
}

func TestBenchUsageAndEnvironment(t *testing.T) {
	cli(t, "bench").want(t, ExitUsage, "E_INPUT")
	cli(t, "bench", "--vs", "jax").want(t, ExitUsage, "E_INPUT")
	cli(t, "bench", "--vs", "torch", "--reps", "0").want(t, ExitUsage, "E_INPUT")
	cli(t, "bench", "--vs", "torch", "--ops", "nope").want(t, ExitUsage, "E_INPUT")
	cli(t, "bench", "--vs", "torch", "--shapes", "3x").want(t, ExitUsage, "E_INPUT")
	cli(t, "bench", "--vs", "torch", "extra").want(t, ExitUsage, "E_INPUT")
	// No GPU here (CI): the environment asked for is missing.
	t.Setenv("TESSERA_CUDA_DISABLE", "1")
	if b, err := backend.Get("cuda"); err == nil && b.Available() == nil {
		t.Skip("a usable GPU is present")
	}
	cli(t, "bench", "--vs", "torch", "--ops", "softmax").want(t, ExitMissing, "E_NO_DEVICE")
}
