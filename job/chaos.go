package job

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/tessera-qa/tessera-qa/chaos"
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/harness"
	"github.com/tessera-qa/tessera-qa/training"
)

// The chaos suite of the main job: four short in-process scenarios of `tessera-qa chaos`
// (package chaos), each a fault on real frames of the in-process transport: on the mlp with 3
// goroutine ranks a flipped bit, a duplicated frame, a NaN with a valid checksum; on the fno
// with a dp=2,tp=2 mesh of 4 a flipped bit.
// Each must be detected, the group restarted from its last checkpoint, and the final bits
// equal the fault-free run's. The process faults (kill, hang) and containers run in
// suites/chaos; artifacts go under the run's folder, RUNDIR/chaos/ (a fresh folder every run: the
// checker refuses one that already holds a history), and the reports into RUNDIR/chaos.json.
const chaosWorld = 3

func chaosScenarios() []*chaos.Scenario {
	mk := func(name string, f chaos.Fault, rank, step int) *chaos.Scenario {
		return &chaos.Scenario{Name: "inproc/" + name, World: chaosWorld, Transport: "inproc", Steps: 30, CheckpointEvery: 10, Seed: 1,
			Faults: []chaos.Injection{{Fault: f, Rank: rank, Step: step}}}
	}
	// Issue 26: the fno on a dp=2,tp=2 mesh, 12 steps: a flipped bit in a tensor-parallel
	// collective's frame.
	fno := &chaos.Scenario{Name: "inproc/fno-dp2xtp2-corrupt-frame", Workload: "train:" + training.FNOModel, Mesh: "dp=2,tp=2", World: 4,
		Transport: "inproc", Steps: 12, CheckpointEvery: 4, Seed: 1, Faults: []chaos.Injection{{Fault: &chaos.Corrupt{}, Rank: 1, Step: 6}}}
	return []*chaos.Scenario{
		mk("corrupt-frame", &chaos.Corrupt{}, 1, 12),
		mk("duplicate-frame", &chaos.Duplicate{}, chaosWorld-1, 21),
		mk("nan-gradient", &chaos.NaN{}, 1, 7),
		fno,
	}
}

func (r *runner) chaosTasks() []task {
	var ts []task
	for _, sc := range chaosScenarios() {
		ts = append(ts, func() harness.Result { return r.chaosResult(sc) })
	}
	return ts
}

func (r *runner) chaosResult(sc *chaos.Scenario) harness.Result {
	start := time.Now()
	env := harness.CaptureEnv(r.b)
	env.Determinism = harness.DeterminismBitwise
	res := harness.Result{Schema: harness.ResultSchema, Suite: SuiteChaos, Case: sc.Name, Backend: "dist/inproc",
		Device: fmt.Sprintf("%d in-process ranks", sc.World), DeviceClass: env.DeviceClass, Seed: sc.Seed,
		Outputs: []harness.OutputResult{}, Env: env}
	dir := filepath.Join(r.runDir, "chaos", strings.ReplaceAll(sc.Name, "/", "-"))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rep, err := chaos.Execute(ctx, sc, chaos.Options{Dir: dir})
	res.Timing.TotalMS = float64(time.Since(start).Microseconds()) / 1000
	ranks := fmt.Sprintf("--world %d", chaosWorld)
	if sc.Mesh != "" {
		ranks = fmt.Sprintf("--mesh %s --workload %s --steps %d --checkpoint-every %d", sc.Mesh, sc.Workload, sc.Steps, sc.CheckpointEvery)
	}
	rerun := fmt.Sprintf(" (rerun: tessera-qa chaos %s --transport inproc --faults %s@%d:%d --json -; artifacts %s)",
		ranks, sc.Faults[0].Fault.Name(), sc.Faults[0].Rank, sc.Faults[0].Step, dir)
	switch {
	case err != nil:
		res.Verdict, res.ErrorCode, res.Reason = harness.VerdictError, string(errs.CodeOf(err)), err.Error()+rerun
	case !rep.Passed:
		res.Verdict, res.Reason = harness.VerdictFail, strings.Join(rep.Violations, "; ")+rerun
	default:
		res.Verdict = harness.VerdictPass
	}
	if rep != nil {
		res.Digest = rep.Digest
		r.measured.addChaos(sc, rep)
	}
	return res
}
