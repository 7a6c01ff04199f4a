package cli

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/tessera-qa/tessera-qa/engine/compiler"
	"github.com/tessera-qa/tessera-qa/engine/compiler/ptx"
	"github.com/tessera-qa/tessera-qa/engine/compiler/ptx/ptxas"
	"github.com/tessera-qa/tessera-qa/engine/dist/mesh"
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/graph"
)

// compileJSON is the shape of `compile --json` (docs/cli.md).
type compileJSON struct {
	Graph        string         `json:"graph"`
	ScheduleHash string         `json:"schedule_hash"`
	Kernels      int            `json:"kernels"`
	Schedules    []scheduleJSON `json:"schedules"`
	Ptxas        []ptxasJSON    `json:"ptxas,omitempty"` // --target ptxas
}

// ptxasJSON is what NVIDIA's assembler reports for one kernel (--target ptxas).
type ptxasJSON struct {
	Kernel      string  `json:"kernel"`
	Path        string  `json:"path"`
	PTXBytes    int     `json:"ptx_bytes"`
	Registers   int     `json:"registers"`
	StackBytes  int     `json:"stack_bytes"`
	SpillStores int     `json:"spill_stores"`
	SpillLoads  int     `json:"spill_loads"`
	Routines    int     `json:"routines"` // .func routines the kernel calls
	MS          float64 `json:"ms"`
	Release     string  `json:"ptxas"`
}

type scheduleJSON struct {
	Kernel    string `json:"kernel"`
	Key       string `json:"key"`
	Kind      string `json:"kind"`
	BM        int    `json:"bm"`
	BN        int    `json:"bn"`
	BK        int    `json:"bk"`
	Stages    int    `json:"stages"`
	LoopOrder string `json:"loop_order"`
	Source    string `json:"source"`
}

// dumpViews maps the short --dump names to the pass after which the compiler prints that
// view: the graph after the last graph rewrite, the schedules, the verified Tile IR.
var dumpViews = map[string]string{"graph": "dce", "dist": "shard", "groups": "fuse-elementwise", "schedule": "schedule", "tile": "verify-tile"}

