// Package cases is what runs under compute-sanitizer (package sanitizer): a few golden
// catalogue cases for every code path of the PTX generator, and dedicated graphs with ragged
// edges (no dimension a multiple of any tile) for the paths the catalogue's shapes miss, each
// judged against the golden model (engine/ref) so that a wrong result under a tool is seen
// too. The set is a pure function of the catalogue and this file, so a parent and the child
// it starts agree on it by name.
package cases

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/backend"
	"github.com/tessera-qa/tessera-qa/engine/compiler"
	"github.com/tessera-qa/tessera-qa/engine/compiler/ptx"
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/golden"
	"github.com/tessera-qa/tessera-qa/harness"
	"github.com/tessera-qa/tessera-qa/sanitizer"
)

// Case is one graph to run under the tools, with the generator paths its kernels take.
type Case struct {
	Name  string
	Case  harness.Case
	Paths []string // Path keys of its kernels (see PathKey), in kernel order
	// Golden is the stored golden case of a catalogue case: it is judged as the golden suite
	// judges it (golden.CheckSpec, with the accumulator bound of fp8 scaled_matmul on cuda),
	// since the elementwise tolerance alone fails the H200's fp8 promotion (seen 2026-12-02:
	// scaled_matmul/fp8e4m3/33x48x64-f32-range, 930 of 1584 elements under every tool).
	Golden *golden.GoldenCase
}

// Target is the generator target the CUDA backend picks on an H100/H200 (sm_90a).
func Target() ptx.Target {
	t := ptx.H100
	t.ArchSuffix = "a"
	return t
}

// PathKey names a module's code path: ptx.Module.Path, with the dedicated tensor-core kernels
// told apart by what they compute (a GEMM's tile has three dims, attention's two).
func PathKey(m *ptx.Module) string {
	if m.Tile == "" || (m.Path != "wgmma" && m.Path != "mma.sync") {
		return m.Path
	}
	f := strings.Fields(m.Tile)
	if len(f) < 2 {
		return m.Path
	}
	kind := "gemm"
	if strings.Count(f[1], "x") == 1 {
		kind = "attention"
	}
	if strings.Contains(m.Tile, "e4m3") {
		kind += "-e4m3"
	}
	return m.Path + "/" + kind
}

// Paths compiles g and returns the path key of each kernel for the target.
func Paths(g *graph.Graph, t ptx.Target) ([]string, error) {
	p, err := compiler.Compile(g, compiler.Options{})
	if err != nil {
		return nil, err
	}
	var keys []string
	for _, k := range p.Kernels {
		m, err := ptx.Generate(k, t)
		if err != nil {
			return nil, err
		}
		keys = append(keys, PathKey(m))
	}
	return keys, nil
}

// Every path key the generator has; Select must cover each one (its unit test says so).
// On sm_90a the dedicated GEMM and attention kernels take wgmma; "mma.sync" is the SIMT
// generator's tensor-core MMA (no Tile).
var AllPaths = []string{"simt", "simt-stream", "simt-rows", "simt-reduce", "simt-transpose", "mma.sync",
	"wgmma/attention", "wgmma/gemm", "wgmma/gemm-e4m3"}

// Dedicated graphs with ragged edges for what the catalogue's shapes leave out: the GEMM on
// the wgmma path with M, N, K none a multiple of its 128x256x64 tile, a transpose through
// shared memory (68x132: its 64x64 tiles leave a ragged row and column of tiles; both
// dims stay multiples of the 16-byte vector, which the lowering needs), and an
// elementwise op of 91 elements on the grid-stride path. The matmul's tolerance: bf16 output
// (one rounding of an f32 sum of 200 products against engine/ref's exact one: at most a
// bf16 ulp apart, 2^-8 relative) with an absolute allowance of 1e-2 against outputs of RMS
// about sqrt(200) for sums that cancel near zero; the transpose moves bits (bitwise).
func dedicated() []harness.Case {
	type spec struct {
		name  string
		tol   []harness.Tolerance
		build func(b *graph.Builder)
	}
	specs := []spec{
		{"ragged/matmul/bf16/130x200x72", []harness.Tolerance{{RTol: 1.6e-2, ATol: 1e-2}}, func(b *graph.Builder) {
			b.Output(b.Op("matmul", nil, b.Input("a", numerics.BF16, 130, 200), b.Input("b", numerics.BF16, 200, 72)))
		}},
		{"ragged/transpose/f32/68x132", []harness.Tolerance{harness.Bitwise()}, func(b *graph.Builder) {
			b.Output(b.Op("transpose", graph.Attrs{"perm": graph.Ints(1, 0)}, b.Input("x", numerics.F32, 68, 132)))
		}},
		{"ragged/exp/f32/7x13", nil, func(b *graph.Builder) {
			b.Output(b.Op("exp", nil, b.Input("x", numerics.F32, 7, 13)))
		}},
	}
	var cs []harness.Case
	for _, s := range specs {
		b := graph.NewBuilder(strings.NewReplacer("/", "_", "-", "_").Replace(s.name))
		s.build(b)
		g, err := b.Build()
		if err != nil {
			panic(fmt.Sprintf("sanitizer/cases: %s: %v", s.name, err)) // a fixed graph of this file: a bug here
		}
		seed := golden.SeedOf(s.name)
		inputs, err := harness.RandomInputs(g, seed, nil)
		if err != nil {
			panic(fmt.Sprintf("sanitizer/cases: %s inputs: %v", s.name, err))
		}
		cs = append(cs, harness.Case{Suite: "sanitizer", Name: s.name, Graph: g, Inputs: inputs, Seed: seed, Tolerances: s.tol})
	}
	return cs
}

