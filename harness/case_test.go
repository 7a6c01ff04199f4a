package harness

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/backend"
	"github.com/tessera-qa/tessera-qa/engine/compiler"
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/engine/ref"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
)

// Stub backends registered under test-only names, so that Replay can find them. "Correct" ones
// run the golden model on the program's source graph.
var (
	refStub  = &stubBackend{name: "harness-test-ref", device: "stub", class: "stub/ref", run: runRef}
	zeroStub = &stubBackend{name: "harness-test-zeros", device: "stub", class: "stub/zeros",
		run: func(p *compiler.Program, in map[string]*tensor.Tensor) ([]*tensor.Tensor, error) {
			out := make([]*tensor.Tensor, len(p.Graph.Outputs))
			for i, v := range p.Graph.Outputs {
				out[i] = tensor.New(v.Type.DType, v.Type.Shape)
			}
			return out, nil
		}}
	flakyCalls int
	flakyStub  = &stubBackend{name: "harness-test-flaky", device: "stub", class: "stub/flaky",
		run: func(p *compiler.Program, in map[string]*tensor.Tensor) ([]*tensor.Tensor, error) {
			out, err := runRef(p, in)
			flakyCalls++
			if err == nil && flakyCalls%2 == 0 {
				out[0].SetBits(0, out[0].Bits(0)^1) // one last-place bit, every other call
			}
			return out, err
		}}
)

func init() {
	backend.Register(refStub)
	backend.Register(zeroStub)
	backend.Register(flakyStub)
}

// runRef evaluates the program's graph with the golden model. Only graphs the compiler leaves
// unfused (elementwise chains, matmul) are used with it.
func runRef(p *compiler.Program, in map[string]*tensor.Tensor) ([]*tensor.Tensor, error) {
	return ref.Run(p.Graph, in)
}

func testCase(t *testing.T) Case {
	t.Helper()
	b := graph.NewBuilder("mm")
	x := b.Input("x", numerics.F32, 4, 8)
	w := b.Input("w", numerics.F32, 8, 16)
	b.Output(b.Named("y", "matmul", nil, x, w))
	g, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	in, err := RandomInputs(g, 11, nil)
	if err != nil {
		t.Fatal(err)
	}
	return Case{Suite: "unit", Name: "matmul/f32/4x8x16", Graph: g, Inputs: in, Seed: 11,
		Tolerances: []Tolerance{DefaultTolerance(numerics.F32).ForReduction(8)}, Labels: []string{"matmul"}}
}

func TestRunCasePass(t *testing.T) {
	c := testCase(t)
	r := RunCase(c, refStub)
	if r.Verdict != VerdictPass {
		t.Fatalf("verdict %s: %s (%s)", r.Verdict, r.Reason, r.ErrorCode)
	}
	if r.Schema != ResultSchema || r.Suite != "unit" || r.Case != c.Name || r.Backend != refStub.name ||
		r.DeviceClass != "stub/ref" || r.Seed != 11 || r.Env.Backend != refStub.name {
		t.Errorf("identity fields: %+v", r)
	}
	if len(r.Outputs) != 1 || r.Outputs[0].Name != "y" || r.Outputs[0].DType != "f32" || !r.Outputs[0].Check.Pass {
		t.Fatalf("outputs: %+v", r.Outputs)
	}
	want, _ := ref.Run(c.Graph, c.Inputs)
	if r.Outputs[0].Digest != want[0].Digest() || r.Digest != CombinedDigest(want) {
		t.Error("digests are not those of the outputs")
	}
	if r.InputDigests["x"] != c.Inputs["x"].Digest() || len(r.InputDigests) != 2 {
		t.Errorf("input digests: %v", r.InputDigests)
	}
	if r.ScheduleHash == "" || r.Timing.TotalMS <= 0 || r.Replay != "" {
		t.Errorf("schedule hash %q, timing %+v, replay %q", r.ScheduleHash, r.Timing, r.Replay)
	}
}

func TestRunCaseFailWritesReplay(t *testing.T) {
	dir := t.TempDir()
	c := testCase(t)
	r := Runner{Backend: zeroStub, ArtifactsDir: dir}.Run(c)
	if r.Verdict != VerdictFail || !strings.Contains(r.Reason, "output %y: constant output") {
		t.Fatalf("verdict %s: %s", r.Verdict, r.Reason)
	}
	if r.Replay == "" || filepath.Dir(r.Replay) != dir {
		t.Fatalf("replay %q not in %s", r.Replay, dir)
	}
	m, err := LoadManifest(r.Replay)
	if err != nil {
		t.Fatal(err)
	}
	if m.Kind != KindRef || m.Backend != zeroStub.name || m.Failure != r.Reason || m.ScheduleHash != r.ScheduleHash || m.Seed != 11 {
		t.Errorf("manifest: %+v", m)
	}
	// Without an artifacts dir nothing is written.
	if r := RunCase(c, zeroStub); r.Replay != "" {
		t.Errorf("RunCase wrote %s", r.Replay)
	}
}

