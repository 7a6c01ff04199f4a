package profiling

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/backend"
	_ "github.com/tessera-qa/tessera-qa/engine/backend/cpu"
	"github.com/tessera-qa/tessera-qa/engine/compiler"
	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/harness"
	"github.com/tessera-qa/tessera-qa/report/parse"
)

func mustGraph(t testing.TB, src string) *graph.Graph {
	t.Helper()
	g, err := graph.Parse(src, "test.tg")
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func compile(t testing.TB, g *graph.Graph) *compiler.Program {
	t.Helper()
	p, err := compiler.Compile(g, compiler.Options{Profile: true})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestCountMatmul checks Count against the closed form of a tile-aligned matmul with the
// default 64x64x32 tiles: 2*M*N*K FLOPs, and per grid point K/BK loads of a BMxBK A tile and
// a BKxBN B tile plus one BMxBN store, 4 bytes each.
func TestCountMatmul(t *testing.T) {
	for _, c := range []struct{ m, n, k int }{{128, 128, 64}, {64, 192, 96}} {
		g := mustGraph(t, fmt.Sprintf("graph mm {\n input %%a: f32[%d,%d]\n input %%b: f32[%d,%d]\n %%c = matmul(%%a, %%b)\n output %%c\n}\n", c.m, c.k, c.k, c.n))
		p := compile(t, g)
		if len(p.Kernels) != 1 {
			t.Fatalf("%v: %d kernels", c, len(p.Kernels))
		}
		got, err := Count(p.Kernels[0])
		if err != nil {
			t.Fatal(err)
		}
		const bm, bn, bk = 64, 64, 32
		points := int64(c.m / bm * c.n / bn)
		wantBytes := 4 * (points*int64(c.k/bk)*(bm*bk+bk*bn) + int64(c.m*c.n))
		if got.FLOPs != int64(2*c.m*c.n*c.k) || got.Bytes != wantBytes {
			t.Errorf("matmul %v: %+v, want flops %d bytes %d", c, got, 2*c.m*c.n*c.k, wantBytes)
		}
	}
}

// TestCountMaskedElementwise: a ragged elementwise add counts only the elements inside the
// buffer (1000 of the 1024-wide tile): one FLOP per lane of the tile, bytes per element.
func TestCountMaskedElementwise(t *testing.T) {
	g := mustGraph(t, "graph ew {\n input %a: f32[1000]\n input %b: f32[1000]\n %c = add(%a, %b)\n output %c\n}\n")
	p := compile(t, g)
	got, err := Count(p.Kernels[0])
	if err != nil {
		t.Fatal(err)
	}
	if got.Bytes != 3*4*1000 {
		t.Errorf("bytes %d, want %d (two loads and a store of 1000 f32)", got.Bytes, 3*4*1000)
	}
	if got.FLOPs < 1000 || got.FLOPs > 1024 {
		t.Errorf("flops %d, want 1000..1024 (one add per lane)", got.FLOPs)
	}
}

const mlp = `graph mlp {
  input %x: f32[4,8]
  input %w1: f32[8,16]
  input %b1: f32[16]
  input %w2: f32[16,4]
  %h: f32[4,16] = matmul(%x, %w1)
  %hb = add(%h, %b1)
  %a = gelu(%hb) {approx="tanh"}
  %logits: f32[4,4] = matmul(%a, %w2)
  %p = softmax(%logits) {axis=-1}
  output %p
}
`

func profileMLP(t testing.TB, reps int) *Report {
	t.Helper()
	g := mustGraph(t, mlp)
	in, err := harness.RandomInputs(g, 7, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := backend.Get("cpu")
	rep, err := Profile(g, in, b, Options{Reps: reps})
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func TestProfileRecordsEveryLaunch(t *testing.T) {
	rep := profileMLP(t, 3)
	if len(rep.Kernels) != 4 || len(rep.Runs) != 3 || len(rep.StepUS) != 3 {
		t.Fatalf("kernels %d runs %d steps %d, want 4, 3, 3", len(rep.Kernels), len(rep.Runs), len(rep.StepUS))
	}
	labels := []string{"MatMul[4x16x8]", "Add+Gelu[4x16]", "MatMul[4x4x16]", "Softmax[4x4]"}
	for i, k := range rep.Kernels {
		if k.Label != labels[i] || k.Launches != 3 || len(k.SamplesUS) != 3 || k.MedianUS <= 0 {
			t.Errorf("kernel %d: label %q launches %d samples %v", i, k.Label, k.Launches, k.SamplesUS)
		}
		if k.Points != k.GridPoints {
			t.Errorf("kernel %s ran %d grid points, its grid has %d", k.Name, k.Points, k.GridPoints)
		}
		if k.GFLOPs < 0 || k.GBps <= 0 || len(k.Nodes) == 0 {
			t.Errorf("kernel %s: gflops %g gbps %g nodes %v", k.Name, k.GFLOPs, k.GBps, k.Nodes)
		}
	}
	if got := rep.Kernels[1].Fusion; len(got) != 1 || !strings.Contains(got[0], "fuse-elementwise fused %hb=add %a=gelu") {
		t.Errorf("fusion of Add+Gelu: %q", got)
	}
	if len(rep.Passes) != len(compiler.PassNames()) {
		t.Errorf("%d pass times for %d passes", len(rep.Passes), len(compiler.PassNames()))
	}
	var buf bytes.Buffer
	if err := rep.WriteSummary(&buf, 2); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(buf.String(), " latency="); n != 2 || !strings.Contains(buf.String(), "compile ") {
		t.Errorf("summary with top 2 has %d kernel lines:\n%s", n, buf.String())
	}
}

// TestProfilingKeepsTheBits: the outputs of a profiled run have the digests of a plain run.
func TestProfilingKeepsTheBits(t *testing.T) {
	g := mustGraph(t, mlp)
	in, _ := harness.RandomInputs(g, 3, nil)
	p := compile(t, g)
	b, _ := backend.Get("cpu")
	plain, err := b.Run(p, in)
	if err != nil {
		t.Fatal(err)
	}
	prof, err := backend.RunProfiled(b, p, in, &Recorder{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range plain {
		if plain[i].Digest() != prof[i].Digest() {
			t.Errorf("output %d: digest %s plain, %s profiled", i, plain[i].Digest(), prof[i].Digest())
		}
	}
}

func TestFusionTraceNamesAttention(t *testing.T) {
	g := mustGraph(t, `graph attn {
  input %q: f32[8,16]
  input %k: f32[8,16]
  input %v: f32[8,16]
  %s = matmul(%q, %k) {transpose_b=true}
  %pr = softmax(%s) {axis=-1}
  %o = matmul(%pr, %v)
  output %o
}
`)
	p := compile(t, g)
	var got []string
	for _, r := range p.Log.Rewrites {
		got = append(got, r.String())
	}
	joined := strings.Join(got, "\n")
	if !strings.Contains(joined, "fuse-attention op %o=matmul->attention") || !strings.Contains(joined, "removed %s=matmul %pr=softmax") {
		t.Errorf("fusion trace:\n%s", joined)
	}
}

func TestTraceIsValidAndGzips(t *testing.T) {
	rep := profileMLP(t, 2)
	dir := t.TempDir()
	for _, name := range []string{"a.trace.json", "b.trace.json.gz"} {
		if err := rep.Trace().WriteFile(filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	st, err := ValidateFile(filepath.Join(dir, "b.trace.json.gz"))
	if err != nil {
		t.Fatal(err)
	}
	if st.Flows != 8 || st.Categories["kernel"] != 8 || st.Categories["compile"] != 1+len(rep.Passes) || len(st.Processes) != 2 || st.Counters != 4 {
		t.Errorf("stats %+v", st)
	}
	if n, err := ValidateDir(dir); n != 2 || err != nil {
		t.Errorf("ValidateDir: %d traces, %v", n, err)
	}
}

// TestValidatorRejects: each broken trace differs from a valid one in one rule.
func TestValidatorRejects(t *testing.T) {
	head := `{"name":"process_name","ph":"M","pid":1,"tid":0,"args":{"name":"p"}},{"name":"thread_name","ph":"M","pid":1,"tid":1,"args":{"name":"t"}},{"name":"thread_name","ph":"M","pid":1,"tid":2,"args":{"name":"u"}}`
	doc := func(evs ...string) []byte {
		return []byte(`{"traceEvents":[` + strings.Join(append([]string{head}, evs...), ",") + `]}`)
	}
	ok := []string{
		`{"name":"a","ph":"X","ts":0,"dur":10,"pid":1,"tid":1}`,
		`{"name":"b","ph":"X","ts":2,"dur":3,"pid":1,"tid":1}`,
		`{"name":"c","ph":"X","ts":5,"dur":5,"pid":1,"tid":1}`,
		`{"name":"k","ph":"X","ts":6,"dur":1,"pid":1,"tid":2}`,
		`{"name":"l","cat":"launch","ph":"s","id":"1","ts":2,"pid":1,"tid":1}`,
		`{"name":"l","cat":"launch","ph":"f","bp":"e","id":"1","ts":6,"pid":1,"tid":2}`,
		`{"name":"mem","ph":"C","ts":1,"pid":1,"args":{"bytes":5}}`,
	}
	if _, err := Validate(doc(ok...)); err != nil {
		t.Fatalf("valid trace refused: %v", err)
	}
	replace := func(i int, ev string) []string {
		out := append([]string(nil), ok...)
		out[i] = ev
		return out
	}
	cases := map[string][]string{
		"overlap":          replace(2, `{"name":"c","ph":"X","ts":4,"dur":8,"pid":1,"tid":1}`),
		"negative dur":     replace(1, `{"name":"b","ph":"X","ts":2,"dur":-1,"pid":1,"tid":1}`),
		"no dur":           replace(1, `{"name":"b","ph":"X","ts":2,"pid":1,"tid":1}`),
		"negative ts":      replace(1, `{"name":"b","ph":"X","ts":-2,"dur":1,"pid":1,"tid":1}`),
		"fractional pid":   replace(1, `{"name":"b","ph":"X","ts":2,"dur":1,"pid":1.5,"tid":1}`),
		"unnamed thread":   replace(3, `{"name":"k","ph":"X","ts":6,"dur":1,"pid":1,"tid":3}`),
		"flow without bp":  replace(5, `{"name":"l","cat":"launch","ph":"f","id":"1","ts":6,"pid":1,"tid":2}`),
		"flow id mismatch": replace(5, `{"name":"l","cat":"launch","ph":"f","bp":"e","id":"2","ts":6,"pid":1,"tid":2}`),
		"flow backwards":   replace(5, `{"name":"l","cat":"launch","ph":"f","bp":"e","id":"1","ts":1,"pid":1,"tid":2}`),
		"flow outside":     replace(5, `{"name":"l","cat":"launch","ph":"f","bp":"e","id":"1","ts":8,"pid":1,"tid":2}`),
		"counter text":     replace(6, `{"name":"mem","ph":"C","ts":1,"pid":1,"args":{"bytes":"5"}}`),
		"unknown phase":    replace(6, `{"name":"mem","ph":"Q","ts":1,"pid":1}`),
		"nanoseconds":      replace(1, `{"name":"b","ph":"X","ts":2e11,"dur":1,"pid":1,"tid":1}`),
	}
	for name, evs := range cases {
		if _, err := Validate(doc(evs...)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := Validate([]byte(`{"traceEvents":[],"displayTimeUnit":"s"}`)); err == nil {
		t.Error("displayTimeUnit s accepted")
	}
	if _, err := Validate([]byte(`[1,2]`)); err == nil {
		t.Error("a bare array of numbers accepted")
	}
}

// TestBenchDocIsIngestable: the --json document parses as a bench report with the kernels.
func TestBenchDocIsIngestable(t *testing.T) {
	rep := profileMLP(t, 3)
	data, err := json.Marshal(rep.BenchDoc())
	if err != nil {
		t.Fatal(err)
	}
	p, err := parse.Parse("prof.json", data)
	if err != nil {
		t.Fatal(err)
	}
	if p.Kind != "bench" || len(p.Batch.Bench) != 1 || p.Batch.Bench[0].Key.Benchmark != "profile/mlp" || len(p.Batch.Bench[0].Samples) != 3 {
		t.Fatalf("parsed %+v", p.Batch.Bench)
	}
	if err := os.WriteFile(filepath.Join(t.TempDir(), "x.json"), data, 0o644); err != nil {
		t.Fatal(err)
	}
}
