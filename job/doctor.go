package job

import (
	"context"
	"time"

	"github.com/tessera-qa/tessera-qa/doctor"
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/harness"
)

// The doctor suite of the main job: `tessera-qa doctor --level 1` on this node (seconds: the
// software checks, NVML's health fields of every GPU, a quick known-answer run on the CPU
// backend). Each check is one result (case DEVICE/CHECK); a skipped check is a skip with its
// reason. The report goes into RUNDIR/doctor.json, which the results store keeps for the
// dashboard's node page.
const doctorLevel = 1

// doctorTasks runs doctor (a few seconds) and makes one task per check, each returning the
// check as its result; an error of doctor itself is one error result.
func (r *runner) doctorTasks() []task {
	env := harness.CaptureEnv(r.b)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rep, err := doctor.Run(ctx, doctor.Options{Level: doctorLevel})
	if err != nil {
		res := harness.Result{Schema: harness.ResultSchema, Suite: SuiteDoctor, Case: "level1", Backend: env.Backend, Device: env.Device,
			DeviceClass: env.DeviceClass, Outputs: []harness.OutputResult{}, Env: env,
			Verdict: harness.VerdictError, ErrorCode: string(errs.CodeOf(err)), Reason: err.Error()}
		return []task{func() harness.Result { return res }}
	}
	r.measured.setDoctor(&rep)
	var tasks []task
	for _, res := range doctorCheckResults(&rep, env) {
		tasks = append(tasks, func() harness.Result { return res })
	}
	return tasks
}

// doctorCheckResults turns a report's checks into results of suite doctor.
func doctorCheckResults(rep *doctor.Report, env harness.Env) []harness.Result {
	var out []harness.Result
	for _, c := range rep.Checks {
		r := harness.Result{Schema: harness.ResultSchema, Suite: SuiteDoctor, Case: c.Device + "/" + c.Name, Backend: env.Backend,
			Device: env.Device, DeviceClass: env.DeviceClass, Outputs: []harness.OutputResult{}, Env: env, Reason: c.Reason, ErrorCode: c.Code}
		r.Timing.TotalMS = c.Seconds * 1000
		switch c.Verdict {
		case doctor.Pass:
			r.Verdict, r.Reason = harness.VerdictPass, ""
		case doctor.Warn:
			r.Verdict, r.Reason = harness.VerdictPass, "warn: "+c.Reason
		case doctor.Fail:
			r.Verdict = harness.VerdictFail
			r.Reason += " (rerun: tessera-qa doctor --level 1)"
		default:
			r.Verdict = harness.VerdictSkip
		}
		out = append(out, r)
	}
	return out
}