func TestRunCaseErrorsAndSkips(t *testing.T) {
	c := testCase(t)
	skip := &stubBackend{name: "gone", unavailable: errs.New(errs.NoDevice, "no GPU")}
	if r := RunCase(c, skip); r.Verdict != VerdictSkip || r.ErrorCode != "E_NO_DEVICE" {
		t.Errorf("unavailable backend: %s %s", r.Verdict, r.ErrorCode)
	}
	failing := &stubBackend{name: "broken", run: func(*compiler.Program, map[string]*tensor.Tensor) ([]*tensor.Tensor, error) {
		return nil, errs.New(errs.OOM, "out of memory")
	}}
	if r := RunCase(c, failing); r.Verdict != VerdictError || r.ErrorCode != "E_OOM" {
		t.Errorf("run error: %s %s %s", r.Verdict, r.ErrorCode, r.Reason)
	}
	panicking := &stubBackend{name: "panics", run: func(*compiler.Program, map[string]*tensor.Tensor) ([]*tensor.Tensor, error) {
		panic("index out of range")
	}}
	if r := RunCase(c, panicking); r.Verdict != VerdictError || r.ErrorCode != "E_INTERNAL" || !strings.Contains(r.Reason, "panic during run") {
		t.Errorf("panic: %s %s %s", r.Verdict, r.ErrorCode, r.Reason)
	}
	mutating := &stubBackend{name: "mutates", run: func(p *compiler.Program, in map[string]*tensor.Tensor) ([]*tensor.Tensor, error) {
		out, err := runRef(p, in)
		in["w"].SetFloat64(0, 99)
		return out, err
	}}
	r := RunCase(c, mutating)
	if r.Verdict != VerdictFail || !strings.Contains(r.Reason, "backend modified input %w") {
		t.Errorf("mutated input: %s %s", r.Verdict, r.Reason)
	}
	if c.Inputs["w"].Float64(0) == 99 {
		t.Error("the backend's write reached the case's inputs")
	}
	short := &stubBackend{name: "short", run: func(*compiler.Program, map[string]*tensor.Tensor) ([]*tensor.Tensor, error) {
		return nil, nil
	}}
	if r := RunCase(c, short); r.Verdict != VerdictFail || !strings.Contains(r.Reason, "returned 0 outputs") || !strings.Contains(r.Reason, "got is nil") {
		t.Errorf("missing outputs: %s %s", r.Verdict, r.Reason)
	}

	bad := c
	bad.Tolerances = []Tolerance{{}, {}}
	if r := RunCase(bad, refStub); r.Verdict != VerdictError || r.ErrorCode != "E_INPUT" || !strings.Contains(r.Reason, "2 tolerances for 1 outputs") {
		t.Errorf("tolerance count: %s %s %s", r.Verdict, r.ErrorCode, r.Reason)
	}
	bad = c
	bad.Inputs = map[string]*tensor.Tensor{"x": c.Inputs["x"]}
	if r := RunCase(bad, refStub); r.Verdict != VerdictError || r.ErrorCode != "E_INPUT" || !strings.Contains(r.Reason, "missing input %w") {
		t.Errorf("missing input: %s %s %s", r.Verdict, r.ErrorCode, r.Reason)
	}
	bad = c
	bad.Graph = nil
	if r := (Runner{Backend: refStub, ArtifactsDir: t.TempDir()}).Run(bad); r.Verdict != VerdictError || r.Replay != "" {
		t.Errorf("nil graph: %s, replay %q", r.Verdict, r.Replay)
	}
	if r := RunCase(c, nil); r.Verdict != VerdictError {
		t.Errorf("nil backend: %s", r.Verdict)
	}
}

func TestRunCaseDigestMode(t *testing.T) {
	c := testCase(t)
	first := RunCase(c, refStub)
	c.ExpectDigests = []string{first.Outputs[0].Digest}
	if r := RunCase(c, refStub); r.Verdict != VerdictPass || r.Outputs[0].Check.Mode != ModeDigest || r.Timing.RefMS != 0 {
		t.Errorf("same bits: %s %s", r.Verdict, r.Reason)
	}
	c.ExpectDigests = []string{strings.Repeat("0", 64)}
	if r := RunCase(c, refStub); r.Verdict != VerdictFail || r.ErrorCode != string(errs.Nondeterministic) {
		t.Errorf("other bits: %s %s %s", r.Verdict, r.ErrorCode, r.Reason)
	}
}

func TestRunCaseReplayDirUnwritable(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	r := Runner{Backend: zeroStub, ArtifactsDir: filepath.Join(file, "sub")}.Run(testCase(t))
	if r.Verdict != VerdictFail || r.Replay != "" || !strings.Contains(r.Reason, "replay manifest not written") {
		t.Errorf("unwritable artifacts dir: %s %q %s", r.Verdict, r.Replay, r.Reason)
	}
}
