// Package rewrite is a catalogue of graphs for each graph rewrite of the compiler
// (canonicalize, fuse-attention, fuse-elementwise): graphs each rewrite must apply to, and
// near misses it must not touch because one of its conditions fails (a transpose flag, an
// axis, a dtype, an accumulator, a second reader, a graph output, a broadcast shape). Each
// entry is checked structurally, on the compiler's dump after the pass, and numerically: the
// program with the rewrite against the program without it (bit for bit where the rewrite must
// not change bits, within tolerance for attention fusion, which keeps probabilities in the
// accumulator dtype), and against engine/ref. suites/rewrite runs them; a pattern matcher
// that forgets one condition rewrites its near miss and fails the structural check at least.
package rewrite

import (
	"bytes"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/tessera-qa/tessera-qa/engine/backend"
	"github.com/tessera-qa/tessera-qa/engine/compiler"
	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
	"github.com/tessera-qa/tessera-qa/harness"
)

// Pass names, as the compiler's pass table spells them.
const (
	Canonicalize    = "canonicalize"
	FuseAttention   = "fuse-attention"
	FuseElementwise = "fuse-elementwise"
	GemmOperands    = "gemm-operands"
	SplitLoss       = "split-loss"
	ConvFFT         = "conv-fft"
)

// convFFTTol is the conv-fft entries' tolerance on normal(0,1) inputs: the FFT form's error
// is about u*log2(n)*||x line||*||w line|| per output, up to 2^-24*11.2*sqrt(2304*255) ~ 5.1e-4
// for the 1-D match; atol 2e-3 leaves room, and an output shifted by one position (the
// planted crop fault) is off by O(10).
var convFFTTol = harness.Tolerance{RTol: 1e-4, ATol: 2e-3}

// Entry is one graph for one rewrite.
type Entry struct {
	Name string // pass/what, e.g. fuse-attention/near-miss/no-transpose-b
	Pass string
	// Rewrite says whether the pass must change the graph (a match) or leave it (a near miss).
	Rewrite bool
	// Condition names the matcher condition a near miss fails (documentation and reports).
	Condition string
	Build     func(b *graph.Builder)
	// Expect judges the dump after Pass: nil when the structure is what Rewrite says.
	Expect func(dump string) error
	// Bitwise: the rewritten and the unrewritten program must agree bit for bit.
	Bitwise bool
	// Tol, when set, replaces the default tolerance of both comparisons (the FFT rewrite's).
	Tol *harness.Tolerance
	// Dists overrides input distributions (positive inputs for log, ...).
	Dists map[string]harness.Dist
}

// Graph builds the entry's graph.
func (e Entry) Graph() (*graph.Graph, error) {
	b := graph.NewBuilder(nonIdent.ReplaceAllString(e.Name, "_"))
	e.Build(b)
	return b.Build()
}

// Dump compiles g and returns the dump after the entry's pass.
func (e Entry) Dump(g *graph.Graph) (string, error) {
	var buf bytes.Buffer
	if _, err := compiler.Compile(g, compiler.Options{Dump: &buf, DumpAfter: []string{e.Pass}}); err != nil {
		return "", err
	}
	return buf.String(), nil
}

// CheckStructure compiles the entry's graph and judges the dump after its pass.
func (e Entry) CheckStructure() error {
	g, err := e.Graph()
	if err != nil {
		return err
	}
	dump, err := e.Dump(g)
	if err != nil {
		return err
	}
	if err := e.Expect(dump); err != nil {
		return fmt.Errorf("%s (%s): %v\n--- dump after %s\n%s", e.Name, e.Condition, err, e.Pass, dump)
	}
	return nil
}

// unrewritten is the graph compiled without the entry's rewrite: canonicalize and
// fuse-attention are skipped; for fuse-elementwise (a required pass) every node's output
// becomes a graph output too, which no fusion may swallow, and the original outputs are
// compared.
func (e Entry) unrewritten(g *graph.Graph) (*graph.Graph, compiler.Options) {
	if e.Pass != FuseElementwise {
		return g, compiler.Options{Skip: []string{e.Pass}}
	}
	u := g.Clone()
	for _, n := range u.Nodes {
		if !slices.Contains(u.Outputs, n.Output) {
			u.Outputs = append(u.Outputs, n.Output)
		}
	}
	return u, compiler.Options{}
}

