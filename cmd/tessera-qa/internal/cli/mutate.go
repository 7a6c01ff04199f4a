package cli

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"

	"github.com/spf13/cobra"

	"github.com/tessera-qa/tessera-qa/mutate"
)

func init() { registerVerb(newMutateCmd) }

// mutateJSON is the shape of `mutate --json` (docs/cli.md).
type mutateJSON struct {
	Passed   bool     `json:"passed"`
	Uncaught []string `json:"uncaught"`
	*mutate.Report
}

func newMutateCmd(e *env) *cobra.Command {
	var (
		opts               mutate.Options
		jsonPath, markdown string
		list               bool
	)
	cmd := &cobra.Command{
		Use:   "mutate",
		Short: "Plant each catalogued engine fault and report which suites catch it",
		Long: `The mutation check of the whole harness. Builds the selected suites from source with
-tags failpoints (the only builds that contain the faults, see engine/failpoint), checks that
with no fault on they pass and give the normal build's bits, then runs each suite with each
fault on (TESSERA_FAILPOINTS=NAME) and prints the fault x suite table.

Suites (those not in the tree are shown as skipped; judge faults meet only the judges suite):
` + suiteList() + `
Needs the source tree (run from it, or --src) and the go command. Exit 0 when every fault is
caught by some suite, 1 when any is not (or a suite fails with no fault on, or the bits
differ), 2 for bad usage or a build that fails.`,
		Example: `  tessera-qa mutate
  tessera-qa mutate --faults compiler/matmul/ --suites golden,determinism
  tessera-qa mutate --first-catch --json mutate.json
  tessera-qa mutate --list`,
		Args: exactArgs(),
		RunE: verb(func(cmd *cobra.Command, args []string) error {
			w := e.human(jsonPath)
			if list {
				faults, err := mutate.SelectFaults(opts.Faults)
				if err != nil {
					return err
				}
				printFaults(w, faults)
				return e.writeJSON(jsonPath, faults)
			}
			if opts.Jobs < 0 || opts.SmokeCount < 0 || opts.Timeout < 0 {
				return usage(cmd, "--jobs, --smoke and --timeout must be >= 0")
			}
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
			defer stop()
			opts.Progress = mutateProgress(e.stderr)
			rep, err := mutate.Run(ctx, opts)
			if err != nil {
				return err
			}
			fmt.Fprintln(w)
			mutate.WriteTable(w, rep)
			if markdown != "" {
				var b bytes.Buffer
				mutate.WriteMarkdown(&b, rep)
				if err := writeFileAtomic(markdown, b.Bytes()); err != nil {
					return err
				}
			}
			uncaught := rep.Uncaught()
			if uncaught == nil {
				uncaught = []string{}
			}
			if err := e.writeJSON(jsonPath, mutateJSON{Passed: rep.OK(), Uncaught: uncaught, Report: rep}); err != nil {
				return err
			}
			if !rep.OK() {
				return failed()
			}
			return nil
		}),
	}
	f := cmd.Flags()
	f.StringSliceVar(&opts.Faults, "faults", nil, "faults to plant, by name or prefix ending in '/' (default: all; see --list)")
	f.StringSliceVar(&opts.Suites, "suites", nil, "suites to run, in this order: "+strings.Join(mutate.SuiteNames(), ", ")+" (default: all)")
	f.BoolVar(&list, "list", false, "list the faults (name, layer, hook, what breaks) and exit")
	f.BoolVar(&opts.StopAtFirstCatch, "first-catch", false, "stop each fault at the first suite that catches it (cheaper; the table then has gaps)")
	f.IntVar(&opts.Jobs, "jobs", 1, "suite runs at once (each already uses every core)")
	f.DurationVar(&opts.Timeout, "timeout", mutate.DefaultTimeout, "limit per suite run; a run that hits it counts as caught")
	f.IntVar(&opts.SmokeCount, "smoke", 0, "graphs in the smoke suite (default: the run verb's default)")
	f.Uint64Var(&opts.Seed, "seed", mutate.DefaultSeed, "seed of the smoke suite and of the Ginkgo suites (-ginkgo.seed, and through it rapid)")
	f.StringVar(&opts.Root, "src", "", "the tessera-qa source `DIR` (default: found from the working directory)")
	f.StringVar(&opts.WorkDir, "work", "", "keep the failpoints binaries in `DIR` (default: a temporary directory)")
	f.StringVar(&markdown, "markdown", "", "also write the tables of docs/mutations.md to `FILE`")
	addJSONFlag(cmd, &jsonPath)
	return cmd
}

func printFaults(w io.Writer, faults []mutate.Fault) {
	for _, f := range faults {
		fmt.Fprintf(w, "%s  [%s, %s]\n    %s\n", f.Name, f.Layer, f.Hook, f.Breaks)
	}
}

// mutateProgress prints one line per step on stderr, so a long run shows where it is and
// every catch as it happens.
func mutateProgress(w io.Writer) func(mutate.Event) {
	return func(ev mutate.Event) {
		switch {
		case ev.Outcome == nil:
			fmt.Fprintf(w, "%-8s %s\n", ev.Phase, ev.Msg)
		case ev.Phase == "baseline":
			fmt.Fprintf(w, "%-8s %-12s %s (%.1fs) %s\n", ev.Phase, ev.Suite, ev.Outcome.Verdict, ev.Outcome.Seconds, ev.Outcome.Detail)
		default:
			fmt.Fprintf(w, "%-8s %s %s: %s (%.1fs) %s\n", ev.Phase, ev.Fault, ev.Suite, ev.Outcome.Verdict, ev.Outcome.Seconds, ev.Outcome.Detail)
		}
	}
}

// suiteList is the help's list of suites, one per line, from the mutate package's table.
func suiteList() string {
	var b strings.Builder
	for _, su := range mutate.Suites() {
		fmt.Fprintf(&b, "  %-12s %s\n", su.Name, su.What)
	}
	return b.String()
}
