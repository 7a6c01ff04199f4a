package cli

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/tessera-qa/tessera-qa/doctor"
	"github.com/tessera-qa/tessera-qa/engine/errs"
)

// addPreflightFlag registers --preflight on a verb that starts a job (launch, train, chaos).
func addPreflightFlag(cmd *cobra.Command, p *int) {
	cmd.Flags().IntVar(p, "preflight", 0, "run doctor --level `N` (1-4) on this node before the job starts; a failing node stops it with the verdict, exit 1 (0: off)")
}

// preflight runs doctor at level on the whole node (every GPU NVML lists and the CPU backend)
// before a job's first step. A failing node is refused: the failing checks go to stderr and
// the error names the first, with its code (E_SDC ...) or E_NO_DEVICE (the device is not fit).
func (e *env) preflight(cmd *cobra.Command, level int) error {
	if level == 0 {
		return nil
	}
	if level < 0 || level > 4 {
		return usage(cmd, "--preflight %d: want 1 to 4 (0: off)", level)
	}
	r, err := doctor.Run(context.Background(), doctor.Options{Level: level})
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stderr, "preflight: doctor level %d on %s: %s (%d pass, %d warn, %d fail, %d skipped; NVML %s)\n",
		level, r.Host, r.Verdict, r.Summary.Pass, r.Summary.Warn, r.Summary.Fail, r.Summary.Skipped, r.NVMLSource)
	failed := r.Failed()
	if len(failed) == 0 {
		return nil
	}
	for _, c := range failed {
		fmt.Fprintf(e.stderr, "preflight: FAIL %s %s: %s\n", c.Device, c.Name, c.Reason)
	}
	code := errs.NoDevice
	if failed[0].Code != "" {
		code = errs.Code(failed[0].Code)
	}
	return &exitError{code: ExitFailed, err: errs.New(code, "preflight: doctor level %d refused this node before any step: %s %s: %s",
		level, failed[0].Device, failed[0].Name, failed[0].Reason)}
}