func newCompileCmd(e *env) *cobra.Command {
	var jsonPath string
	var dump []string
	var target, arch string
	var meshSpec string
	var layoutSpecs []string
	cmd := &cobra.Command{
		Use:   "compile GRAPH",
		Short: "Compile a graph text file and print its schedules, or dump the IR after any pass",
		Long: `Compile GRAPH (the text format of docs/graph-format.md) and print one schedule per kernel
and the schedule hash.

--dump prints the IR after compiler passes, in pipeline order, before the schedules:
  graph      the graph after the last graph rewrite (pass dce)
  dist       with --mesh: every rank's program (pass shard), with where its blocks sit
  groups     the fusion groups (pass fuse-elementwise)
  schedule   the Schedule IR (pass schedule)
  tile       the Tile IR (pass verify-tile)
  all        after every pass
  PASS, after:PASS   after the named pass; passes: ` + strings.Join(compiler.PassNames(), ", ") + `

--target ptx prints every kernel's PTX (docs/ptx.md) instead of the schedules; --arch sm_90a
gives the dedicated wgmma kernels (matmul, attention) the CUDA backend uses on an H100, sm_90
the SIMT and mma.sync paths. --target ptxas assembles every kernel with NVIDIA's ptxas
(TESSERA_PTXAS, else ptxas on PATH; no GPU needed) and prints what it reports: registers,
stack, spills, the routines called and the time it took; a kernel ptxas rejects is E_INTERNAL.

--mesh dp=2,tp=2 compiles for a device mesh: the shard pass propagates the --layout of each
input (NAME=LAYOUT, repeatable: W=col:tp, W=row:tp, X=[S(dp),R], ...; absent inputs are
replicated) and inserts collectives; each segment between collectives compiles as usual.
Layout forms are in docs/distributed.md.`,
		Example: `  tessera-qa compile docs/examples/mlp.tg
  tessera-qa compile --dump=graph,schedule,tile docs/examples/mlp.tg
  tessera-qa compile --dump=after:canonicalize docs/examples/mlp.tg
  tessera-qa compile --target ptx docs/examples/mlp.tg
  tessera-qa compile --target ptxas docs/examples/mlp.tg
  tessera-qa compile --mesh dp=2,tp=2 --layout w1=col:tp --layout w2=row:tp --dump=dist docs/examples/mlp.tg`,
		Args: exactArgs("GRAPH"),
		RunE: verb(func(cmd *cobra.Command, args []string) error {
			after, err := dumpPasses(dump)
			if err != nil {
				return usage(cmd, "%v", err)
			}
			if target != "tile" && target != "ptx" && target != "ptxas" {
				return usage(cmd, "--target %q: want tile, ptx or ptxas", target)
			}
			tgt := ptx.H100
			switch arch {
			case "sm_90":
			case "sm_90a":
				tgt.ArchSuffix = "a"
			default:
				return usage(cmd, "--arch %q: want sm_90 or sm_90a", arch)
			}
			g, err := graph.ParseFile(args[0])
			if err != nil {
				return err
			}
			out := e.human(jsonPath)
			opts := compiler.Options{}
			if len(after) > 0 {
				opts.Dump, opts.DumpAfter = out, after
			}
			if meshSpec != "" || len(layoutSpecs) > 0 {
				if target != "tile" {
					return usage(cmd, "--target %s with --mesh: compile one segment's graph instead", target)
				}
				if opts.Mesh, opts.Layouts, err = meshOptions(g, meshSpec, layoutSpecs); err != nil {
					return err
				}
				dp, err := compiler.CompileDist(g, opts)
				if err != nil {
					return err
				}
				return e.writeDist(out, jsonPath, g, dp, len(after) == 0)
			}
			p, err := compiler.Compile(g, opts)
			if err != nil {
				return err
			}
			var assembled []ptxasJSON
			switch {
			case target == "ptx":
				text, err := ptx.Text(p, tgt)
				if err != nil {
					return err
				}
				io.WriteString(out, text)
			case target == "ptxas":
				if assembled, err = assembleKernels(cmd.Context(), out, p, tgt); err != nil {
					return err
				}
			case len(after) == 0:
				io.WriteString(out, compiler.FormatSchedules(p.Schedules))
			}
			// Under --target ptx the output is PTX, so the hash line is a PTX comment: a
			// one-kernel graph's output then goes straight to ptxas.
			prefix := ""
			if target == "ptx" {
				prefix = "// "
			}
			fmt.Fprintf(out, "%sschedule-hash %s (%d kernels)\n", prefix, p.ScheduleHash, len(p.Kernels))
			r := compileReport(g, p)
			r.Ptxas = assembled
			return e.writeJSON(jsonPath, r)
		}),
	}
	cmd.Flags().StringVar(&target, "target", "tile", "what to print: tile (schedules, or the --dump views), ptx (every kernel's PTX for sm_90) or ptxas (what NVIDIA's assembler makes of each kernel)")
	cmd.Flags().StringVar(&arch, "arch", "sm_90", "--target ptx or ptxas: sm_90 or sm_90a (wgmma)")
	cmd.Flags().StringSliceVar(&dump, "dump", nil, "print the IR after passes: graph, dist, groups, schedule, tile, all, or a pass name (comma-separated)")
	cmd.Flags().StringVar(&meshSpec, "mesh", "", "compile for a device mesh: axis=size,... (dp=2,tp=2)")
	cmd.Flags().StringArrayVar(&layoutSpecs, "layout", nil, "with --mesh: an input's layout, NAME=LAYOUT (W=col:tp, X=[S(dp),R]); repeatable")
	addJSONFlag(cmd, &jsonPath)
	return cmd
}

