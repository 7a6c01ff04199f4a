package cli

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/tessera-qa/tessera-qa/differential"
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/golden"
	"github.com/tessera-qa/tessera-qa/harness"
	"github.com/tessera-qa/tessera-qa/job"
)

func init() { registerVerb(newDiffCmd) }

// diffOptions are the flags of `diff`.
type diffOptions struct {
	oracle, device, backend, python, out string
	ops                                  []string
	seeds                                int
	timeout                              time.Duration
	native, mapping                      bool
}

// diffJSON is the shape of `diff --json` (docs/cli.md).
type diffJSON struct {
	Passed  bool               `json:"passed"`
	Oracle  diffOracleJSON     `json:"oracle"`
	Backend string             `json:"backend"`
	Device  string             `json:"device"`
	Seeds   int                `json:"seeds"`
	Cases   int                `json:"cases"`
	Seconds float64            `json:"seconds"`
	Rows    []differential.Row `json:"rows"`
	Results []harness.Result   `json:"results"`
}

type diffOracleJSON struct {
	Framework string `json:"framework"`
	Version   string `json:"version"`
	Python    string `json:"python"`
	Device    string `json:"device"`
	Native    bool   `json:"native"`
}

func newDiffCmd(e *env) *cobra.Command {
	var o diffOptions
	var jsonPath string
	cmd := &cobra.Command{
		Use:   "diff",
		Short: "Check the engine against PyTorch or JAX on every golden catalogue case",
		Long: `Run every golden catalogue case (every op x dtype) on an engine backend and on an oracle
framework, PyTorch or JAX, running as one long-lived Python process, and compare the outputs
with each case's tolerance. Prints one row per op x dtype: cases, max abs/rel error, max ULP,
verdict, and how the oracle computed it when not natively (docs/differential.md).

The interpreter is --python, else $TESSERA_QA_PYTHON, else the first of python3 on PATH and
/usr/bin/python3 that can import the framework. --device cuda runs the oracle on the GPU and,
unless --backend says otherwise, the engine on the cuda backend.

Exit 0 when every row passed (rows the oracle cannot compute are listed as unsupported, not
failed), 1 when any case disagreed or could not run, 2 on bad usage, 3 when the oracle, its
device or the engine backend is missing here.`,
		Example: `  tessera-qa diff
  tessera-qa diff --ops matmul,softmax --seeds 5
  tessera-qa diff --oracle jax --python ~/venv/bin/python
  tessera-qa diff --device cuda --json diff.json
  tessera-qa diff --mapping`,
		Args: exactArgs(),
		RunE: verb(func(cmd *cobra.Command, args []string) error {
			if o.mapping {
				printMapping(e.human(jsonPath))
				return e.writeJSON(jsonPath, differential.Mapping)
			}
			if err := o.validate(cmd); err != nil {
				return err
			}
			return runDiff(e, o, jsonPath)
		}),
	}
	f := cmd.Flags()
	f.StringVar(&o.oracle, "oracle", "torch", "oracle framework: torch or jax")
	f.StringVar(&o.device, "device", "cpu", "where the oracle computes: cpu or cuda")
	f.StringVar(&o.backend, "backend", "", "engine backend (default: cpu for --device cpu, cuda for --device cuda)")
	f.StringSliceVar(&o.ops, "ops", nil, "only these ops (comma-separated; default: every op)")
	f.IntVar(&o.seeds, "seeds", 1, "input draws per catalogue case (1: the golden inputs only)")
	f.StringVar(&o.python, "python", "", "Python interpreter for the oracle (default: $"+differential.PythonEnv+", else the first that imports the framework)")
	f.DurationVar(&o.timeout, "timeout", differential.DefaultTimeout, "limit for each oracle request")
	f.StringVar(&o.out, "out", "", "write a replay manifest per failing case into `DIR`")
	f.BoolVar(&o.native, "native", false, "use the framework's own 16-bit kernels even where they round intermediates (shows the differences; not a check of the engine)")
	f.BoolVar(&o.mapping, "mapping", false, "print how each op maps to torch and jax and where semantics differ, and exit")
	addJSONFlag(cmd, &jsonPath)
	return cmd
}

func (o *diffOptions) validate(cmd *cobra.Command) error {
	if _, ok := differential.Frameworks[o.oracle]; !ok {
		return usage(cmd, "--oracle must be torch or jax, got %q", o.oracle)
	}
	if o.device != "cpu" && o.device != "cuda" {
		return usage(cmd, "--device must be cpu or cuda, got %q", o.device)
	}
	if o.seeds < 1 {
		return usage(cmd, "--seeds must be >= 1, got %d", o.seeds)
	}
	if o.timeout <= 0 {
		return usage(cmd, "--timeout must be positive, got %s", o.timeout)
	}
	for _, op := range o.ops {
		if _, ok := graph.Lookup(op); !ok {
			return usage(cmd, "--ops: unknown op %q (see tessera-qa ops)", op)
		}
	}
	if o.backend == "" {
		o.backend = o.device
	}
	return nil
}

