package cli

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tessera-qa/tessera-qa/profiling"
	"github.com/tessera-qa/tessera-qa/report"
)

// TestProfileMLP is the first "done when": the per-kernel table, and a trace that the
// validator accepts; the --json document is one that report ingest stores.
func TestProfileMLP(t *testing.T) {
	dir := t.TempDir()
	trace, js := filepath.Join(dir, "out.json"), filepath.Join(dir, "prof.json")
	o := cli(t, "profile", "../../../../docs/examples/mlp.tg", "--trace", trace, "--json", js, "--reps", "3")
	if o.code != 0 {
		t.Fatalf("exit %d\n%s%s", o.code, o.stdout, o.stderr)
	}
	for _, want := range []string{"MatMul[4x16x8] latency=", "Add+Gelu[4x16] latency=", "fusion fuse-elementwise fused %hb=add %a=gelu", "compile ", "valid"} {
		if !strings.Contains(o.stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, o.stdout)
		}
	}
	if st, err := profiling.ValidateFile(trace); err != nil || st.Flows != 3*5 {
		t.Errorf("trace: %+v, %v", st, err)
	}
	db, err := report.Open(context.Background(), filepath.Join(dir, "r.db"), report.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	res, err := db.IngestFile(context.Background(), js, report.IngestOptions{})
	if err != nil || res.Kind != "bench" || res.Rows != 1 {
		t.Errorf("ingest: %+v, %v", res, err)
	}
}

func TestProfileBadInput(t *testing.T) {
	if o := cli(t, "profile", "no-such.tg"); o.code != 2 || o.errToken(t) != "E_INPUT" {
		t.Errorf("missing graph: exit %d %s", o.code, o.stderr)
	}
	if o := cli(t, "profile", "../../../../docs/examples/mlp.tg", "--reps", "0"); o.code != 2 {
		t.Errorf("--reps 0: exit %d %s", o.code, o.stderr)
	}
}