// dumpPasses turns --dump items into compiler pass names.
func dumpPasses(items []string) ([]string, error) {
	var out []string
	for _, it := range items {
		name := strings.TrimPrefix(strings.TrimSpace(it), "after:")
		switch {
		case name == "all":
		case dumpViews[name] != "":
			name = dumpViews[name]
		case !slices.Contains(compiler.PassNames(), name):
			return nil, fmt.Errorf("--dump %q: want graph, dist, groups, schedule, tile, all or a pass (%s)", it, strings.Join(compiler.PassNames(), ", "))
		}
		if !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	return out, nil
}

func compileReport(g *graph.Graph, p *compiler.Program) compileJSON {
	r := compileJSON{Graph: g.Name, ScheduleHash: p.ScheduleHash, Kernels: len(p.Kernels), Schedules: []scheduleJSON{}}
	for _, s := range p.Schedules {
		r.Schedules = append(r.Schedules, scheduleJSON{Kernel: s.Kernel, Key: s.Key, Kind: s.Kind, BM: s.BM, BN: s.BN, BK: s.BK,
			Stages: s.Stages, LoopOrder: s.LoopOrder, Source: s.Source})
	}
	return r
}

// meshOptions parses --mesh and --layout against the graph's inputs.
func meshOptions(g *graph.Graph, meshSpec string, specs []string) (*mesh.Mesh, map[string]mesh.Layout, error) {
	if meshSpec == "" {
		return nil, nil, errs.New(errs.Input, "--layout needs --mesh")
	}
	m, err := mesh.ParseMesh(meshSpec)
	if err != nil {
		return nil, nil, err
	}
	layouts := map[string]mesh.Layout{}
	for _, spec := range specs {
		name, text, err := mesh.ParseAssignment(spec)
		if err != nil {
			return nil, nil, err
		}
		v := g.Value(name)
		if v == nil || !slices.Contains(g.Inputs, v) {
			return nil, nil, errs.New(errs.Input, "--layout %s: graph %s has no input %%%s", spec, g.Name, name)
		}
		if _, dup := layouts[name]; dup {
			return nil, nil, errs.New(errs.Input, "--layout: input %%%s is given twice", name)
		}
		if layouts[name], err = mesh.ParseLayout(text, v.Type.Rank()); err != nil {
			return nil, nil, err
		}
	}
	return m, layouts, nil
}

// writeDist prints a mesh compilation: the steps (segments with their schedules, collectives
// between them) unless a dump was asked for, then the hash line; --json gets every segment's
// schedules in step order.
func (e *env) writeDist(out io.Writer, jsonPath string, g *graph.Graph, dp *compiler.DistProgram, steps bool) error {
	r := compileJSON{Graph: g.Name, ScheduleHash: dp.ScheduleHash, Schedules: []scheduleJSON{}}
	colls := 0
	for i, st := range dp.Steps {
		if st.Node != nil {
			colls++
			if steps {
				fmt.Fprintf(out, "step %d: %%%s = %s over %s\n", i, st.Node.Output.Name, st.Node.Op, st.Node.StringAttr("axis"))
			}
			continue
		}
		if steps {
			fmt.Fprintf(out, "step %d: segment %s\n%s", i, st.Program.Graph.Name, compiler.FormatSchedules(st.Program.Schedules))
		}
		part := compileReport(g, st.Program)
		r.Kernels += part.Kernels
		r.Schedules = append(r.Schedules, part.Schedules...)
	}
	fmt.Fprintf(out, "schedule-hash %s (%d kernels, %d collectives, mesh %s, %d ranks)\n", dp.ScheduleHash, r.Kernels, colls, dp.Graph.Mesh, dp.Graph.Mesh.World())
	return e.writeJSON(jsonPath, r)
}

// assembleKernels runs ptxas on every kernel of p and writes one line a kernel. No assembler is
// E_UNSUPPORTED with exit code 3 (the environment asked for is missing).
func assembleKernels(ctx context.Context, out io.Writer, p *compiler.Program, tgt ptx.Target) ([]ptxasJSON, error) {
	tool, err := ptxas.Find()
	if err == nil {
		err = tool.CheckArch(tgt.Arch())
	}
	if err != nil {
		return nil, &exitError{code: ExitMissing, err: err}
	}
	mods, err := ptx.GenerateProgram(p, tgt)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	fmt.Fprintf(out, "ptxas %s (%s), %s\n", tool.Release, tool.Path, tgt.Arch())
	fmt.Fprintf(out, "%-8s %-15s %9s %9s %7s %12s %8s %9s\n", "kernel", "path", "PTX KB", "registers", "stack", "spilled B", "routines", "ptxas ms")
	rows := make([]ptxasJSON, 0, len(mods))
	for i, m := range mods {
		name := p.Kernels[i].Name
		res, err := tool.Assemble(ctx, m.PTX, "kernel "+name)
		if err != nil {
			return nil, err
		}
		r := ptxasJSON{Kernel: name, Path: m.Path, PTXBytes: len(m.PTX), MS: float64(res.Elapsed.Microseconds()) / 1e3, Release: tool.Release}
		for _, f := range res.Functions {
			if f.Entry {
				r.Registers, r.StackBytes = f.Registers, f.StackBytes
			} else {
				r.Routines++
			}
			r.SpillStores += f.SpillStores
			r.SpillLoads += f.SpillLoads
		}
		fmt.Fprintf(out, "%-8s %-15s %9.1f %9d %7d %12d %8d %9.1f\n", r.Kernel, r.Path, float64(r.PTXBytes)/1e3, r.Registers, r.StackBytes,
			r.SpillStores+r.SpillLoads, r.Routines, r.MS)
		rows = append(rows, r)
	}
	return rows, nil
}