func runDiff(e *env, o diffOptions, jsonPath string) error {
	start := time.Now()
	// The engine backend first: it is cheap to check, the oracle takes seconds to start.
	choice, err := job.ChooseBackend(o.backend)
	if err != nil {
		return err
	}
	b := choice.Backend
	oracle, err := differential.Start(differential.Config{Framework: o.oracle, Python: o.python, Timeout: o.timeout})
	if err != nil {
		return err
	}
	defer oracle.Close()
	if !oracle.Hello().HasDevice(o.device) {
		return errs.New(errs.NoDevice, "%s has no %s device here (devices: %s)", oracle.Describe(), o.device, strings.Join(oracle.Hello().Devices, ", "))
	}
	var specs []golden.Spec
	for _, s := range golden.Catalogue() {
		if len(o.ops) == 0 || slices.Contains(o.ops, s.Op) {
			specs = append(specs, s)
		}
	}
	cases, err := differential.Cases(specs, o.seeds)
	if err != nil {
		return err
	}
	target := differential.Target{Device: o.device, Native: o.native}
	outs := differential.Runner{Oracle: oracle, Target: target, Backend: b, ArtifactsDir: o.out}.Run(cases)
	rows := differential.Summarize(o.ops, outs)
	secs := time.Since(start).Seconds()

	w := e.human(jsonPath)
	fmt.Fprintf(w, "oracle %s on %s; engine backend %s (%s); %d cases (%d per catalogue spec)\n",
		oracle.Describe(), o.device, b.Name(), b.Device(), len(cases), o.seeds)
	if o.native {
		fmt.Fprintln(w, "--native: the oracle uses its own 16-bit kernels; rows may differ by design")
	}
	printRows(w, rows)
	results := make([]harness.Result, len(outs))
	for i, out := range outs {
		results[i] = out.Result
	}
	ok := differential.RowsOK(rows)
	printDiffSummary(w, rows, results, secs, ok)
	rep := diffJSON{Passed: ok, Backend: b.Name(), Device: b.Device(), Seeds: o.seeds, Cases: len(cases), Seconds: secs,
		Rows: rows, Results: results, Oracle: diffOracleJSON{Framework: oracle.Hello().Framework, Version: oracle.Hello().Version,
			Python: oracle.Python(), Device: o.device, Native: o.native}}
	if err := e.writeJSON(jsonPath, rep); err != nil {
		return err
	}
	if !ok {
		return failed()
	}
	return nil
}

func printRows(w io.Writer, rows []differential.Row) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "OP\tDTYPE\tCASES\tMAX_ABS\tMAX_REL\tMAX_ULP\tVERDICT\tORACLE")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%.3g\t%.3g\t%d\t%s\t%s\n", r.Op, r.DType, r.Cases, r.MaxAbs, r.MaxRel, r.MaxULP, r.Verdict, r.Mode)
	}
	tw.Flush()
}

func printDiffSummary(w io.Writer, rows []differential.Row, results []harness.Result, secs float64, ok bool) {
	count := map[string]int{}
	for _, r := range rows {
		count[r.Verdict]++
	}
	fmt.Fprintf(w, "\n%d rows: %d pass, %d fail, %d error, %d unsupported, %d without cases (%.1fs)\n", len(rows),
		count[differential.RowPass], count[differential.RowFail], count[differential.RowError],
		count[differential.RowUnsupported], count[differential.RowNoCases], secs)
	listed := 0
	for _, r := range rows {
		if r.Verdict == differential.RowUnsupported || r.Verdict == differential.RowNoCases {
			fmt.Fprintf(w, "  %s/%s %s: %s\n", r.Op, r.DType, r.Verdict, r.Reason)
		}
	}
	for _, r := range results {
		if !r.Failed() {
			continue
		}
		if listed == maxListed {
			fmt.Fprintln(w, "  ... more in --json")
			break
		}
		listed++
		fmt.Fprintf(w, "  %s\n", caseLine(r))
		if r.Replay != "" {
			fmt.Fprintf(w, "    tessera-qa replay %s (re-runs against the golden model)\n", r.Replay)
		}
	}
	if ok {
		fmt.Fprintln(w, "PASS")
	} else {
		fmt.Fprintln(w, "FAIL")
	}
}

func printMapping(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "OP\tTORCH\tJAX\tDIFFERENCES")
	for _, m := range differential.Mapping {
		notes := m.Notes
		if notes == "" {
			notes = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", m.Op, m.Torch, m.JAX, notes)
	}
	tw.Flush()
}
