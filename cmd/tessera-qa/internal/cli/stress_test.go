package cli

import (
	"encoding/json"
	"testing"

	"github.com/tessera-qa/tessera-qa/stress"
)

func TestStressUsage(t *testing.T) {
	for _, args := range [][]string{
		{"--jobs", "0"},
		{"--mode", "streams"},
		{"--device", "tpu"},
		{"--duration", "0s"},
		{"--plant", "nope"},
	} {
		o := cli(t, append([]string{"stress", "--duration", "1s"}, args...)...)
		o.want(t, ExitUsage, "E_INPUT")
	}
}

func TestStressCUDAWithoutGPU(t *testing.T) {
	if ch, err := chooseCUDA(); err == nil {
		t.Skipf("a GPU is present (%s): exit 3 cannot be shown here", ch)
	}
	o := cli(t, "stress", "--device", "cuda", "--duration", "1s", "--out", t.TempDir())
	o.want(t, ExitMissing, "E_NO_DEVICE")
}

func TestStressGoroutinesJSON(t *testing.T) {
	o := cli(t, "stress", "--jobs", "2", "--mode", "goroutines", "--duration", "1s", "--graphs-per-job", "2",
		"--interval", "50ms", "--out", t.TempDir(), "--json", "-")
	if o.code != ExitOK {
		t.Fatalf("exit %d\n%s\n%s", o.code, o.stdout, o.stderr)
	}
	var r stress.Report
	if err := json.Unmarshal([]byte(o.stdout), &r); err != nil {
		t.Fatalf("stdout is not the JSON report: %v\n%s", err, o.stdout)
	}
	if !r.Pass || r.Graphs == 0 || r.Mismatches != 0 || len(r.Latency) != 2 || len(r.Monitors) == 0 {
		t.Fatalf("report: %+v", r)
	}
}
