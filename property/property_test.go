package property

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/tessera-qa/tessera-qa/engine/backend"
	_ "github.com/tessera-qa/tessera-qa/engine/backend/cpu"
	"github.com/tessera-qa/tessera-qa/engine/compiler"
	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
	"github.com/tessera-qa/tessera-qa/harness"
)

func cpu(t testing.TB) backend.Backend {
	t.Helper()
	b, err := backend.Get("cpu")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// The suite runs every property in full; here each gets a few cases, so that a property that
// cannot hold on a correct engine is caught by `go test ./property` already.
func TestEveryPropertyHoldsOnTheCPU(t *testing.T) {
	for _, p := range All() {
		t.Run(p.Name, func(t *testing.T) {
			var tally Tally
			Check(t, p, Env{Backend: cpu(t), Config: SmallConfig(), Artifacts: t.TempDir()}, Options{Checks: 12, Seed: 1, Tally: &tally})
			if tally.Passed < 12 || tally.Failed != 0 {
				t.Errorf("tally %+v, want 12 passed", tally)
			}
		})
	}
}

// lastFlip is the planted bug: the CPU backend with the last element of every output flipped
// far out of any tolerance (a high exponent bit; the low bit of a bool).
type lastFlip struct{ backend.Backend }

func (lastFlip) Name() string { return "lastflip" }

func (f lastFlip) Run(p *compiler.Program, in map[string]*tensor.Tensor) ([]*tensor.Tensor, error) {
	outs, err := f.Backend.Run(p, in)
	for _, o := range outs {
		if n := o.Len(); n > 0 {
			b := o.Bits(n - 1)
			if o.DType == numerics.Bool {
				b ^= 1
			} else {
				b ^= 1 << (8*o.DType.Size() - 2)
			}
			o.SetBits(n-1, b)
		}
	}
	return outs, err
}

// The suite must catch a wrong result, shrink it to a small graph and leave a replay manifest
// and a rapid fail file that reproduce it.
func TestAPlantedBugIsCaughtAndShrunk(t *testing.T) {
	t.Chdir(t.TempDir()) // rapid writes testdata/rapid/ into the working directory
	dir := t.TempDir()
	p, _ := Select([]string{"agree/ref"})
	// Random cases from the first draw: an edge case (edges.go) shrinks within its own draws
	// only (TestAnEdgeCaseFailureShrinksWithinItsPattern).
	out := Run(RunOptions{Properties: p, Backends: []backend.Backend{lastFlip{cpu(t)}}, Config: DefaultConfig(),
		Checks: 50, Seed: 3, Artifacts: dir, NoEdges: true})
	if len(out) != 1 {
		t.Fatalf("%d outcomes", len(out))
	}
	o := out[0]
	if o.Verdict != Fail || o.Failed != 1 {
		t.Fatalf("verdict %s, failed %d: the planted bug was not caught", o.Verdict, o.Failed)
	}
	if !strings.Contains(o.Reason, "out of tolerance") && !strings.Contains(o.Reason, "NaN/Inf") {
		t.Errorf("reason %q does not say what was wrong", o.Reason)
	}
	if o.FailFile == "" || !strings.HasPrefix(o.FailFile, dir) {
		t.Errorf("fail file %q not adopted into %s", o.FailFile, dir)
	}
	if _, err := os.Stat("testdata"); !os.IsNotExist(err) {
		t.Errorf("rapid's testdata/ left in the working directory")
	}
	m, err := harness.LoadManifest(o.Replay)
	if err != nil {
		t.Fatalf("manifest %q: %v", o.Replay, err)
	}
	c, err := m.BuildCase()
	if err != nil {
		t.Fatal(err)
	}
	if n, elems := len(c.Graph.Nodes), c.Graph.Outputs[0].Type.NumElems(); n > 2 || elems > 4 {
		t.Errorf("shrunk to %d nodes, %d output elements:\n%s", n, elems, m.Graph)
	}
	t.Logf("shrunk to:\n%s", m.Graph)
	if r := harness.RunCase(c, lastFlip{cpu(t)}); r.Verdict != harness.VerdictFail {
		t.Errorf("the manifest does not reproduce the failure: %s %s", r.Verdict, r.Reason)
	}
	if r := harness.RunCase(c, cpu(t)); r.Verdict != harness.VerdictPass {
		t.Errorf("the minimal case fails on the real CPU backend too: %s", r.Reason)
	}
	// The fail file replays the minimal case first.
	again := Run(RunOptions{Properties: p, Backends: []backend.Backend{lastFlip{cpu(t)}}, Config: DefaultConfig(),
		Checks: 50, Seed: 99, Artifacts: t.TempDir(), FailFile: o.FailFile})
	if again[0].Verdict != Fail || again[0].Passed != 0 {
		t.Errorf("replaying the fail file: %+v, want a failure before any pass", again[0])
	}
}

// A backend that answers differently on every other run breaks determinism/bitwise.
type flaky struct {
	backend.Backend
	n *int
}

func (flaky) Name() string { return "flaky" }

func (f flaky) Run(p *compiler.Program, in map[string]*tensor.Tensor) ([]*tensor.Tensor, error) {
	outs, err := f.Backend.Run(p, in)
	if *f.n++; *f.n%2 == 0 && len(outs) > 0 && outs[0].Len() > 0 {
		outs[0].SetBits(0, outs[0].Bits(0)^1)
	}
	return outs, err
}

func TestNondeterminismIsCaught(t *testing.T) {
	t.Chdir(t.TempDir())
	p, _ := Select([]string{"determinism/bitwise"})
	out := Run(RunOptions{Properties: p, Backends: []backend.Backend{flaky{cpu(t), new(int)}}, Config: SmallConfig(),
		Checks: 20, Seed: 5, Artifacts: t.TempDir()})
	if out[0].Verdict != Fail || !strings.Contains(out[0].Reason, "digest") {
		t.Fatalf("%+v: want a digest failure", out[0])
	}
	m, err := harness.LoadManifest(out[0].Replay)
	if err != nil || m.Kind != harness.KindDigest {
		t.Fatalf("manifest %q (kind %q): %v", out[0].Replay, m.Kind, err)
	}
}

type unavailable struct{ backend.Backend }

func (unavailable) Name() string     { return "nodev" }
func (unavailable) Available() error { return os.ErrNotExist }

func TestRunSkipsUnavailableBackendsAndNamesSeeds(t *testing.T) {
	p, _ := Select([]string{"meta/cast-round-trip"})
	out := Run(RunOptions{Properties: p, Backends: []backend.Backend{cpu(t), unavailable{cpu(t)}}, Config: SmallConfig(),
		Checks: 5, Seed: 11, Artifacts: filepath.Join(t.TempDir(), "a")})
	if len(out) != 2 || out[0].Verdict != Pass || out[1].Verdict != Skip {
		t.Fatalf("outcomes %+v: want pass on cpu, skip on nodev", out)
	}
	if out[0].Checks != 5 || out[0].Seed != PropertySeed(11, "meta/cast-round-trip", "cpu") {
		t.Errorf("outcome %+v: want 5 checks under the derived seed", out[0])
	}
}

// A seed fixes the whole run: the same seed draws the same graphs with the same inputs.
func TestAFixedSeedReproducesARun(t *testing.T) {
	draws := func(seed uint64) []string {
		var seen []string
		p := Property{Name: "test/record", Checks: 15, Body: func(e Env) func(*rapid.T) {
			gen := Cases(e.Config)
			return func(t *rapid.T) {
				c := gen.Draw(t, "case")
				d := graph.Print(c.Graph)
				for _, v := range c.Graph.Inputs {
					d += c.Inputs[v.Name].Digest()
				}
				seen = append(seen, d)
			}
		}}
		Check(t, p, Env{Backend: cpu(t), Config: SmallConfig()}, Options{Seed: seed})
		return seen
	}
	a, b, c := draws(77), draws(77), draws(78)
	if len(a) != 15 || !slices.Equal(a, b) {
		t.Fatalf("two runs with seed 77 drew different cases (%d and %d)", len(a), len(b))
	}
	if slices.Equal(a, c) {
		t.Fatal("seeds 77 and 78 drew the same cases")
	}
}

// panicTB ends a failing check by panicking, as GinkgoT() does inside a spec.
type panicTB struct{ *Recorder }

func (p panicTB) FailNow()                          { p.Recorder.Fail(); panic("spec failed") }
func (p panicTB) Fatal(args ...any)                 { p.Recorder.Error(args...); p.FailNow() }
func (p panicTB) Fatalf(format string, args ...any) { p.Recorder.Errorf(format, args...); p.FailNow() }

// Issue 13: a failing property run under `go test` (the suite's working directory is the
// package's source folder) must leave nothing in the checkout: rapid's fail file moves into
// the run's artifacts, also when the failure ends the spec with a panic.
func TestAFailingCheckLeavesNothingInTheCheckout(t *testing.T) {
	checkout := t.TempDir()
	t.Chdir(checkout)
	dir := t.TempDir()
	p, _ := Select([]string{"agree/ref"})
	var tally Tally
	func() {
		defer func() { _ = recover() }()
		Check(panicTB{NewRecorder("properties on cpu agree/ref (tolerance)")}, p[0],
			Env{Backend: lastFlip{cpu(t)}, Config: SmallConfig(), Artifacts: dir}, Options{Checks: 20, Seed: 5, Tally: &tally})
	}()
	if tally.Failed != 1 {
		t.Fatalf("tally %+v: the planted bug was not caught", tally)
	}
	left, _ := os.ReadDir(checkout)
	for _, e := range left {
		t.Errorf("left in the checkout: %s", e.Name())
	}
	if !strings.HasPrefix(tally.FailFile, filepath.Join(dir, "rapid")+string(filepath.Separator)) {
		t.Errorf("fail file %q, want it under %s/rapid", tally.FailFile, dir)
	} else if _, err := os.Stat(tally.FailFile); err != nil {
		t.Error(err)
	}
}

// A bug every output shows fails the first edge case (edges.go), which shrinks within its
// pattern: one row, one element past the tile.
func TestAnEdgeCaseFailureShrinksWithinItsPattern(t *testing.T) {
	t.Chdir(t.TempDir())
	p, _ := Select([]string{"agree/ref"})
	out := Run(RunOptions{Properties: p, Backends: []backend.Backend{lastFlip{cpu(t)}}, Config: DefaultConfig(),
		Checks: 50, Seed: 3, Artifacts: t.TempDir()})
	o := out[0]
	if o.Verdict != Fail || o.Passed != 0 {
		t.Fatalf("verdict %s after %d passes: the first edge case must fail", o.Verdict, o.Passed)
	}
	m, err := harness.LoadManifest(o.Replay)
	if err != nil {
		t.Fatal(err)
	}
	c, err := m.BuildCase()
	if err != nil {
		t.Fatal(err)
	}
	first := EdgeSchedule(false)[0]
	x := c.Graph.Inputs[0].Type.Shape
	if c.Graph.Nodes[0].Op != first.Op || len(x) != 2 || x[0] != 1 || x[1] != first.Width+1 {
		t.Errorf("shrunk to %s of %v, want %s of [1 %d]:\n%s", c.Graph.Nodes[0].Op, x, first.Op, first.Width+1, m.Graph)
	}
}
