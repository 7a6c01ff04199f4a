package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/job"
)

// execJSON is the shape of `exec --json` (docs/cli.md).
type execJSON struct {
	Graph        string       `json:"graph"`
	Backend      string       `json:"backend"`
	Device       string       `json:"device"`
	ScheduleHash string       `json:"schedule_hash,omitempty"`
	Out          string       `json:"out"`
	Outputs      []outputJSON `json:"outputs"`
}

type outputJSON struct {
	Name   string `json:"name"`
	DType  string `json:"dtype"`
	Shape  []int  `json:"shape"`
	Digest string `json:"digest"`
}

func newExecCmd(e *env) *cobra.Command {
	var in, out, backendName, jsonPath string
	cmd := &cobra.Command{
		Use:   "exec GRAPH --in IN.npz --out OUT.npz",
		Short: "Run a graph text file on .npz inputs and write its outputs as .npz",
		Long: `Parse GRAPH, read one array per graph input from IN.npz (named after the input value, read
with the dtype the graph declares: f16/bf16 as '<u2' bit patterns, fp8 as '|u1', bool as '|b1'),
compile and run it, and write one array per output value to OUT.npz. OUT.npz is written
atomically: if anything fails, an existing OUT.npz is left untouched.

--backend ref runs the float64 golden model (engine/ref) instead of compiling.`,
		Example: `  tessera-qa exec docs/examples/mlp.tg --in in.npz --out out.npz
  tessera-qa exec docs/examples/mlp.tg --in in.npz --out want.npz --backend ref`,
		Args: exactArgs("GRAPH"),
		RunE: verb(func(cmd *cobra.Command, args []string) error {
			if in == "" || out == "" {
				return usage(cmd, "--in and --out are required")
			}
			g, err := graph.ParseFile(args[0])
			if err != nil {
				return err
			}
			inputs, err := job.LoadInputs(g, in)
			if err != nil {
				return err
			}
			res, err := job.Exec(g, backendName, inputs)
			if err != nil {
				return err
			}
			if err := job.WriteOutputs(out, g, res.Outputs); err != nil {
				return err
			}
			report := execJSON{Graph: g.Name, Backend: res.Backend, Device: res.Device, ScheduleHash: res.ScheduleHash, Out: out}
			names, ts := job.OutputNames(g, res.Outputs)
			for i, t := range ts {
				report.Outputs = append(report.Outputs, outputJSON{Name: names[i], DType: t.DType.String(), Shape: t.Shape, Digest: t.Digest()})
			}
			w := e.human(jsonPath)
			fmt.Fprintf(w, "graph %s on %s (%s): %d outputs -> %s\n", g.Name, res.Backend, res.Device, len(report.Outputs), out)
			for i, o := range report.Outputs {
				fmt.Fprintf(w, "  %%%s %s digest %s\n", o.Name, ts[i].TypeString(), o.Digest)
			}
			return e.writeJSON(jsonPath, report)
		}),
	}
	cmd.Flags().StringVar(&in, "in", "", "`IN.npz` with one array per graph input (required)")
	cmd.Flags().StringVar(&out, "out", "", "`OUT.npz` to write one array per graph output to (required)")
	cmd.Flags().StringVar(&backendName, "backend", "cpu", "backend to run on (see tessera-qa devices), or ref for the golden model")
	addJSONFlag(cmd, &jsonPath)
	return cmd
}
