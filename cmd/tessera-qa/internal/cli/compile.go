package cli

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/tessera-qa/tessera-qa/engine/compiler"
	"github.com/tessera-qa/tessera-qa/engine/compiler/ptx"
	"github.com/tessera-qa/tessera-qa/engine/graph"
)

// compileJSON is the shape of `compile --json` (docs/cli.md).
type compileJSON struct {
	Graph        string         `json:"graph"`
	ScheduleHash string         `json:"schedule_hash"`
	Kernels      int            `json:"kernels"`
	Schedules    []scheduleJSON `json:"schedules"`
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
var dumpViews = map[string]string{"graph": "dce", "groups": "fuse-elementwise", "schedule": "schedule", "tile": "verify-tile"}

func newCompileCmd(e *env) *cobra.Command {
	var jsonPath string
	var dump []string
	var target, arch string
	cmd := &cobra.Command{
		Use:   "compile GRAPH",
		Short: "Compile a graph text file and print its schedules, or dump the IR after any pass",
		Long: `Compile GRAPH (the text format of docs/graph-format.md) and print one schedule per kernel
and the schedule hash.

--dump prints the IR after compiler passes, in pipeline order, before the schedules:
  graph      the graph after the last graph rewrite (pass dce)
  groups     the fusion groups (pass fuse-elementwise)
  schedule   the Schedule IR (pass schedule)
  tile       the Tile IR (pass verify-tile)
  all        after every pass
  PASS, after:PASS   after the named pass; passes: ` + strings.Join(compiler.PassNames(), ", ") + `

--target ptx prints every kernel's PTX (docs/ptx.md) instead of the schedules; --arch sm_90a
gives the dedicated wgmma kernels (matmul, attention) the CUDA backend uses on an H100, sm_90
the SIMT and mma.sync paths.`,
		Example: `  tessera-qa compile docs/examples/mlp.tg
  tessera-qa compile --dump=graph,schedule,tile docs/examples/mlp.tg
  tessera-qa compile --dump=after:canonicalize docs/examples/mlp.tg
  tessera-qa compile --target ptx docs/examples/mlp.tg`,
		Args: exactArgs("GRAPH"),
		RunE: verb(func(cmd *cobra.Command, args []string) error {
			after, err := dumpPasses(dump)
			if err != nil {
				return usage(cmd, "%v", err)
			}
			if target != "tile" && target != "ptx" {
				return usage(cmd, "--target %q: want tile or ptx", target)
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
			p, err := compiler.Compile(g, opts)
			if err != nil {
				return err
			}
			switch {
			case target == "ptx":
				text, err := ptx.Text(p, tgt)
				if err != nil {
					return err
				}
				io.WriteString(out, text)
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
			return e.writeJSON(jsonPath, compileReport(g, p))
		}),
	}
	cmd.Flags().StringVar(&target, "target", "tile", "what to print: tile (schedules, or the --dump views) or ptx (every kernel's PTX for sm_90)")
	cmd.Flags().StringVar(&arch, "arch", "sm_90", "--target ptx: sm_90 or sm_90a (wgmma)")
	cmd.Flags().StringSliceVar(&dump, "dump", nil, "print the IR after passes: graph, groups, schedule, tile, all, or a pass name (comma-separated)")
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
			return nil, fmt.Errorf("--dump %q: want graph, groups, schedule, tile, all or a pass (%s)", it, strings.Join(compiler.PassNames(), ", "))
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