// Select returns the case set: the dedicated graphs, then for every path key the first
// perPath single-device catalogue cases (catalogue order) whose kernels take it and whose
// shape is ragged (an odd dimension). Cases are listed once, however many paths they cover.
func Select(perPath int) ([]Case, error) {
	t := Target()
	var out []Case
	taken := map[string]int{}
	add := func(name string, hc harness.Case) error {
		keys, err := Paths(hc.Graph, t)
		if err != nil {
			return errs.Wrap(errs.CodeOf(err), err, "sanitizer case %s", name)
		}
		out = append(out, Case{Name: name, Case: hc, Paths: keys})
		for _, k := range uniq(keys) {
			taken[k]++
		}
		return nil
	}
	for _, hc := range dedicated() {
		if err := add(hc.Name, hc); err != nil {
			return nil, err
		}
	}
	for _, s := range golden.Catalogue() {
		if s.World() > 0 || s.Empty || !ragged(s) {
			continue
		}
		keys, err := Paths(s.Graph, t)
		if err != nil {
			continue // a case the GPU generator refuses is the GPU golden specs' business
		}
		need := false
		for _, k := range keys {
			if taken[k] < perPath {
				need = true
			}
		}
		if !need {
			continue
		}
		c := s.Case()
		c.Suite = "sanitizer"
		gc, err := storedCase(s)
		if err != nil {
			return nil, err
		}
		out = append(out, Case{Name: s.Name, Case: c, Paths: keys, Golden: gc})
		for _, k := range uniq(keys) {
			taken[k]++
		}
	}
	return out, nil
}

// storedCase finds spec s in its golden file (embedded in the binary).
func storedCase(s golden.Spec) (*golden.GoldenCase, error) {
	f, err := golden.Load(golden.Data(), s.Op, s.DType)
	if err != nil {
		return nil, errs.Wrap(errs.CodeOf(err), err, "sanitizer case %s: golden file", s.Name)
	}
	for i := range f.Cases {
		if f.Cases[i].Name == s.Name {
			return &f.Cases[i], nil
		}
	}
	return nil, errs.New(errs.Input, "sanitizer case %s: not in its golden file %s (run `tessera-qa golden update`)", s.Name, f.Path)
}

// ragged: some input has an odd dimension above 1, so no tile divides it.
func ragged(s golden.Spec) bool {
	for _, v := range s.Graph.Inputs {
		for _, d := range v.Type.Shape {
			if d > 1 && d%2 == 1 {
				return true
			}
		}
	}
	return false
}

func uniq(v []string) []string {
	s := slices.Clone(v)
	slices.Sort(s)
	return slices.Compact(s)
}

// Names lists the cases' names.
func Names(cs []Case) []string {
	var n []string
	for _, c := range cs {
		n = append(n, c.Name)
	}
	return n
}

// Run runs each case on b (against the golden model) and writes one case line per case to w
// (sanitizer.CaseLine), the child's side of the protocol. It returns how many were not a pass.
func Run(w io.Writer, cs []Case, b backend.Backend) int {
	bad := 0
	for _, c := range cs {
		var r harness.Result
		if c.Golden != nil {
			r = golden.CheckSpec(*c.Golden, b)
		} else {
			r = harness.RunCase(c.Case, b)
		}
		v := string(r.Verdict)
		if r.Verdict != harness.VerdictPass {
			bad++
		}
		fmt.Fprintln(w, sanitizer.CaseLine(v, c.Name, r.Reason))
	}
	return bad
}

