package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
	"github.com/tessera-qa/tessera-qa/harness"
	"github.com/tessera-qa/tessera-qa/job"
	"github.com/tessera-qa/tessera-qa/profiling"
)

func init() { registerVerb(newProfileCmd) }

func newProfileCmd(e *env) *cobra.Command {
	var in, backendName, jsonPath, tracePath string
	var top, reps int
	var seed uint64
	cmd := &cobra.Command{
		Use:   "profile GRAPH [--in IN.npz] [--backend cpu|cuda] [--trace OUT.json] [--json FILE] [--top K]",
		Short: "Profile a graph: per-kernel latency, FLOPs, bytes, fusion, compile passes; a Perfetto trace",
		Long: `Compile GRAPH with the compiler's log on (time per pass, which rewrites fired on which nodes),
run it once to warm up and --reps times with the backend reporting every launch, and print the
--top slowest kernels: the label of the work (MatMul[MxNxK]), median latency, achieved GFLOP/s
and GB/s from FLOPs and bytes counted from the Tile IR (docs/profiling.md), grid and block, the
Graph IR nodes each kernel computes and the rewrites that made it; on CUDA also registers,
shared and local (spill) memory and theoretical occupancy.

Inputs come from IN.npz, or are drawn at random from --seed. --trace writes a Chrome Trace
Event JSON that Perfetto's UI opens (gzipped when the name ends in .gz); --json writes a bench
document with the per-kernel breakdown that 'tessera-qa report ingest' reads.`,
		Example: `  tessera-qa profile docs/examples/mlp.tg --trace out.json
  tessera-qa profile docs/examples/mlp.tg --in in.npz --top 3 --json prof.json`,
		Args: exactArgs("GRAPH"),
		RunE: verb(func(cmd *cobra.Command, args []string) error {
			if top < 0 || reps < 1 || reps > 1000 {
				return usage(cmd, "--top must be >= 0 and --reps in [1, 1000]")
			}
			g, err := graph.ParseFile(args[0])
			if err != nil {
				return err
			}
			var inputs map[string]*tensor.Tensor
			if in != "" {
				inputs, err = job.LoadInputs(g, in)
			} else {
				inputs, err = harness.RandomInputs(g, seed, nil)
			}
			if err != nil {
				return err
			}
			c, err := job.ChooseBackend(backendName)
			if err != nil {
				return err
			}
			rep, err := profiling.Profile(g, inputs, c.Backend, profiling.Options{Reps: reps})
			if err != nil {
				return err
			}
			w := e.human(jsonPath)
			if err := rep.WriteSummary(w, top); err != nil {
				return err
			}
			if tracePath != "" {
				if err := rep.Trace().WriteFile(tracePath); err != nil {
					return err
				}
				st, err := profiling.ValidateFile(tracePath)
				if err != nil {
					return err
				}
				fmt.Fprintf(w, "trace %s: %d events (%d slices, %d flows, %d counters), valid\n", tracePath, st.Events, st.Slices, st.Flows, st.Counters)
			}
			return e.writeJSON(jsonPath, rep.BenchDoc())
		}),
	}
	cmd.Flags().StringVar(&in, "in", "", "`IN.npz` with one array per graph input (default: random inputs from --seed)")
	cmd.Flags().Uint64Var(&seed, "seed", 1, "seed of the random inputs when --in is not given")
	cmd.Flags().StringVar(&backendName, "backend", "cpu", "backend to profile on (cpu, cuda)")
	cmd.Flags().StringVar(&tracePath, "trace", "", "write a Chrome Trace Event JSON to `FILE` (.gz: gzipped)")
	cmd.Flags().IntVar(&top, "top", 10, "print the `K` slowest kernels (0: all)")
	cmd.Flags().IntVar(&reps, "reps", 5, "profiled runs after one warm-up")
	addJSONFlag(cmd, &jsonPath)
	return cmd
}
