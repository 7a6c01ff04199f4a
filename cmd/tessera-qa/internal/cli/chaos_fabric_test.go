package cli

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tessera-qa/tessera-qa/chaos"
)

// Bad fabric input is one E_INPUT line and exit 2, before anything runs.
func TestChaosFabricUsage(t *testing.T) {
	for _, args := range [][]string{
		{"--world", "16", "--topology", "nodes=8x8", "--faults", "fabric/slow-link@3:10"},                  // 64 ranks for a world of 16
		{"--world", "16", "--topology", "nodes=4x4", "--faults", "fabric/slow-link@3:10?peer=16"},          // a peer outside
		{"--world", "16", "--topology", "nodes=4x4", "--faults", "fabric/congest@3:10?node=4"},             // a node outside
		{"--world", "16", "--topology", "nodes=4x4", "--faults", "fabric/flap@16:10"},                      // a rank outside
		{"--world", "16", "--topology", "nodes=4x4", "--faults", "fabric/slow-link@3:10?speed=2"},          // no such parameter
		{"--world", "16", "--topology", "nodes=4x4", "--transport", "tcp", "--faults", "fabric/flap@1:10"}, // fabric over processes
		{"--world", "16", "--topology", "mesh=4", "--faults", "fabric/flap@1:10"},                          // no such topology
		{"--world", "16", "--topology", "nodes=4x4", "--schedule", "random", "--faults", "fibre/*"},        // no such family
	} {
		o := cli(t, append([]string{"chaos"}, args...)...)
		o.want(t, ExitUsage, "E_INPUT")
		if n := strings.Count(strings.TrimSpace(o.stderr), "\n"); n > 0 {
			t.Errorf("%v: want one line, got:\n%s", args, o.stderr)
		}
	}
	// Without a topology the fabric faults cannot act: asked for by name, exit 3.
	cli(t, "chaos", "--world", "4", "--transport", "inproc", "--faults", "fabric/flap@1:10").want(t, ExitMissing, "E_UNSUPPORTED")
}

// The CI form of `chaos --world 64 --topology nodes=8x8 --schedule random --count 20 --faults
// 'fabric/*'` (docs/reliability.md has the full run): every fabric fault detected or masked,
// the bits of the fault-free run, 0 silent corruptions.
func TestChaosFabricRandomSchedules(t *testing.T) {
	o := cli(t, "chaos", "--world", "16", "--topology", "nodes=4x4", "--schedule", "random", "--count", "3", "--seed", "1",
		"--faults", "fabric/*", "--json", "-", "--artifacts", filepath.Join(t.TempDir(), "a"))
	o.want(t, ExitOK, "")
	var doc chaos.Document
	if err := json.Unmarshal([]byte(o.stdout), &doc); err != nil {
		t.Fatalf("%v\n%s", err, o.stdout)
	}
	if !doc.Passed || !doc.BitsIdentical || len(doc.Scenarios) != 3 {
		t.Fatalf("%s", o.stderr)
	}
	for _, sc := range doc.Scenarios {
		for _, f := range sc.Faults {
			if !strings.HasPrefix(f.Fault, "fabric/") || (f.Outcome != "detected" && !strings.HasPrefix(f.Outcome, "masked")) {
				t.Errorf("%s: %+v", sc.Scenario, f)
			}
		}
	}
}

// Each fabric fault alone at world 16 is detected by its own judge: the slow ones as
// stragglers naming a rank on the slow path, the corrupting NIC by the CRC.
func TestChaosFabricEachFaultDetected(t *testing.T) {
	o := cli(t, "chaos", "--world", "16", "--topology", "nodes=4x4", "--json", "-", "--artifacts", filepath.Join(t.TempDir(), "a"),
		"--faults", "fabric/slow-link@3:10?peer=11&steps=12,fabric/congest@5:25?node=2&steps=12,fabric/flap@1:40?peer=6&steps=15,fabric/corrupt-nic@6:56")
	o.want(t, ExitOK, "")
	var doc chaos.Document
	if err := json.Unmarshal([]byte(o.stdout), &doc); err != nil {
		t.Fatalf("%v\n%s", err, o.stdout)
	}
	want := map[string][]int{"fabric/slow-link": {3, 11}, "fabric/congest": {8, 9, 10, 11}, "fabric/flap": {1, 6}}
	for _, f := range doc.Scenarios[0].Faults {
		if f.Outcome != "detected" {
			t.Errorf("%+v\n%s", f, o.stderr)
			continue
		}
		if f.Fault == "fabric/corrupt-nic" {
			if f.DetectedBy != "E_DESYNC" {
				t.Errorf("%+v", f)
			}
			continue
		}
		ok := false
		for _, r := range want[f.Fault] {
			ok = ok || r == f.DetectRank
		}
		if f.DetectedBy != "E_STRAGGLER" || !ok {
			t.Errorf("%s: want E_STRAGGLER naming one of %v, got %+v", f.Fault, want[f.Fault], f)
		}
	}
}
