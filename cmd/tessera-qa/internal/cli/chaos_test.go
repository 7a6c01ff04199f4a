package cli

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tessera-qa/tessera-qa/chaos"
)

func TestChaosUsage(t *testing.T) {
	cli(t, "chaos").want(t, ExitUsage, "E_INPUT")
	cli(t, "chaos", "--kill-rank", "1", "--hang-rank", "2").want(t, ExitUsage, "E_INPUT")
	cli(t, "chaos", "--faults", "net/teleport").want(t, ExitUsage, "E_INPUT")
	cli(t, "chaos", "--faults", "net/drop@x:3").want(t, ExitUsage, "E_INPUT")
	cli(t, "chaos", "--kill-rank", "7", "--world", "3").want(t, ExitUsage, "E_INPUT")
	cli(t, "chaos", "--kill-rank", "1", "--at-step", "60").want(t, ExitUsage, "E_INPUT")
	cli(t, "chaos", "--schedule", "sometimes").want(t, ExitUsage, "E_INPUT")
	cli(t, "chaos", "--kill-rank", "1", "--workload", "train:resnet").want(t, ExitUsage, "E_INPUT")
	// A fault asked for by name that cannot act here: the environment is missing (exit 3).
	cli(t, "chaos", "--faults", "device/illegal-address@1:10").want(t, ExitMissing, "E_UNSUPPORTED")
	cli(t, "chaos", "--kill-rank", "1", "--transport", "inproc").want(t, ExitMissing, "E_UNSUPPORTED")
}

func TestChaosList(t *testing.T) {
	o := cli(t, "chaos", "--list")
	o.want(t, ExitOK, "")
	for _, n := range chaos.Names() {
		if !strings.Contains(o.stdout, n) {
			t.Errorf("--list lacks %s:\n%s", n, o.stdout)
		}
	}
	if !strings.Contains(o.stdout, "rank/kill                available") || !strings.Contains(o.stdout, "device/oom") {
		t.Errorf("--list:\n%s", o.stdout)
	}
}

// In-process (goroutine ranks): a corrupted frame is detected and recovered from, exit 0 with
// the JSON document; the planted bad-checksum bug makes the same command exit 1.
func TestChaosInprocRecoversAndCatchesThePlantedBug(t *testing.T) {
	args := []string{"chaos", "--faults", "net/corrupt@1:12", "--transport", "inproc", "--world", "3", "--steps", "30", "--checkpoint-every", "5", "--json", "-"}
	o := cli(t, append(args, "--artifacts", filepath.Join(t.TempDir(), "a"))...)
	o.want(t, ExitOK, "")
	var doc chaos.Document
	if err := json.Unmarshal([]byte(o.stdout), &doc); err != nil {
		t.Fatalf("%v\n%s", err, o.stdout)
	}
	if doc.Kind != chaos.DocumentKind || !doc.Passed || !doc.BitsIdentical || len(doc.Scenarios) != 1 || doc.Scenarios[0].Faults[0].DetectedBy != "E_DESYNC" {
		t.Fatalf("%+v", doc)
	}
	if !strings.Contains(o.stderr, "verdict: PASS") {
		t.Errorf("the table did not move to stderr with --json -:\n%s", o.stderr)
	}
	o = cli(t, append(args, "--artifacts", filepath.Join(t.TempDir(), "b"), "--plant", "accept-bad-checksum")...)
	o.want(t, ExitFailed, "")
	if !strings.Contains(o.stderr, "violation: silent corruption") || !strings.Contains(o.stderr, "verdict: FAIL") {
		t.Errorf("stderr:\n%s", o.stderr)
	}
}
