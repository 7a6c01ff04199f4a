package mutate

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/errs"
	fp "github.com/tessera-qa/tessera-qa/engine/failpoint"
	"github.com/tessera-qa/tessera-qa/engine/graph"
)

func TestCatalogueIsComplete(t *testing.T) {
	var names []string
	for _, f := range Catalogue() {
		names = append(names, f.Name)
		if !slices.Contains(Layers, f.Layer) {
			t.Errorf("%s: layer %q", f.Name, f.Layer)
		}
		if !strings.HasPrefix(f.Name, string(f.Layer)+"/") {
			t.Errorf("%s: name does not start with its layer %s", f.Name, f.Layer)
		}
		if f.Hook == "" || len(f.Breaks) < 40 || (len(f.Ops) == 0) != (f.Layer == LayerJudge) {
			t.Errorf("%s: hook %q, breaks %q, ops %v: every field is required (ops none for a judge fault, which changes no op)", f.Name, f.Hook, f.Breaks, f.Ops)
		}
		for _, s := range f.First {
			if !slices.Contains(SuiteNames(), s) {
				t.Errorf("%s: first suite %q is not a suite (have %v)", f.Name, s, SuiteNames())
			}
		}
		for _, op := range f.Ops {
			if _, ok := graph.Lookup(op); !ok {
				t.Errorf("%s: op %q is not in the registry", f.Name, op)
			}
		}
	}
	if want := append(fp.Names(), fp.JudgeNames()...); !slices.Equal(names, want) {
		t.Errorf("catalogue %v\nfailpoint.Names, JudgeNames %v\nwant the same faults in the same order", names, want)
	}
	if len(names) < 12 {
		t.Errorf("%d faults, the issue asks for at least 12", len(names))
	}
}

// TestEveryFaultHasItsHook reads the source: the file a fault's Hook names must use the
// fault's failpoint constant, so the catalogue cannot describe a hook that is not there.
func TestEveryFaultHasItsHook(t *testing.T) {
	root, err := FindRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	idents := failpointConstants(t, filepath.Join(root, "engine", "failpoint", "names.go"))
	for _, f := range Catalogue() {
		id, ok := idents[f.Name]
		if !ok {
			t.Errorf("%s: no constant in engine/failpoint/names.go", f.Name)
			continue
		}
		file, fn, _ := strings.Cut(f.Hook, " ")
		src, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(file)))
		if err != nil {
			t.Errorf("%s: hook file: %v", f.Name, err)
			continue
		}
		if !strings.Contains(string(src), "failpoint."+id) {
			t.Errorf("%s: %s does not use failpoint.%s", f.Name, file, id)
		}
		if name := fn[strings.LastIndexAny(fn, ").")+1:]; !strings.Contains(string(src), " "+name+"(") {
			t.Errorf("%s: %s has no function %s", f.Name, file, fn)
		}
	}
}

// failpointConstants maps each fault name to the identifier of its constant.
func failpointConstants(t *testing.T, path string) map[string]string {
	t.Helper()
	file, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	ast.Inspect(file, func(n ast.Node) bool {
		vs, ok := n.(*ast.ValueSpec)
		if !ok {
			return true
		}
		for i, id := range vs.Names {
			if i < len(vs.Values) {
				if lit, ok := vs.Values[i].(*ast.BasicLit); ok {
					if v, err := strconv.Unquote(lit.Value); err == nil {
						out[v] = id.Name
					}
				}
			}
		}
		return true
	})
	return out
}

func TestSelectFaults(t *testing.T) {
	all, err := SelectFaults(nil)
	if err != nil || len(all) != len(fp.Names())+len(fp.JudgeNames()) {
		t.Fatalf("SelectFaults(nil) = %d faults, %v", len(all), err)
	}
	cpu, err := SelectFaults([]string{"cpu/", fp.MatmulAccumBF16, "cpu/"})
	if err != nil {
		t.Fatal(err)
	}
	cpuFaults := 0 // counted, so that a new cpu/ fault does not break the test
	for _, n := range fp.Names() {
		if strings.HasPrefix(n, "cpu/") {
			cpuFaults++
		}
	}
	if cpu[0].Name != fp.MatmulAccumBF16 || len(cpu) != 1+cpuFaults {
		t.Errorf("SelectFaults(cpu/, accumulate-bf16) = %v: want catalogue order, no repeats", cpu)
	}
	for _, bad := range []string{"cpu", "compiler/matmul", "nope/"} {
		if _, err := SelectFaults([]string{bad}); errs.CodeOf(err) != errs.Input || !strings.Contains(err.Error(), strconv.Quote(bad)) {
			t.Errorf("SelectFaults(%q) = %v, want E_INPUT naming it", bad, err)
		}
	}
}

func TestSelectSuites(t *testing.T) {
	s, err := SelectSuites([]string{"engine", "golden", "engine"})
	if err != nil || len(s) != 2 || s[0].Name != "engine" || s[1].Name != "golden" {
		t.Errorf("SelectSuites(engine, golden, engine) = %v, %v: want the order given, once each", s, err)
	}
	if _, err := SelectSuites([]string{"goldne"}); errs.CodeOf(err) != errs.Input || !strings.Contains(err.Error(), "golden, rewrite, rounding, determinism") {
		t.Errorf("unknown suite: %v, want E_INPUT listing the suites", err)
	}
	for _, s := range Suites() {
		if s.Name == "" || s.Kind == 0 || len(s.Packages) == 0 || s.What == "" {
			t.Errorf("suite %+v: every field is required", s)
		}
	}
}

func TestMissingSuite(t *testing.T) {
	root := t.TempDir()
	g := Suite{Name: "golden", Kind: KindGinkgo, Packages: []string{"suites/golden"}}
	if m := g.missing(root); !strings.Contains(m, "suites/golden is not in this tree") {
		t.Errorf("missing() = %q", m)
	}
	dir := filepath.Join(root, "suites", "golden")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "x_test.go"), []byte("package golden_test\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if m := g.missing(root); m != "" {
		t.Errorf("missing() = %q with a test file present", m)
	}
}

// Each layer meets only its own suites: the judge layer the judges' tests, every engine layer
// the rest, and CI's mutation check runs a judges suite.
func TestJudgeFaultsMeetOnlyTheJudgesSuites(t *testing.T) {
	judges, err := SelectFaults([]string{"judge/"})
	if err != nil || len(judges) != len(fp.JudgeNames()) {
		t.Fatalf("SelectFaults(judge/) = %d faults, %v", len(judges), err)
	}
	engine, _ := SelectFaults([]string{fp.MatmulAccumBF16})
	var judgeSuites int
	for _, s := range Suites() {
		if s.Judges {
			judgeSuites++
		}
		if s.applies(judges[0]) != s.Judges || s.applies(engine[0]) == s.Judges {
			t.Errorf("suite %s (judges %v): runs against %s %v, against %s %v", s.Name, s.Judges, judges[0].Name, s.applies(judges[0]), engine[0].Name, s.applies(engine[0]))
		}
	}
	if judgeSuites == 0 {
		t.Error("no suite holds the judges' tests")
	}
}
