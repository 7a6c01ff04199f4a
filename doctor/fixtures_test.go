package doctor

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/backend/cuda"
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/mig"
)

// replayNode points doctor at a recorded NVML session of testdata and at no CUDA driver.
func replayNode(t *testing.T, fixture string) {
	t.Helper()
	t.Setenv(mig.ReplayEnv, filepath.Join("..", "mig", "testdata", "nvml-health", fixture))
	old := cudaDevices
	cudaDevices = func() ([]cuda.DeviceInfo, error) { return nil, errs.New(errs.NoDevice, "no CUDA driver in this test") }
	t.Cleanup(func() { cudaDevices = old })
}

func find(r Report, dev, name string) (Check, bool) {
	for _, c := range r.Checks {
		if c.Device == dev && c.Name == name {
			return c, true
		}
	}
	return Check{}, false
}

// Each recorded node gives the verdicts docs/health.md documents for it.
func TestRecordedNodesGiveTheDocumentedVerdicts(t *testing.T) {
	type want struct {
		dev, check string
		v          Verdict
		reason     string
	}
	for _, c := range []struct {
		fixture string
		verdict Verdict
		sku     string
		checks  []want
	}{
		{"h100-healthy.json", Pass, "H100", []want{{"gpu:0", "nvml/ecc", Pass, "no double-bit"}, {"gpu:0", "nvml/remapped-rows", Pass, ""},
			{"gpu:0", "nvml/pcie-link", Pass, "gen 5 x16"}, {"gpu:0", "nvml/retired-pages", Skipped, "NOT_SUPPORTED"}, {"gpu:0", "nvml/nvlink", Skipped, "NOT_SUPPORTED"},
			{"gpu:0", "nvml/clock-events", Pass, ""}, {"gpu:0", "nvml/xid", Pass, ""}}},
		// recorded on the lent H200 by `doctor --record-nvml` (2026-12-02), not written by hand
		{"h200-recorded-2026-12-02.json", Pass, "H200", []want{{"gpu:0", "nvml/ecc", Pass, "no double-bit"}, {"gpu:0", "nvml/remapped-rows", Pass, "0 rows remapped"},
			{"gpu:0", "nvml/pcie-link", Pass, "gen 5 x16"}, {"gpu:0", "nvml/retired-pages", Skipped, "NOT_SUPPORTED"}, {"gpu:0", "nvml/nvlink", Skipped, "NOT_SUPPORTED"},
			{"gpu:0", "nvml/persistence", Pass, "on"}}},
		{"h200-healthy.json", Pass, "H200", []want{{"gpu:0", "nvml/temperature", Pass, "34 C"}, {"gpu:0", "nvml/pcie-replay", Pass, ""}}},
		{"h100-row-remap-pending.json", Fail, "H100", []want{{"gpu:0", "nvml/remapped-rows", Fail, "row remap is pending"}, {"gpu:0", "nvml/ecc", Warn, "over the GPU's life"}}},
		{"h100-dbe.json", Fail, "H100", []want{{"gpu:0", "nvml/ecc", Fail, "2 double-bit"}, {"gpu:0", "nvml/xid", Fail, "48 (double-bit ECC error)"}}},
		{"h200-thermal-throttle.json", Fail, "H200", []want{{"gpu:0", "nvml/clock-events", Fail, "HW thermal slowdown, SW thermal slowdown"}, {"gpu:0", "nvml/temperature", Fail, "93 C"}}},
		{"h100-xid79.json", Fail, "H100", []want{{"gpu:1", "nvml/xid", Fail, "79 (GPU has fallen off the bus)"}, {"gpu:1", "nvml/reachable", Fail, "GPU_IS_LOST"},
			{"gpu:1", "nvml/ecc", Skipped, "answered 15"}, {"gpu:0", "nvml/nvlink", Pass, "0 NVLink errors over 18 links"}, {"gpu:0", "nvml/reachable", Pass, ""}}},
		{"h100-pcie-x8.json", Fail, "H100", []want{{"gpu:0", "nvml/pcie-link", Fail, "x8, below x16"}, {"gpu:0", "nvml/ecc", Pass, ""}}},
		{"h100-old-nvml.json", Pass, "H100", []want{{"gpu:0", "nvml/remapped-rows", Skipped, "nvmlDeviceGetRemappedRows absent"},
			{"gpu:0", "nvml/clock-events", Skipped, "nvmlDeviceGetCurrentClocksEventReasons absent"}, {"gpu:0", "nvml/xid", Skipped, "nvmlEventSetWait_v2 absent"}}},
	} {
		t.Run(c.fixture, func(t *testing.T) {
			replayNode(t, c.fixture)
			r, err := Run(context.Background(), Options{Level: 1, Devices: []string{"cuda"}}) // the GPUs only: cheap
			if err != nil {
				t.Fatal(err)
			}
			if r.Verdict != c.verdict || (c.verdict == Fail) != (r.ExitCode() == 1) {
				t.Errorf("verdict %s exit %d, want %s; failed: %+v", r.Verdict, r.ExitCode(), c.verdict, r.Failed())
			}
			if !strings.HasPrefix(r.NVMLSource, "replay:") {
				t.Errorf("nvml source %q", r.NVMLSource)
			}
			var gpus int
			for _, d := range r.Devices {
				if d.Backend == "cuda" {
					gpus++
					if d.SKU != c.sku || d.Available {
						t.Errorf("device %+v: want SKU %s, not available to CUDA", d, c.sku)
					}
				}
			}
			if gpus == 0 {
				t.Errorf("no GPU device in %+v", r.Devices)
			}
			for _, w := range c.checks {
				got, ok := find(r, w.dev, w.check)
				if !ok || got.Verdict != w.v || !strings.Contains(got.Reason, w.reason) {
					t.Errorf("%s %s: %s %q, want %s containing %q", w.dev, w.check, got.Verdict, got.Reason, w.v, w.reason)
				}
			}
			// Level 2 needs the CUDA driver for the GPU: skipped, naming why, never passed.
			if c.fixture == "h100-healthy.json" {
				r2, err := Run(context.Background(), Options{Level: 2, Devices: []string{"gpu:0"}})
				if err != nil {
					t.Fatal(err)
				}
				got, _ := find(r2, "gpu:0", "memory/patterns")
				if got.Verdict != Skipped || !strings.Contains(got.Reason, "cannot run kernels") {
					t.Errorf("level 2 memory test on a GPU without CUDA: %+v", got)
				}
				r3, _ := Run(context.Background(), Options{Level: 2, Devices: []string{"cuda"}})
				if r3.ExitCode() != 3 {
					t.Errorf("--device cuda at level 2 without a CUDA driver: exit %d (absent %q), want 3", r3.ExitCode(), r3.Absent)
				}
			}
		})
	}
}

// A recorded session that is not one is E_INPUT naming the file.
func TestBadReplayIsInput(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "x.json")
	for _, body := range []string{"{", `{"devices": [{"nmae": "x"}]}`, `{"absent": ["ecc_modes"], "devices": []}`} {
		if err := writeFile(p, body); err != nil {
			t.Fatal(err)
		}
		if _, err := mig.ReplayHealth(p); errs.CodeOf(err) != errs.Input || !strings.Contains(err.Error(), p) {
			t.Errorf("%s: %v", body, err)
		}
	}
}
