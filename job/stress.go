package job

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/harness"
	"github.com/tessera-qa/tessera-qa/stress"
)

// The stress suite of the main job: a short soak of `tessera-qa stress` (package stress) with
// jobs as goroutines on the run's backend. Every result under load must carry the bits of the
// same graph run alone, and no monitor (RSS, goroutines, fds, temp files) may grow past its
// allowance. The process mode and the planted leak run in suites/stress; artifacts go under
// the run's folder, RUNDIR/stress/, and the report into RUNDIR/stress.json.
const (
	stressJobs     = 3
	stressDuration = 3 * time.Second
)

func (r *runner) stressTasks() []task {
	return []task{r.stressResult}
}

func (r *runner) stressResult() harness.Result {
	start := time.Now()
	env := harness.CaptureEnv(r.b)
	env.Determinism = harness.DeterminismBitwise
	name := fmt.Sprintf("goroutines/jobs%d/%s", stressJobs, stressDuration)
	res := harness.Result{Schema: harness.ResultSchema, Suite: SuiteStress, Case: name, Backend: env.Backend, Device: env.Device,
		DeviceClass: env.DeviceClass, Seed: 1, Outputs: []harness.OutputResult{}, Env: env}
	dir := filepath.Join(r.runDir, "stress")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rep, err := stress.Run(ctx, stress.Options{Mode: "goroutines", Jobs: stressJobs, Backend: r.b, Duration: stressDuration, Seed: 1, OutDir: dir})
	res.Timing.TotalMS = float64(time.Since(start).Microseconds()) / 1000
	rerun := fmt.Sprintf(" (rerun: tessera-qa stress --jobs %d --mode goroutines --duration %s --device %s; artifacts %s)", stressJobs, stressDuration, r.b.Name(), dir)
	switch {
	case err != nil:
		res.Verdict, res.ErrorCode, res.Reason = harness.VerdictError, string(errs.CodeOf(err)), err.Error()+rerun
	case rep.Graphs == 0:
		res.Verdict, res.Reason = harness.VerdictFail, "no graph ran under load"+rerun
	case rep.Mismatches > 0 || rep.Errors > 0 || rep.LeakCount > 0:
		res.Verdict, res.Reason = harness.VerdictFail, fmt.Sprintf("%d mismatches, %d errors, %d leaks in %d graphs%s", rep.Mismatches, rep.Errors, rep.LeakCount, rep.Graphs, rerun)
	default:
		res.Verdict = harness.VerdictPass
	}
	if rep != nil {
		r.measured.setStress(rep)
		res.Labels = []string{fmt.Sprintf("%d graphs under load", rep.Graphs), fmt.Sprintf("%d mismatches", rep.Mismatches), fmt.Sprintf("%d leaks", rep.LeakCount)}
	}
	return res
}
