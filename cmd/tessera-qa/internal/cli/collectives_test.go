package cli

import (
	"strings"
	"testing"

	"github.com/tessera-qa/tessera-qa/collectives"
)

func TestCollectivesInprocJSONRows(t *testing.T) {
	o := cli(t, "collectives", "--np", "3", "--ops", "all_reduce,all_gather,broadcast", "--dtypes", "f32,int8", "--redops", "sum,max",
		"-b", "64", "-e", "4K", "--iters", "2", "--warmup", "1", "--root", "2", "--json", "-")
	o.want(t, ExitOK, "")
	var rep collectives.Report
	mustJSON(t, o.stdout, &rep)
	if !rep.Passed || rep.Kind != collectives.ReportKind || len(rep.Rows) < 20 {
		t.Fatalf("report: passed %v kind %q rows %d", rep.Passed, rep.Kind, len(rep.Rows))
	}
	for _, r := range rep.Rows {
		if r.Transport != "inproc" || r.World != 3 || r.Mode != "deterministic" || r.Wrong != 0 || r.WrongIP != 0 || len(r.Digest) != 64 || !r.OK {
			t.Fatalf("row %+v", r)
		}
		if r.Op == "broadcast" && r.Root != 2 {
			t.Fatalf("broadcast root %d", r.Root)
		}
		if r.Count > 0 && r.Bytes > 0 && (r.TimeUS <= 0 || r.BusBWGBs <= 0) {
			t.Fatalf("untimed row %+v", r)
		}
	}
	// The human table moved to stderr: nccl-tests' columns and the verdict.
	for _, s := range []string{"#wrong", "busbw", "algbw", "out-of-place", "in-place", "# Out of bounds values : 0 OK", "PASS"} {
		if !strings.Contains(o.stderr, s) {
			t.Errorf("stderr lacks %q:\n%s", s, o.stderr)
		}
	}
}

func TestCollectivesExactModeSameBitsOnEveryWorld(t *testing.T) {
	o := cli(t, "collectives", "--mode", "exact", "--np", "1,2,3,4,8", "--ops", "all_reduce", "--dtypes", "f32,bf16", "--redops", "sum",
		"--counts", "1,1021", "-b", "4K", "-e", "4K", "--iters", "0")
	o.want(t, ExitOK, "")
	if !strings.Contains(o.stdout, "check exact all_reduce: the same bits on worlds 1,2,3,4,8 (6 cases): ok") {
		t.Fatalf("no split check line:\n%s", o.stdout)
	}
}

func TestCollectivesBadInput(t *testing.T) {
	for _, c := range []struct {
		args  []string
		code  int
		token string
	}{
		{[]string{"--np", "x"}, ExitUsage, "E_INPUT"},
		{[]string{"--np", "0"}, ExitUsage, "E_INPUT"},
		{[]string{"--np", "2,-1"}, ExitUsage, "E_INPUT"},
		{[]string{"--ops", "reduce"}, ExitUsage, "E_INPUT"},
		{[]string{"--dtypes", "bool"}, ExitUsage, "E_DTYPE"},
		{[]string{"--mode", "quick"}, ExitUsage, "E_INPUT"},
		{[]string{"-b", "1X"}, ExitUsage, "E_INPUT"},
		{[]string{"-b", "4K", "-e", "1K"}, ExitUsage, "E_INPUT"},
		{[]string{"-f", "1"}, ExitUsage, "E_INPUT"},
		{[]string{"--np", "2", "--root", "2"}, ExitUsage, "E_INPUT"},
		{[]string{"--iters", "-1"}, ExitUsage, "E_INPUT"},
		{[]string{"--transport", "pigeon"}, ExitUsage, "E_INPUT"},
		{[]string{"--transport", "cuda"}, ExitMissing, "E_UNSUPPORTED"},
		{[]string{"--transport", "nccl", "--np", "1"}, ExitMissing, "E_UNSUPPORTED"},
		{[]string{"--vs", "gloo"}, ExitMissing, "E_UNSUPPORTED"},
		{[]string{"--vs", "nccl"}, ExitUsage, "E_INPUT"},
		{[]string{"--np", "3", "--mismatch", "1:count", "--timeout", "5s"}, ExitUsage, "E_DESYNC"},
	} {
		o := cli(t, append([]string{"collectives", "-e", "1K"}, c.args...)...)
		if o.code != c.code || o.errToken(t) != c.token {
			t.Errorf("%v: exit %d %q, want %d %s", c.args, o.code, o.stderr, c.code, c.token)
		}
	}
}
