package cli

import (
	"strings"
	"testing"
)

// --topology runs the in-process ranks over a modeled fabric: the fabric table and both of
// its checks; a bad description, a world the topology does not hold, a non-inproc transport,
// a bad --clock or --algo are one E_INPUT line and exit 2.
func TestCollectivesTopology(t *testing.T) {
	o := cli(t, "collectives", "--np", "8", "--topology", "nodes=2x4", "--ops", "all_reduce", "--counts", "7,1021", "-b", "4K", "-e", "4K",
		"--iters", "2", "--warmup", "0")
	o.want(t, ExitOK, "")
	for _, line := range []string{"# fabric nodes=2x4 (virtual time)", "check topology nodes=2x4: the flat algorithm's bits (3 rows): ok",
		"check fabric model: measured within 15%", " hier "} {
		if !strings.Contains(o.stdout, line) {
			t.Fatalf("no %q in:\n%s", line, o.stdout)
		}
	}
	for _, args := range [][]string{
		{"--topology", "mesh=4"},
		{"--topology", "nodes=2x4", "--np", "4"},
		{"--topology", "nodes=2x2", "--np", "4", "--transport", "tcp"},
		{"--topology", "nodes=2x2", "--np", "4", "--clock", "sundial"},
		{"--topology", "nodes=2x2", "--np", "4", "--algo", "ring"},
	} {
		o := cli(t, append([]string{"collectives", "-e", "1K", "--iters", "0"}, args...)...)
		if o.code != ExitUsage || o.errToken(t) != "E_INPUT" {
			t.Errorf("%v: exit %d %q, want 2 E_INPUT", args, o.code, o.stderr)
		}
	}
}

// train --topology warns when a tp group crosses a slow link.
func TestTrainPlacementWarning(t *testing.T) {
	o := cli(t, "train", "--model", "mlp", "--steps", "1", "--mesh", "tp=2,dp=2", "--topology", "nodes=2x2")
	o.want(t, ExitOK, "")
	if !strings.Contains(o.stderr, "warning: mesh tp=2,dp=2 on nodes=2x2: 2 of 2 tp groups cross a slow link") {
		t.Fatalf("no placement warning in:\n%s", o.stderr)
	}
	o = cli(t, "train", "--model", "mlp", "--steps", "1", "--mesh", "dp=2,tp=2", "--topology", "nodes=2x2")
	o.want(t, ExitOK, "")
	if strings.Contains(o.stderr, "warning") {
		t.Fatalf("tp inside a node warned:\n%s", o.stderr)
	}
}
