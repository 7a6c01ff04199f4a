package cli

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/tessera-qa/tessera-qa/report"
)

func init() { registerVerb(newGateCmd) }

func newGateCmd(e *env) *cobra.Command {
	var (
		hf       historyFlags
		o        report.GateOptions
		runs     []string
		jsonPath string
	)
	cmd := &cobra.Command{
		Use:   "gate",
		Short: "Fail (exit 1) on a blocking slowdown, a new digest or a failing test in the latest runs",
		Long: `Judge the candidate runs (every run of the latest commit in the store, or --commit, or --run)
against the history of the --baseline branch, and print one line per reason:

  BLOCK perf   a series is slower than its baseline window by the block threshold or more
               (Mann-Whitney U significant and at least min_effect; thresholds: docs/reporter.md)
  BLOCK repro  a case produced a digest the reproducibility tracker does not accept
  BLOCK fail   a result or spec failed (and did not also pass on the same commit)
  WARN  perf   slower by the warn threshold or more
  WARN  flaky  failed, and also passed on the same commit
  ACKED perf   a slowdown someone acknowledged (with the reason)

Exit 0 when nothing blocks, 1 when something does, 2 on bad usage or an empty store.`,
		Example: `  tessera-qa gate --baseline main
  tessera-qa gate --baseline main --db postgres://qa@db.internal/tessera --commit 1a2b3c4`,
		Args: exactArgs(),
		RunE: verb(func(cmd *cobra.Command, args []string) error {
			for _, r := range runs {
				for _, s := range strings.Split(r, ",") {
					id, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
					if err != nil || id <= 0 {
						return usage(cmd, "--run wants run ids, got %q", s)
					}
					o.RunIDs = append(o.RunIDs, id)
				}
			}
			db, err := hf.open(cmd.Context(), false)
			if err != nil {
				return err
			}
			defer db.Close()
			g, err := db.Gate(cmd.Context(), o)
			if err != nil {
				return err
			}
			w := e.human(jsonPath)
			for _, r := range g.Reasons {
				fmt.Fprintf(w, "%-5s %-5s %s\n", r.Level, r.Kind, r.Text)
			}
			verdict := "passed"
			if g.Blocked {
				verdict = "BLOCKED"
			}
			fmt.Fprintf(w, "gate %s: commit %s (%d runs) against %s; %d series, %d repro keys, %d results checked\n",
				verdict, g.Commit, len(g.Candidate), g.Baseline, g.Series, g.ReproKeys, g.Checked)
			if err := e.writeJSON(jsonPath, g); err != nil {
				return err
			}
			if g.Blocked {
				return failed()
			}
			return nil
		}),
	}
	hf.add(cmd)
	cmd.Flags().StringVar(&o.Baseline, "baseline", "", "branch whose runs are the baseline (default: the config's baseline_branch, main)")
	cmd.Flags().StringVar(&o.Commit, "commit", "", "judge the runs of this commit (default: the latest run's)")
	cmd.Flags().StringArrayVar(&runs, "run", nil, "judge these run `IDs` instead (comma-separated or repeated)")
	addJSONFlag(cmd, &jsonPath)
	return cmd
}
