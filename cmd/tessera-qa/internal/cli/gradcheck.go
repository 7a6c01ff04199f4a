package cli

import (
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/tessera-qa/tessera-qa/engine/backend"
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/harness/gradcheck"
)

func init() { registerVerb(newGradcheckCmd) }

// gradcheckJSON is the shape of `gradcheck --json` (docs/cli.md).
type gradcheckJSON struct {
	Backend string             `json:"backend"`
	Passed  bool               `json:"passed"`
	Rows    []gradcheck.Row    `json:"rows"`
	Cases   []gradcheck.Result `json:"cases"`
}

func newGradcheckCmd(e *env) *cobra.Command {
	var (
		ops        []string
		backendArg string
		jsonPath   string
	)
	cmd := &cobra.Command{
		Use:   "gradcheck",
		Short: "Check every op's gradient (reverse mode) against float64 finite differences, per dtype",
		Long: `Differentiate each op of the registry (engine/autodiff) on the golden catalogue's cases and
judge the engine's gradient, computed in the case's dtype on --backend, against two float64
references: central finite differences of the golden model along random directions, and the
backward graph run in float64 by the golden model (docs/autodiff.md gives the step and the
per-dtype budgets).

Prints one row per (op, dtype): pass, FAIL, or "no gradient" with the reason (integer dtypes,
ops without a rule). Collective ops are differentiated over a mesh by suites/gradients.
Exit 0 when every row passed, 1 when one failed, 2 for an unknown op, 3 when --backend cannot
run here.`,
		Example: `  tessera-qa gradcheck
  tessera-qa gradcheck --ops attention,layernorm --backend cuda --json grads.json`,
		Args: exactArgs(),
		RunE: verb(func(cmd *cobra.Command, args []string) error {
			for _, op := range ops {
				if _, ok := graph.Lookup(op); !ok {
					return usage(cmd, "--ops: unknown op %q (see `tessera-qa ops`)", op)
				}
			}
			b, err := backend.Get(backendArg)
			if err != nil {
				return err
			}
			if err := b.Available(); err != nil {
				return errs.Wrap(errs.NoDevice, err, "backend %s", backendArg)
			}
			var sel []string
			if len(ops) > 0 {
				sel = ops
			}
			w := e.human(jsonPath)
			fmt.Fprintf(w, "gradcheck: backend %s (%s)\n", b.Name(), b.Device())
			results, err := gradcheck.Run(b, sel, nil)
			if err != nil {
				return err
			}
			rows := gradcheck.Rows(results, sel)
			tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "OP\tDTYPE\tVERDICT\tCASES\tWORST\tBUDGET\tREASON")
			for _, r := range rows {
				dt, worst, budget := r.DType, "-", "-"
				if dt == "" {
					dt = "*"
				}
				if r.Cases > 0 {
					worst, budget = fmt.Sprintf("%.2g", r.Worst), fmt.Sprintf("%.2g", r.Budget)
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\n", r.Op, dt, r.Verdict, r.Cases, worst, budget, r.Reason)
			}
			tw.Flush()
			ok := gradcheck.RowsOK(rows)
			pass, fail, none := 0, 0, 0
			for _, r := range rows {
				switch r.Verdict {
				case gradcheck.Pass:
					pass++
				case gradcheck.Fail:
					fail++
				default:
					none++
				}
			}
			fmt.Fprintf(w, "gradcheck: %d (op, dtype) rows passed, %d failed, %d without a gradient here, %d cases\n", pass, fail, none, len(results))
			if err := e.writeJSON(jsonPath, gradcheckJSON{Backend: b.Name(), Passed: ok, Rows: rows, Cases: results}); err != nil {
				return err
			}
			if !ok {
				return failed()
			}
			return nil
		}),
	}
	f := cmd.Flags()
	f.StringSliceVar(&ops, "ops", nil, "check only these ops (comma-separated)")
	f.StringVar(&backendArg, "backend", "cpu", "backend that computes the gradients: cpu or cuda")
	addJSONFlag(cmd, &jsonPath)
	return cmd
}
