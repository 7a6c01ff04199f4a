package cli

import (
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/tessera-qa/tessera-qa/differential"
	"github.com/tessera-qa/tessera-qa/engine/backend"
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/gradients"
)

func init() { registerVerb(newGradcheckCmd) }

// gradcheckJSON is the shape of `gradcheck --json` (docs/autodiff.md).
type gradcheckJSON struct {
	Backend string               `json:"backend"`
	Vs      *gradcheckOracleJSON `json:"vs,omitempty"`
	Passed  bool                 `json:"passed"`
	Rows    []gradients.Row      `json:"rows"`
	Cases   []gradients.Result   `json:"cases"`
}

type gradcheckOracleJSON struct {
	Framework string `json:"framework"`
	Version   string `json:"version"`
	Python    string `json:"python"`
	Device    string `json:"device"`
}

func newGradcheckCmd(e *env) *cobra.Command {
	var (
		ops        []string
		backendArg string
		vs, python string
		timeout    time.Duration
		jsonPath   string
	)
	cmd := &cobra.Command{
		Use:   "gradcheck",
		Short: "Check every op's gradient (reverse mode) against float64 finite differences, per dtype",
		Long: `Differentiate each op of the registry (engine/autodiff) on the golden catalogue's cases and
judge the engine's gradient, computed in the case's dtype on --backend, against two float64
references: central finite differences of the golden model along random directions, and the
backward graph run in float64 by the golden model (docs/autodiff.md gives the step and the
per-dtype budgets). Collective ops are differentiated over a mesh (in-process ranks).

--vs torch (or jax) adds an independent oracle: the framework's autodiff (torch.autograd,
jax.vjp) computes the same vector-Jacobian product in float64 at the same inputs and
cotangents, rounded once to the dtype, and the engine's gradient must match it normwise
within the dtype's budget. The oracle runs on the GPU when --backend is cuda. Cases the
oracle cannot compute say so in the row (not a failure); collectives have no oracle
comparison and say so.

Prints one row per (op, dtype): pass, FAIL, or "no gradient" with the reason (integer dtypes,
ops without a rule). Exit 0 when every row passed, 1 when one failed (against the references
or the oracle), 2 on bad usage, 3 when --backend cannot run here or the --vs oracle cannot
start (E_NO_DEVICE).`,
		Example: `  tessera-qa gradcheck
  tessera-qa gradcheck --ops attention,layernorm --backend cuda --json grads.json
  tessera-qa gradcheck --vs torch
  tessera-qa gradcheck --vs torch --backend cuda`,
		Args: exactArgs(),
		RunE: verb(func(cmd *cobra.Command, args []string) error {
			for _, op := range ops {
				if _, ok := graph.Lookup(op); !ok {
					return usage(cmd, "--ops: unknown op %q (see `tessera-qa ops`)", op)
				}
			}
			if vs != "" {
				if _, ok := differential.Frameworks[vs]; !ok {
					return usage(cmd, "--vs must be torch or jax, got %q", vs)
				}
			}
			if timeout <= 0 {
				return usage(cmd, "--timeout must be positive, got %s", timeout)
			}
			b, err := backend.Get(backendArg)
			if err != nil {
				return err
			}
			if err := b.Available(); err != nil {
				return errs.Wrap(errs.NoDevice, err, "backend %s", backendArg)
			}
			var opts gradients.Options
			var oj *gradcheckOracleJSON
			if vs != "" {
				o, err := differential.Start(differential.Config{Framework: vs, Python: python, Timeout: timeout})
				if err != nil {
					return err
				}
				defer o.Close()
				device := oracleDevice(b.Name())
				if !o.Hello().HasDevice(device) {
					return errs.New(errs.NoDevice, "%s has no %s device here (devices: %s)", o.Describe(), device, strings.Join(o.Hello().Devices, ", "))
				}
				opts.Vs = &gradients.Vs{Oracle: o, Target: differential.Target{Device: device}}
				oj = &gradcheckOracleJSON{Framework: o.Hello().Framework, Version: o.Hello().Version, Python: o.Python(), Device: device}
			}
			var sel []string
			if len(ops) > 0 {
				sel = ops
			}
			w := e.human(jsonPath)
			fmt.Fprintf(w, "gradcheck: backend %s (%s)\n", b.Name(), b.Device())
			if opts.Vs != nil {
				fmt.Fprintf(w, "gradcheck: vs %s on %s (float64 vjp at the same inputs and cotangents, rounded once)\n", opts.Vs.Oracle.Describe(), opts.Vs.Target.Device)
			}
			start := time.Now()
			results, err := gradients.RunWith(b, sel, opts)
			if err != nil {
				return err
			}
			rows := gradients.Rows(results, sel)
			printGradRows(w, rows, vs)
			ok := gradients.RowsOK(rows)
			pass, fail, none := 0, 0, 0
			for _, r := range rows {
				switch r.Verdict {
				case gradients.Pass:
					pass++
				case gradients.Fail:
					fail++
				default:
					none++
				}
			}
			fmt.Fprintf(w, "gradcheck: %d (op, dtype) rows passed, %d failed, %d without a gradient here, %d cases, %.1fs\n",
				pass, fail, none, len(results), time.Since(start).Seconds())
			if opts.Vs != nil {
				counts := map[string]int{}
				for _, r := range rows {
					if r.Vs != "" {
						counts[r.Vs]++
					}
				}
				fmt.Fprintf(w, "gradcheck: vs %s: %d rows agree, %d disagree, %d errors, %d unsupported, %d without a comparison (collectives)\n",
					vs, counts[gradients.OraclePass], counts[gradients.OracleFail], counts[gradients.OracleError], counts[gradients.OracleUnsupported], counts[gradients.OracleNA])
			}
			if err := e.writeJSON(jsonPath, gradcheckJSON{Backend: b.Name(), Vs: oj, Passed: ok, Rows: rows, Cases: results}); err != nil {
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
	f.StringVar(&vs, "vs", "", "also compare with this framework's autodiff: torch or jax (exit 3 if it cannot start)")
	f.StringVar(&python, "python", "", "Python interpreter for --vs (default: $"+differential.PythonEnv+", else the first that imports the framework)")
	f.DurationVar(&timeout, "timeout", differential.DefaultTimeout, "limit for each --vs oracle request")
	addJSONFlag(cmd, &jsonPath)
	return cmd
}

// oracleDevice is where the oracle computes for an engine backend: on the GPU for cuda, so
// that the GPU machine checks the engine's CUDA gradients against torch's CUDA ones.
func oracleDevice(backendName string) string {
	if backendName == "cuda" {
		return "cuda"
	}
	return "cpu"
}

func printGradRows(w interface{ Write([]byte) (int, error) }, rows []gradients.Row, vs string) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	head := "OP\tDTYPE\tVERDICT\tCASES\tWORST\tBUDGET"
	if vs != "" {
		head += "\t" + strings.ToUpper(vs) + "\t" + strings.ToUpper(vs) + "-WORST"
	}
	fmt.Fprintln(tw, head+"\tREASON")
	for _, r := range rows {
		dt, worst, budget := r.DType, "-", "-"
		if dt == "" {
			dt = "*"
		}
		if r.Cases > 0 {
			worst, budget = fmt.Sprintf("%.2g", r.Worst), fmt.Sprintf("%.2g", r.Budget)
		}
		line := fmt.Sprintf("%s\t%s\t%s\t%d\t%s\t%s", r.Op, dt, r.Verdict, r.Cases, worst, budget)
		reason := r.Reason
		if vs != "" {
			v, vw := r.Vs, "-"
			if v == "" {
				v = "-"
			}
			if r.VsCompared > 0 {
				vw = fmt.Sprintf("%.2g", r.VsWorst)
			}
			line += "\t" + v + "\t" + vw
			if r.VsReason != "" && !strings.Contains(reason, r.VsReason) {
				if reason != "" {
					reason += "; "
				}
				reason += vs + ": " + r.VsReason
			}
		}
		fmt.Fprintf(tw, "%s\t%s\n", line, reason)
	}
	tw.Flush()
}
