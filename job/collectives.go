package job

import (
	"context"
	"fmt"
	"runtime"
	"time"

	"github.com/tessera-qa/tessera-qa/collectives"
	"github.com/tessera-qa/tessera-qa/engine/dist"
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/harness"
)

// The collectives suite of the main job: a short, bounded slice of `tessera-qa collectives`
// (package collectives) on an in-process world of CollectivesWorld ranks: every op on three
// dtypes at a prime count and at 64 Ki elements in deterministic mode, and exact-mode
// all_reduce with its split check. Each case is one result: pass when no element is wrong and
// the bits hold (in place equal to out of place, every rank the same where the op says so);
// its digest is the row's, so the reporter tracks the bits run to run. About a second.
const (
	CollectivesWorld = 4
	collectivesSeed  = 1
	collectivesIters = 3
)

// collectivesCases lists the suite's cases with their mode.
func collectivesCases() []struct {
	c    collectives.Case
	mode dist.Mode
} {
	type mc = struct {
		c    collectives.Case
		mode dist.Mode
	}
	var out []mc
	m := collectives.Matrix{Ops: collectives.Ops, RedOps: []dist.RedOp{dist.Sum}, DTypes: []numerics.DType{numerics.F32, numerics.BF16, numerics.I32},
		Counts: []int{1021, 1 << 16}, Root: CollectivesWorld - 1}
	for _, c := range m.Cases(CollectivesWorld) {
		out = append(out, mc{c, dist.Deterministic})
	}
	ex := collectives.Matrix{Ops: []collectives.Op{collectives.AllReduce}, RedOps: []dist.RedOp{dist.Sum, dist.Avg},
		DTypes: []numerics.DType{numerics.F32, numerics.BF16}, Counts: []int{4099}}
	for _, c := range ex.Cases(CollectivesWorld) {
		out = append(out, mc{c, dist.Exact})
	}
	return out
}

func (r *runner) collectivesTasks() []task {
	var ts []task
	for _, x := range collectivesCases() {
		ts = append(ts, func() harness.Result { return collectivesResult(x.c, x.mode, &r.measured) })
	}
	return ts
}

// collectivesResult runs one case on a fresh in-process world and turns its row into a result.
// Its row goes into m (RUNDIR/collectives.json: busbw for the dashboard's collectives page).
func collectivesResult(c collectives.Case, mode dist.Mode, m *measurements) harness.Result {
	start := time.Now()
	env := harness.CaptureEnv(nil)
	env.Backend, env.Device, env.DeviceClass = "dist/inproc", fmt.Sprintf("%d in-process ranks", CollectivesWorld), "cpu/"+runtime.GOARCH
	env.Determinism = harness.DeterminismUnknown
	if mode.BitsGuaranteed() {
		env.Determinism = harness.DeterminismBitwise
	}
	res := harness.Result{Schema: harness.ResultSchema, Suite: SuiteCollectives,
		Case:    fmt.Sprintf("%s/w%d/inproc/%s", c.Name(), CollectivesWorld, mode),
		Backend: env.Backend, Device: env.Device, DeviceClass: env.DeviceClass, Seed: collectivesSeed,
		Outputs: []harness.OutputResult{}, Env: env}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rows, err := collectives.RunInproc(ctx, CollectivesWorld, collectives.Config{Cases: []collectives.Case{c}, Mode: mode,
		Seed: collectivesSeed, Iters: collectivesIters, Warmup: 1, Timeout: 30 * time.Second})
	res.Timing.TotalMS = float64(time.Since(start).Microseconds()) / 1000
	if err != nil {
		res.Verdict, res.ErrorCode, res.Reason = harness.VerdictError, string(errs.CodeOf(err)), err.Error()+" (rerun: "+rerun(c, mode)+")"
		return res
	}
	row := rows[0]
	if m != nil {
		m.addCollectives(row)
	}
	res.Timing.RunMS = (row.TimeUS + row.TimeUSIP) / 1000
	res.Digest = row.Digest
	n := row.Count * CollectivesWorld
	for _, o := range []struct {
		name, digest string
		wrong        int64
	}{{"out_of_place", row.Digest, row.Wrong}, {"in_place", row.DigestIP, row.WrongIP}} {
		res.Outputs = append(res.Outputs, harness.OutputResult{Name: o.name, DType: row.DType, Shape: []int{row.Count}, Digest: o.digest,
			Check: harness.CheckResult{Pass: o.wrong == 0, Mode: "collectives", Elements: n, Mismatches: int(o.wrong), Worst: -1}})
	}
	res.Verdict = harness.VerdictPass
	if !row.OK {
		res.Verdict = harness.VerdictFail
		res.Reason = fmt.Sprintf("%s over %d in-process ranks: %s (rerun: %s)", c.Name(), CollectivesWorld, row.Note, rerun(c, mode))
	}
	return res
}

// rerun is the collectives command line that runs the case again (with the zero count too:
// -b 0 -e 0 is the smallest sweep).
func rerun(c collectives.Case, mode dist.Mode) string {
	red := "sum"
	if c.Op.Reduces() {
		red = c.Red.String()
	}
	return fmt.Sprintf("tessera-qa collectives --np %d --ops %s --redops %s --dtypes %s --counts %d -b 0 -e 0 --root %d --mode %s --seed %d",
		CollectivesWorld, c.Op, red, c.DType, c.Count, c.Root, mode, collectivesSeed)
}