// ChildEnv carries the case names (comma-separated) to a child process that runs them on
// the CUDA backend under a tool; PerPathEnv the Select argument both sides use (default 2).
const (
	ChildEnv   = "TESSERA_SANITIZER_CHILD"
	PerPathEnv = "TESSERA_SANITIZER_PER_PATH"
)

// PerPath reads PerPathEnv: a count from 1 to 8, default 2; anything else is E_INPUT.
func PerPath(getenv func(string) string) (int, error) {
	v := getenv(PerPathEnv)
	if v == "" {
		return 2, nil
	}
	n := 0
	if _, err := fmt.Sscanf(v, "%d", &n); err != nil || n < 1 || n > 8 || fmt.Sprint(n) != v {
		return 0, errs.New(errs.Input, "%s=%q: want a count of cases per path from 1 to 8", PerPathEnv, v)
	}
	return n, nil
}

// Lookup builds the cases named, in the order given, from the dedicated graphs and the
// catalogue by name alone: a child must not select again, since the paths a kernel takes
// change while a planted fault is on (the fast lowerings step aside), and so would the set.
// An unknown name is E_INPUT. Paths are left empty.
func Lookup(names []string) ([]Case, error) {
	by := map[string]Case{}
	for _, c := range dedicated() {
		by[c.Name] = Case{Name: c.Name, Case: c}
	}
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	for _, s := range golden.Catalogue() {
		if want[s.Name] && s.World() == 0 {
			c := s.Case()
			c.Suite = "sanitizer"
			gc, err := storedCase(s)
			if err != nil {
				return nil, err
			}
			by[s.Name] = Case{Name: s.Name, Case: c, Golden: gc}
		}
	}
	var out []Case
	for _, n := range names {
		c, ok := by[n]
		if !ok {
			return nil, errs.New(errs.Input, "sanitizer: no case named %q", n)
		}
		out = append(out, c)
	}
	return out, nil
}

// Child is the child's whole job: run the named cases (names as in ChildEnv) on b and write
// their case lines to w. It returns the process's exit code: 0 all passed, 1 a case did not,
// 2 bad names, 3 no device (the line says why).
func Child(w io.Writer, names string, b backend.Backend) int {
	cs, err := Lookup(strings.Split(names, ","))
	if err != nil {
		fmt.Fprintln(w, "tessera-sanitizer-child:", err)
		return 2
	}
	if err := b.Available(); err != nil {
		fmt.Fprintln(w, "tessera-sanitizer-child:", err)
		return 3
	}
	if Run(w, cs, b) > 0 {
		return 1
	}
	return 0
}

// OnPaths returns the names of the cases that take any of the paths given, in order: the
// planted faults' runs take only the cases whose kernels hold the fault.
func OnPaths(cs []Case, paths ...string) []string {
	var n []string
	for _, c := range cs {
		if slices.ContainsFunc(c.Paths, func(p string) bool { return slices.Contains(paths, p) }) {
			n = append(n, c.Name)
		}
	}
	return n
}

// BackendEnv names the backend the child runs on (default cuda); the plumbing's own tests
// run the child on cpu under a stand-in tool.
const BackendEnv = "TESSERA_SANITIZER_BACKEND"

// ChildBackend is the backend name a child takes.
func ChildBackend(getenv func(string) string) string {
	if b := getenv(BackendEnv); b != "" {
		return b
	}
	return "cuda"
}

// Check runs child (a command that runs Child when ChildEnv is set: a test binary that starts
// itself again) under the tool at path on the cases named, with the CUDA allocator's exact
// sizes and env added, for at most limit; it writes the tool's whole output to log (when not
// empty) and judges it.
func Check(ctx context.Context, path string, t sanitizer.Tool, child, names, env []string, limit time.Duration, log string) (sanitizer.ToolResult, error) {
	env = append(slices.Clone(env), ChildEnv+"="+strings.Join(names, ","), "TESSERA_CUDA_EXACT_ALLOC=1")
	r, err := sanitizer.Exec(ctx, path, t, child, env, limit)
	if err != nil {
		return sanitizer.ToolResult{}, err
	}
	if log != "" {
		if err := os.WriteFile(log, []byte(r.Output), 0o644); err != nil {
			return sanitizer.ToolResult{}, errs.New(errs.Internal, "sanitizer: writing %s: %v", log, err)
		}
	}
	res := sanitizer.Judge(r, names)
	res.Log = log
	return res, nil
}
