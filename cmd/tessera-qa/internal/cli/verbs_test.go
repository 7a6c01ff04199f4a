package cli

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/engine/ref"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
	"github.com/tessera-qa/tessera-qa/harness"
)

// writeInputs draws random inputs for the graph file and writes them, one array per input.
func writeInputs(t *testing.T, path, graphFile string) (*graph.Graph, map[string]*tensor.Tensor) {
	t.Helper()
	g, err := graph.ParseFile(graphFile)
	if err != nil {
		t.Fatal(err)
	}
	in, err := harness.RandomInputs(g, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	var ts []*tensor.Tensor
	for _, v := range g.Inputs {
		names, ts = append(names, v.Name), append(ts, in[v.Name])
	}
	if err := tensor.WriteNPZFile(path, names, ts); err != nil {
		t.Fatal(err)
	}
	return g, in
}

func readOutputs(t *testing.T, path string, g *graph.Graph) []*tensor.Tensor {
	t.Helper()
	arrays, err := tensor.ReadNPZFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(arrays) != len(g.Outputs) {
		t.Fatalf("%s holds %d arrays, graph %s has %d outputs", path, len(arrays), g.Name, len(g.Outputs))
	}
	out := make([]*tensor.Tensor, len(arrays))
	for i, v := range g.Outputs {
		if arrays[i].Name != v.Name {
			t.Fatalf("array %d is %q, want output %q", i, arrays[i].Name, v.Name)
		}
		if out[i], err = arrays[i].As(v.Type.DType); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

func TestOpsListsEveryOp(t *testing.T) {
	o := cli(t, "ops")
	o.want(t, ExitOK, "")
	var listed []string
	for _, line := range strings.Split(strings.TrimSpace(o.stdout), "\n")[1:] {
		listed = append(listed, strings.Fields(line)[0])
	}
	var want []string
	for _, d := range append(graph.Ops(), graph.CollectiveOps()...) {
		want = append(want, d.Name)
	}
	if !slices.Equal(listed, want) {
		t.Errorf("ops table lists %v, registry has %v", listed, want)
	}
	if !strings.Contains(o.stdout, "to:dtype") || !strings.Contains(o.stdout, "axis:int=-1") {
		t.Errorf("attributes missing from the table:\n%s", o.stdout)
	}

	o = cli(t, "ops", "--json", "-")
	o.want(t, ExitOK, "")
	var ops []opJSON
	mustJSON(t, o.stdout, &ops)
	if len(ops) != len(want) {
		t.Fatalf("ops --json has %d ops, registry %d", len(ops), len(want))
	}
	for i, op := range ops {
		d, _ := graph.Lookup(want[i])
		if op.Name != d.Name || op.Arity != d.Arity() || len(op.DTypes) != len(d.DTypes) || len(op.Attrs) != len(d.Attrs) {
			t.Errorf("ops --json entry %d = %+v, registry %s", i, op, d.Name)
		}
	}
}

func TestDevicesSaysWhyUnavailable(t *testing.T) {
	o := cli(t, "devices")
	o.want(t, ExitOK, "")
	if !strings.Contains(o.stdout, "zz-missing  unavailable  E_NO_DEVICE: no zz device in this test") {
		t.Errorf("unavailable backend without its reason:\n%s", o.stdout)
	}
	o = cli(t, "devices", "--json", "-")
	o.want(t, ExitOK, "")
	var ds []deviceJSON
	mustJSON(t, o.stdout, &ds)
	byName := map[string]deviceJSON{}
	for _, d := range ds {
		byName[d.Backend] = d
	}
	if cpu := byName["cpu"]; !cpu.Available || cpu.Device == "" || cpu.DeviceClass == "" {
		t.Errorf("cpu entry: %+v", cpu)
	}
	if m := byName["zz-missing"]; m.Available || !strings.HasPrefix(m.Reason, "E_NO_DEVICE") {
		t.Errorf("zz-missing entry: %+v", m)
	}
}

func TestCompile(t *testing.T) {
	g := exampleGraph(t)
	o := cli(t, "compile", g)
	o.want(t, ExitOK, "")
	if !strings.Contains(o.stdout, "schedule-hash ") || !strings.Contains(o.stdout, "k0 ") {
		t.Errorf("default output lacks schedules or hash:\n%s", o.stdout)
	}

	o = cli(t, "compile", "--dump=graph,schedule,tile", g)
	o.want(t, ExitOK, "")
	iGraph := strings.Index(o.stdout, "after dce (graph)")
	iSched := strings.Index(o.stdout, "after schedule (schedule)")
	iTile := strings.Index(o.stdout, "after verify-tile (tile)")
	if iGraph < 0 || iSched < iGraph || iTile < iSched || !strings.Contains(o.stdout, "graph mlp {") {
		t.Errorf("dump lacks graph, schedule and tile views in order:\n%s", o.stdout)
	}
	o = cli(t, "compile", "--dump=after:canonicalize", g)
	o.want(t, ExitOK, "")
	if !strings.Contains(o.stdout, "after canonicalize") || strings.Contains(o.stdout, "after dce") {
		t.Errorf("--dump=after:canonicalize:\n%s", o.stdout)
	}

	o = cli(t, "compile", g, "--json", "-")
	o.want(t, ExitOK, "")
	var c compileJSON
	mustJSON(t, o.stdout, &c)
	if c.Graph != "mlp" || c.ScheduleHash == "" || c.Kernels == 0 || len(c.Schedules) == 0 {
		t.Errorf("compile --json: %+v", c)
	}

	cli(t, "compile", filepath.Join("testdata", "bad.tg")).want(t, ExitUsage, "E_PARSE")
	cli(t, "compile", filepath.Join("testdata", "no-such.tg")).want(t, ExitUsage, "E_INPUT")
}

func TestExecRoundTripMatchesGoldenModel(t *testing.T) {
	dir := t.TempDir()
	gfile := exampleGraph(t)
	in, out, refOut := filepath.Join(dir, "in.npz"), filepath.Join(dir, "out.npz"), filepath.Join(dir, "ref.npz")
	g, inputs := writeInputs(t, in, gfile)
	want, err := ref.Run(g, inputs)
	if err != nil {
		t.Fatal(err)
	}

	o := cli(t, "exec", gfile, "--in", in, "--out", out)
	o.want(t, ExitOK, "")
	if !strings.Contains(o.stdout, "graph mlp on cpu") {
		t.Errorf("stdout: %s", o.stdout)
	}
	got := readOutputs(t, out, g)
	for i, v := range g.Outputs {
		// The longest sum in the example is the first matmul's K.
		tol := harness.DefaultTolerance(v.Type.DType).ForReduction(16)
		if r := harness.Check(got[i], want[i], tol); !r.Pass {
			t.Errorf("output %%%s: %s", v.Name, r.Reason)
		}
	}

	o = cli(t, "exec", gfile, "--in", in, "--out", refOut, "--backend", "ref", "--json", "-")
	o.want(t, ExitOK, "")
	var rep execJSON
	mustJSON(t, o.stdout, &rep)
	if rep.Backend != "ref" || len(rep.Outputs) != len(g.Outputs) {
		t.Errorf("exec --json: %+v", rep)
	}
	for i, t2 := range readOutputs(t, refOut, g) {
		if t2.Digest() != want[i].Digest() || rep.Outputs[i].Digest != want[i].Digest() {
			t.Errorf("--backend ref output %d is not the golden model's, bit for bit", i)
		}
	}
}

func TestExecReadsSixteenBitAndIntInputs(t *testing.T) {
	dir := t.TempDir()
	gfile := filepath.Join("testdata", "half.tg")
	in, out := filepath.Join(dir, "in.npz"), filepath.Join(dir, "out.npz")
	g, inputs := writeInputs(t, in, gfile)
	cli(t, "exec", gfile, "--in", in, "--out", out).want(t, ExitOK, "")
	want, err := ref.Run(g, inputs)
	if err != nil {
		t.Fatal(err)
	}
	for i, got := range readOutputs(t, out, g) {
		if r := harness.Check(got, want[i], harness.DefaultTolerance(got.DType)); !r.Pass {
			t.Errorf("output %d: %s", i, r.Reason)
		}
	}
}

func TestExecBadInputs(t *testing.T) {
	dir := t.TempDir()
	gfile := exampleGraph(t)
	g, inputs := writeInputs(t, filepath.Join(dir, "good.npz"), gfile)
	write := func(name string, names []string, ts []*tensor.Tensor) string {
		p := filepath.Join(dir, name)
		if err := tensor.WriteNPZFile(p, names, ts); err != nil {
			t.Fatal(err)
		}
		return p
	}
	var names []string
	var ts []*tensor.Tensor
	for _, v := range g.Inputs {
		names, ts = append(names, v.Name), append(ts, inputs[v.Name])
	}
	first := g.Inputs[0]
	wrongDType := tensor.New(numerics.F64, first.Type.Shape)
	wrongShape := tensor.New(first.Type.DType, []int{first.Type.Shape[0] + 1, first.Type.Shape[1]})
	garbage := filepath.Join(dir, "garbage.npz")
	os.WriteFile(garbage, []byte("this is not a zip archive"), 0o644)

	for _, tc := range []struct {
		name, in, token string
	}{
		{"missing input", write("missing.npz", names[1:], ts[1:]), "E_INPUT"},
		{"extra input", write("extra.npz", append(slices.Clone(names), "bogus"), append(slices.Clone(ts), ts[0])), "E_INPUT"},
		{"wrong dtype", write("dtype.npz", names, append([]*tensor.Tensor{wrongDType}, ts[1:]...)), "E_DTYPE"},
		{"wrong shape", write("shape.npz", names, append([]*tensor.Tensor{wrongShape}, ts[1:]...)), "E_SHAPE"},
		{"not an npz", garbage, "E_INPUT"},
		{"no such file", filepath.Join(dir, "absent.npz"), "E_INPUT"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := filepath.Join(dir, "out-"+strings.ReplaceAll(tc.name, " ", "-")+".npz")
			sentinel := []byte("an earlier result that must survive")
			os.WriteFile(out, sentinel, 0o644)
			cli(t, "exec", gfile, "--in", tc.in, "--out", out).want(t, ExitUsage, tc.token)
			if b, _ := os.ReadFile(out); string(b) != string(sentinel) {
				t.Errorf("failed exec clobbered %s", out)
			}
		})
	}
	good := filepath.Join(dir, "good.npz")
	cli(t, "exec", filepath.Join("testdata", "bad.tg"), "--in", good, "--out", filepath.Join(dir, "o.npz")).want(t, ExitUsage, "E_PARSE")
	cli(t, "exec", gfile, "--in", good, "--out", filepath.Join(dir, "o.npz"), "--backend", "nosuch").want(t, ExitUsage, "E_UNSUPPORTED")
	cli(t, "exec", gfile, "--in", good, "--out", filepath.Join(dir, "o.npz"), "--backend", "zz-missing").want(t, ExitMissing, "E_NO_DEVICE")
	cli(t, "exec", gfile, "--in", good, "--out", filepath.Join(dir, "no", "dir", "o.npz")).want(t, ExitUsage, "E_INPUT")
}
