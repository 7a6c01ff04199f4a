package cli

import (
	"context"
	"encoding/json"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/mig"
	"github.com/tessera-qa/tessera-qa/stress"
)

func TestStressUsage(t *testing.T) {
	for _, args := range [][]string{
		{"--jobs", "0"},
		{"--mode", "streams"},
		{"--device", "tpu"},
		{"--duration", "0s"},
		{"--plant", "nope"},
		{"--pressure", "disk"},
		{"--pressure", "cache", "--mode", "goroutines"},
		{"--pressure", "oom", "--cpu-budget", "12"},
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

func TestDevicesListsPartitions(t *testing.T) {
	b, err := os.ReadFile("../../../../mig/testdata/h100-mixed.txt")
	if err != nil {
		t.Fatal(err)
	}
	gpus, err := mig.ParseSMI(string(b))
	if err != nil {
		t.Fatal(err)
	}
	old := discoverGPUs
	t.Cleanup(func() { discoverGPUs = old })
	discoverGPUs = func(context.Context) ([]mig.GPU, string, error) { return gpus, mig.SourceSMI, nil }
	o := cli(t, "devices", "--json", "-")
	o.want(t, ExitOK, "")
	var ds []deviceJSON
	mustJSON(t, o.stdout, &ds)
	var kinds []string
	for _, d := range ds {
		if d.Kind != "" {
			kinds = append(kinds, d.Kind+":"+d.Profile)
			if d.Visible != d.UUID || d.Backend != "cuda" || d.Source != mig.SourceSMI {
				t.Errorf("entry %+v", d)
			}
		}
	}
	if strings.Join(kinds, ",") != "mig:3g.40gb,mig:2g.20gb,mig:1g.10gb,mig:1g.10gb,gpu:" {
		t.Errorf("partitions %v", kinds)
	}
	if !strings.Contains(o.stderr, "MIG-9f1d2c3b-4a5e-5f60-8172-93a4b5c6d7e8") {
		t.Errorf("human table without the partition:\n%s", o.stderr)
	}
	discoverGPUs = func(context.Context) ([]mig.GPU, string, error) {
		return nil, "", errs.New(errs.NoDevice, "no GPU discovery: test")
	}
	o = cli(t, "devices")
	o.want(t, ExitOK, "")
	if !strings.Contains(o.stdout, "partitions: none found (E_NO_DEVICE: no GPU discovery: test)") {
		t.Errorf("no reason for no partitions:\n%s", o.stdout)
	}
}

// The OOM pressure rows: in JSON the hog's rounds, each a recovery; in the table the column.
func TestStressOOMPressure(t *testing.T) {
	o := cli(t, "stress", "--jobs", "2", "--mode", "goroutines", "--duration", "2s", "--graphs-per-job", "2",
		"--interval", "50ms", "--pressure", "oom", "--out", t.TempDir(), "--json", "-")
	if o.code != ExitOK {
		t.Fatalf("exit %d\n%s\n%s", o.code, o.stdout, o.stderr)
	}
	var r stress.Report
	mustJSON(t, o.stdout, &r)
	if r.Pressure != stress.PressureOOM || r.OOM == nil || r.OOM.Rounds == 0 || r.OOM.Recoveries != r.OOM.Rounds || r.OOM.CPUBudget != 32<<20 {
		t.Fatalf("report: %+v %+v", r, r.OOM)
	}
	if !strings.Contains(o.stderr, "OOM recoveries "+strconv.Itoa(r.OOM.Recoveries)) || !strings.Contains(o.stderr, "NEIGHBOUR E_OOM") {
		t.Fatalf("human table without the OOM rows:\n%s", o.stderr)
	}
}
