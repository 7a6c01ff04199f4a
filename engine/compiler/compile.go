// Package compiler lowers a Graph IR graph to a Program: graph rewrites (canonicalize,
// attention fusion, elementwise fusion), then a Schedule IR (tile shapes, loop order) per
// kernel, then Tile IR. The pipeline is one table; the driver verifies the IR between passes,
// times them and dumps after any of them.
package compiler

import (
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/dist/mesh"
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/graph"
)

// Options tune one compilation.
type Options struct {
	// Configs overrides schedules by kernel key (Schedule.Key); the autotuner fills it.
	Configs map[string]Schedule
	// Dump receives the IR after each pass named in DumpAfter ("all" for every pass).
	Dump      io.Writer
	DumpAfter []string
	// Passes lists passes to skip by name (only those not marked required), e.g. to compare a
	// fused and an unfused program.
	Skip []string
	// ForceConvFFT makes conv-fft take every conv it can rewrite, whatever its cost model
	// says, so that a benchmark can time both forms of one conv (Skip gives the direct one).
	ForceConvFFT bool
	// Mesh, when set, makes the "shard" pass turn the graph into one rank's SPMD program over
	// the mesh (CompileDist); Layouts gives input layouts by input name (absent: replicated).
	Mesh    *mesh.Mesh
	Layouts map[string]mesh.Layout
	// Profile makes the driver time every pass and record which rewrites changed which nodes
	// (Program.Log); off, the driver does neither.
	Profile bool
}

// state is what passes transform. Graph passes rewrite g; "fuse-elementwise" forms groups;
// "schedule" fills schedules; "lower" builds the program.
type state struct {
	opts   Options
	g      *graph.Graph
	groups []*group
	prog   *Program
	plan   *DistPlan   // set by the shard pass when compiling for a mesh
	log    *CompileLog // Options.Profile
}

type pass struct {
	name     string
	fn       func(*state) error
	required bool
	level    string // what a dump after this pass prints: graph, groups, schedule, tile
}

// passes is the pipeline, in order.
var passes = [...]pass{
	{name: "verify", fn: func(s *state) error { return graph.Verify(s.g) }, required: true, level: "graph"},
	// conv-fft runs first, on the convs as written (padding still an attribute); the FFT
	// forms it emits are then desugared like any others.
	{name: "conv-fft", fn: convFFT, level: "graph"},
	{name: "desugar", fn: desugar, required: true, level: "graph"},
	{name: "canonicalize", fn: canonicalize, level: "graph"},
	{name: "fuse-attention", fn: fuseAttention, level: "graph"},
	{name: "dce", fn: deadCode, level: "graph"},
	{name: "shard", fn: shard, level: "dist"},
	{name: "gemm-operands", fn: gemmOperands, level: "graph"},
	{name: "split-loss", fn: splitLoss, level: "graph"},
	{name: "fuse-elementwise", fn: fuseElementwise, required: true, level: "groups"},
	{name: "schedule", fn: schedule, required: true, level: "schedule"},
	{name: "lower", fn: lower, required: true, level: "tile"},
	{name: "verify-tile", fn: verifyTile, required: true, level: "tile"},
}

// PassNames lists the pipeline's passes in order.
func PassNames() []string {
	out := make([]string, len(passes))
	for i, p := range passes {
		out[i] = p.name
	}
	return out
}

// Compile runs the pass pipeline on a copy of g. A graph for a mesh compiles with CompileDist.
func Compile(g *graph.Graph, opts Options) (p *Program, err error) {
	if opts.Mesh != nil {
		return nil, errs.New(errs.Input, "graph %s: compiling for mesh %s gives every rank a program with collectives between kernels: use CompileDist", g.Name, opts.Mesh)
	}
	for _, n := range g.Nodes {
		if graph.IsCollective(n.Op) {
			return nil, errs.New(errs.Input, "graph %s: node %%%s is a collective (%s), which runs between kernels: use CompileDist", g.Name, n.Output.Name, n.Op)
		}
	}
	s, err := runPasses(g, opts, false)
	if err != nil {
		return nil, err
	}
	return s.prog, nil
}

// runPasses runs the pass table on a copy of g; with graphOnly it stops at the first pass below
// the graph level (CompileDist lowers each segment between collectives on its own).
func runPasses(g *graph.Graph, opts Options, graphOnly bool) (*state, error) {
	for _, name := range opts.Skip {
		i := slices.IndexFunc(passes[:], func(p pass) bool { return p.name == name })
		if i < 0 {
			return nil, errs.New(errs.Input, "no compiler pass %q (have %v)", name, PassNames())
		}
		if passes[i].required {
			return nil, errs.New(errs.Input, "compiler pass %q is required and cannot be skipped", name)
		}
	}
	s := &state{opts: opts, g: g.Clone()}
	if opts.Profile {
		s.log = &CompileLog{}
	}
	for _, ps := range passes {
		if graphOnly && ps.level != "graph" && ps.level != "dist" {
			break
		}
		if slices.Contains(opts.Skip, ps.name) {
			continue
		}
		var before []nodeSig
		var start time.Time
		if s.log != nil {
			before, start = nodeSigs(s.g), time.Now()
		}
		if err := runPass(ps, s); err != nil {
			return nil, err
		}
		if s.log != nil {
			s.log.Passes = append(s.log.Passes, PassTime{Name: ps.name, Dur: time.Since(start)})
			s.log.Rewrites = append(s.log.Rewrites, rewritesOf(ps, before, s)...)
		}
		if s.g != nil && ps.level == "graph" && ps.name != "verify" {
			if err := graph.Verify(s.g); err != nil {
				return nil, errs.Wrap(errs.Internal, err, "graph invalid after pass %s", ps.name)
			}
		}
		if opts.Dump != nil && (slices.Contains(opts.DumpAfter, ps.name) || slices.Contains(opts.DumpAfter, "all")) {
			fmt.Fprintf(opts.Dump, "// ----- after %s (%s) -----\n%s\n", ps.name, ps.level, s.format(ps.level))
		}
	}
	return s, nil
}

// runPass turns a panic inside a pass into a coded error naming the pass and graph, so a
// compiler bug never takes the process down.
func runPass(ps pass, s *state) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = errs.New(errs.Internal, "panic during %s while compiling %s: %v", ps.name, s.g.Name, r)
		}
	}()
	err = ps.fn(s)
	if err != nil && errs.CodeOf(err) == errs.Internal {
		return errs.Wrap(errs.Internal, err, "pass %s", ps.name)
	}
	return err
}

func (s *state) format(level string) string {
	switch level {
	case "graph":
		return graph.Print(s.g)
	case "dist":
		if s.plan == nil {
			return graph.Print(s.g)
		}
		return FormatDist(s.plan, s.g)
	case "groups":
		return formatGroups(s.groups)
	case "schedule":
		return FormatSchedules(schedulesOf(s.groups))
	case "tile":
		if s.prog == nil {
			return ""
		}
		return FormatTile(s.prog)
	}
	return ""
}
