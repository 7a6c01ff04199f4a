package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/tessera-qa/tessera-qa/harness"
)

// replayJSON is the shape of `replay --json` (docs/cli.md).
type replayJSON struct {
	Manifest        string         `json:"manifest"`
	Suite           string         `json:"suite"`
	Case            string         `json:"case"`
	Backend         string         `json:"backend"`
	StillFails      bool           `json:"still_fails"`
	OriginalFailure string         `json:"original_failure"`
	Result          harness.Result `json:"result"`
}

func newReplayCmd(e *env) *cobra.Command {
	var backendName, jsonPath string
	cmd := &cobra.Command{
		Use:   "replay FILE",
		Short: "Re-run a failing case from its replay manifest and say whether it still fails",
		Long: `Re-run the case a replay manifest (written under tessera-qa-out/replay/ by run and the
suites) describes: same graph, same input bytes, same tolerances or expected digests, on the
recorded backend or --backend.

Exit 1 if it still fails, 0 if it passes now, 2 if the manifest is bad, 3 if its backend cannot
run here.`,
		Args: exactArgs("FILE"),
		RunE: verb(func(cmd *cobra.Command, args []string) error {
			m, err := harness.LoadManifest(args[0])
			if err != nil {
				return err
			}
			if backendName != "" {
				m.Backend = backendName
			}
			r, err := harness.Replay(m)
			if err != nil {
				return err
			}
			w := e.human(jsonPath)
			fmt.Fprintf(w, "replay %s/%s on %s (%s)\n", m.Suite, m.Case, r.Backend, r.Device)
			fmt.Fprintf(w, "recorded failure: %s\n", oneLine(m.Failure))
			still := r.Failed() || r.Verdict == harness.VerdictSkip
			if still {
				fmt.Fprintf(w, "STILL FAILS: %s\n", caseLine(r))
			} else {
				fmt.Fprintf(w, "PASSES NOW")
				if r.Reason != "" {
					fmt.Fprintf(w, " (%s)", oneLine(r.Reason))
				}
				fmt.Fprintln(w)
			}
			if err := e.writeJSON(jsonPath, replayJSON{Manifest: args[0], Suite: m.Suite, Case: m.Case, Backend: r.Backend,
				StillFails: still, OriginalFailure: m.Failure, Result: r}); err != nil {
				return err
			}
			if still {
				return failed()
			}
			return nil
		}),
	}
	cmd.Flags().StringVar(&backendName, "backend", "", "run on this backend instead of the recorded one")
	addJSONFlag(cmd, &jsonPath)
	return cmd
}
