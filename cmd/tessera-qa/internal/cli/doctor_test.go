package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tessera-qa/tessera-qa/doctor"
	"github.com/tessera-qa/tessera-qa/engine/backend/cuda"
	"github.com/tessera-qa/tessera-qa/mig"
)

func nvmlFixture(name string) string {
	return filepath.Join("..", "..", "..", "..", "mig", "testdata", "nvml-health", name)
}

// `doctor --level 2 --json -` on a machine without a GPU: one JSON report on stdout with every
// level-2 GPU check skipped and the reason, the CPU checks passed, exit 0.
func TestDoctorLevel2JSONWithoutAGPU(t *testing.T) {
	if _, err := cuda.Devices(); err == nil {
		t.Skip("a GPU is here")
	}
	t.Setenv(mig.ReplayEnv, "")
	o := cli(t, "doctor", "--level", "2", "--json", "-")
	o.want(t, 0, "")
	var r doctor.Report
	mustJSON(t, o.stdout, &r)
	if r.Format != doctor.ReportFormat || r.Level != 2 || r.Verdict != doctor.Pass || len(r.Devices) != 1 {
		t.Fatalf("report %+v", r)
	}
	skipped := 0
	for _, c := range r.Checks {
		if c.Device == "gpu" && c.Verdict == doctor.Skipped && strings.Contains(c.Reason, "no GPU on this node") {
			skipped++
		}
	}
	if want := len(doctor.GPUChecks[0]) + len(doctor.GPUChecks[1]); skipped != want {
		t.Errorf("%d GPU checks skipped with the reason, want %d", skipped, want)
	}
	if !strings.Contains(o.stderr, "doctor level 2") {
		t.Errorf("human report not on stderr: %q", o.stderr)
	}
}

func TestDoctorUsageAndExitCodes(t *testing.T) {
	cli(t, "doctor", "--level", "9").want(t, 2, "E_INPUT")
	cli(t, "doctor", "--device", "tpu:0").want(t, 2, "E_INPUT")
	bad := filepath.Join(t.TempDir(), "t.json")
	os.WriteFile(bad, []byte(`{"format":"x"}`), 0o644)
	cli(t, "doctor", "--thresholds", bad).want(t, 2, "E_INPUT")
	o := cli(t, "doctor", "--print-thresholds")
	if _, err := doctor.ParseThresholds([]byte(o.stdout)); err != nil || o.code != 0 {
		t.Errorf("--print-thresholds: %d %v", o.code, err)
	}
	o = cli(t, "doctor", "--nvml-replay", nvmlFixture("h100-dbe.json"))
	if o.code != 1 || !strings.Contains(o.stdout, "FAIL  gpu:0  nvml/ecc") {
		t.Errorf("a DBE node: exit %d\n%s", o.code, o.stdout)
	}
	if _, err := cuda.Devices(); err != nil {
		cli(t, "doctor", "--level", "2", "--device", "cuda", "--nvml-replay", nvmlFixture("h100-healthy.json")).want(t, 3, "E_NO_DEVICE")
	}
}

// train --preflight 1 refuses a node whose NVML (replayed) says a row remap is pending:
// exit 1, the verdict on stderr, no step run; a healthy node trains.
func TestTrainPreflightRefusesAPendingRowRemap(t *testing.T) {
	t.Setenv(mig.ReplayEnv, nvmlFixture("h100-row-remap-pending.json"))
	o := cli(t, "train", "--preflight", "1", "--steps", "2")
	if o.code != 1 || strings.Contains(o.stdout, "step") || !strings.Contains(o.stderr, "preflight: FAIL gpu:0 nvml/remapped-rows: a row remap is pending") ||
		!strings.Contains(o.stderr, "refused this node before any step") {
		t.Fatalf("exit %d\nstdout %s\nstderr %s", o.code, o.stdout, o.stderr)
	}
	o = cli(t, "launch", "--preflight", "1", "--nproc-per-node", "1", "--", "/bin/false")
	if o.code != 1 || !strings.Contains(o.stderr, "refused this node") {
		t.Fatalf("launch: exit %d\n%s", o.code, o.stderr)
	}
	t.Setenv(mig.ReplayEnv, nvmlFixture("h100-healthy.json"))
	o = cli(t, "train", "--preflight", "1", "--steps", "2")
	if o.code != 0 || !strings.Contains(o.stdout, "final digest") {
		t.Fatalf("healthy node: exit %d\n%s\n%s", o.code, o.stdout, o.stderr)
	}
	cli(t, "train", "--preflight", "7").want(t, 2, "E_INPUT")
}