// CheckNumbers runs the entry's graph on b with and without the rewrite and against engine/ref.
func (e Entry) CheckNumbers(b backend.Backend, seed uint64) error {
	g, err := e.Graph()
	if err != nil {
		return err
	}
	in, err := harness.RandomInputs(g, seed, e.Dists)
	if err != nil {
		return err
	}
	// The magnitude guard is off: a small random graph may legitimately give an all-zero
	// output (relu of negatives), and the comparison that matters is the one below.
	var tols []harness.Tolerance
	for _, v := range g.Outputs {
		t := harness.DefaultTolerance(v.Type.DType)
		if e.Tol != nil {
			t = *e.Tol
		}
		tols = append(tols, t.NoGuard())
	}
	r := harness.Runner{Backend: b}.Run(harness.Case{Suite: "rewrite", Name: e.Name, Graph: g, Inputs: in, Tolerances: tols})
	if r.Verdict != harness.VerdictPass {
		return fmt.Errorf("%s: against engine/ref on %s: %s %s", e.Name, b.Name(), r.Verdict, r.Reason)
	}
	with, err := run(b, g, compiler.Options{}, in)
	if err != nil {
		return fmt.Errorf("%s: with %s: %v", e.Name, e.Pass, err)
	}
	ug, opts := e.unrewritten(g)
	without, err := run(b, ug, opts, in)
	if err != nil {
		return fmt.Errorf("%s: without %s: %v", e.Name, e.Pass, err)
	}
	for i, v := range g.Outputs {
		tol := harness.DefaultTolerance(v.Type.DType)
		if e.Bitwise {
			tol = harness.Tolerance{}
		} else if e.Tol != nil {
			tol = *e.Tol
		}
		if c := harness.Check(with[i], without[i], tol); !c.Pass {
			return fmt.Errorf("%s: output %%%s with %s vs without: %s", e.Name, v.Name, e.Pass, c.Reason)
		}
	}
	return nil
}

func run(b backend.Backend, g *graph.Graph, opts compiler.Options, in map[string]*tensor.Tensor) ([]*tensor.Tensor, error) {
	p, err := compiler.Compile(g, opts)
	if err != nil {
		return nil, err
	}
	cp := map[string]*tensor.Tensor{}
	for k, v := range in {
		cp[k] = v.Clone()
	}
	return b.Run(p, cp)
}

var nonIdent = regexp.MustCompile(`[^A-Za-z0-9_]`)

// ---- structural expectations over dumps ----

// nodeRE matches a node line of a graph dump: "%name: type = op(...".
var nodeRE = regexp.MustCompile(`(?m)^\s*%([A-Za-z0-9_.]+)(?::[^=]*)? = ([a-z_0-9]+)\(`)

// ops maps node names to ops in a graph dump.
func ops(dump string) map[string]string {
	out := map[string]string{}
	for _, m := range nodeRE.FindAllStringSubmatch(dump, -1) {
		out[m[1]] = m[2]
	}
	return out
}

// hasNode: the graph after the pass still computes %name with op.
func hasNode(name, op string) func(string) error {
	return func(dump string) error {
		if got := ops(dump)[name]; got != op {
			return fmt.Errorf("%%%s should still be %s after the pass, is %q", name, op, got)
		}
		return nil
	}
}

// noNode: %name is gone (the rewrite removed or replaced it).
func noNode(name string) func(string) error {
	return func(dump string) error {
		if got, ok := ops(dump)[name]; ok {
			return fmt.Errorf("%%%s (%s) should be gone after the pass", name, got)
		}
		return nil
	}
}

// opCount: exactly n nodes compute op.
func opCount(op string, n int) func(string) error {
	return func(dump string) error {
		k := 0
		for _, o := range ops(dump) {
			if o == op {
				k++
			}
		}
		if k != n {
			return fmt.Errorf("%d %s nodes after the pass, want %d", k, op, n)
		}
		return nil
	}
}

// outputs: the graph's output line names exactly these values.
func outputs(names ...string) func(string) error {
	return func(dump string) error {
		want := "output %" + strings.Join(names, ", %")
		for _, l := range strings.Split(dump, "\n") {
			if strings.TrimSpace(l) == want {
				return nil
			}
		}
		return fmt.Errorf("the outputs should stay %q", want)
	}
}

var groupRE = regexp.MustCompile(`(?m)^group (\d+):(.*)$`)

// groups maps each node name to its kernel group in a fuse-elementwise dump.
func groups(dump string) map[string]string {
	out := map[string]string{}
	for _, m := range groupRE.FindAllStringSubmatch(dump, -1) {
		for _, f := range strings.Fields(m[2]) {
			name, _, _ := strings.Cut(strings.TrimPrefix(f, "%"), "=")
			out[name] = m[1]
		}
	}
	return out
}

// fused: the named nodes form one kernel.
func fused(names ...string) func(string) error {
	return func(dump string) error {
		g := groups(dump)
		for _, n := range names[1:] {
			if g[n] == "" || g[n] != g[names[0]] {
				return fmt.Errorf("%%%s and %%%s should be one kernel (groups %q and %q)", names[0], n, g[names[0]], g[n])
			}
		}
		return nil
	}
}

// apart: the two nodes are in different kernels.
func apart(a, b string) func(string) error {
	return func(dump string) error {
		g := groups(dump)
		if g[a] == "" || g[a] == g[b] {
			return fmt.Errorf("%%%s and %%%s must not be fused (groups %q and %q)", a, b, g[a], g[b])
		}
		return nil
	}
}

func all(fs ...func(string) error) func(string) error {
	return func(dump string) error {
		for _, f := range fs {
			if err := f(dump); err != nil {
				return err
			}
		}
		return nil
	}
}

var f32, f16, bf16 = numerics.F32, numerics.F16, numerics.BF16
