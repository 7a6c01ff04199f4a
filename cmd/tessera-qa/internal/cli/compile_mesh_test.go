package cli

import (
	"strings"
	"testing"
)

func TestCompileMeshDumpsEveryRanksProgram(t *testing.T) {
	g := exampleGraph(t)
	o := cli(t, "compile", "--mesh", "dp=2,tp=2", "--layout", "w1=col:tp", "--layout", "x=[S(dp),R]", "--dump=dist", g)
	o.want(t, ExitOK, "")
	for _, want := range []string{"after shard (dist)", "rank 0 of 4 (dp=0,tp=0)", "rank 3 of 4 (dp=1,tp=1)", "mesh dp=2,tp=2", "all_reduce(", "schedule-hash "} {
		if !strings.Contains(o.stdout, want) {
			t.Errorf("--dump=dist lacks %q:\n%s", want, o.stdout)
		}
	}
	o = cli(t, "compile", "--mesh", "tp=2", "--layout", "w1=col:tp", g)
	o.want(t, ExitOK, "")
	if !strings.Contains(o.stdout, "step 1: %b1.chunk_tp = chunk over tp") || !strings.Contains(o.stdout, "2 ranks") {
		t.Errorf("steps:\n%s", o.stdout)
	}
	cli(t, "compile", "--mesh", "tp=3", "--layout", "w1=col:tp", g).want(t, ExitUsage, "E_SHAPE")
	cli(t, "compile", "--mesh", "tp=2", "--layout", "w1=diag:tp", g).want(t, ExitUsage, "E_PARSE")
	cli(t, "compile", "--mesh", "tp=2", "--layout", "nope=R", g).want(t, ExitUsage, "E_INPUT")
	cli(t, "compile", "--mesh", "tp=0", g).want(t, ExitUsage, "E_PARSE")
	cli(t, "compile", "--layout", "w1=col:tp", g).want(t, ExitUsage, "E_INPUT")
}
