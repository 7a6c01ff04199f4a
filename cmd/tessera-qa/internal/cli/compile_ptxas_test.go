package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/compiler/ptx/ptxas"
)

func TestCompilePtxasWithoutTheToolIsMissing(t *testing.T) {
	t.Setenv(ptxas.Var, filepath.Join(t.TempDir(), "no-ptxas"))
	cli(t, "compile", "--target", "ptxas", exampleGraph(t)).want(t, ExitMissing, "E_UNSUPPORTED")
	cli(t, "compile", "--target", "cubin", exampleGraph(t)).want(t, ExitUsage, "E_INPUT")
	cli(t, "compile", "--target", "ptxas", "--mesh", "tp=2", exampleGraph(t)).want(t, ExitUsage, "E_INPUT")
}

// With the real assembler (CI installs it): one line a kernel, and the same in --json.
func TestCompilePtxasReportsEveryKernel(t *testing.T) {
	tool, err := ptxas.Find()
	if err != nil {
		t.Skipf("no ptxas: %v", err)
	}
	out := filepath.Join(t.TempDir(), "c.json")
	o := cli(t, "compile", "--target", "ptxas", "--json", out, exampleGraph(t))
	o.want(t, ExitOK, "")
	if !strings.Contains(o.stdout, "ptxas "+tool.Release) || !strings.Contains(o.stdout, "registers") {
		t.Fatalf("no header:\n%s", o.stdout)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var r compileJSON
	if err := json.Unmarshal(data, &r); err != nil {
		t.Fatal(err)
	}
	if len(r.Ptxas) != r.Kernels || r.Kernels == 0 {
		t.Fatalf("%d ptxas rows for %d kernels", len(r.Ptxas), r.Kernels)
	}
	for _, k := range r.Ptxas {
		if k.Registers <= 0 || k.PTXBytes <= 0 || k.Release != tool.Release || !strings.Contains(o.stdout, k.Kernel+" ") {
			t.Errorf("kernel row %+v", k)
		}
	}
	if !tool.Knows("sm_90a") {
		cli(t, "compile", "--target", "ptxas", "--arch", "sm_90a", exampleGraph(t)).want(t, ExitMissing, "E_UNSUPPORTED")
	}
}
