package stress

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/backend"
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/harness"
	"github.com/tessera-qa/tessera-qa/training"
)

// Workloads: what a job's pool holds. A training entry is a short run of training (the
// mlp, trainSteps SGD steps from the entry's seed, one rank); its digest is the final
// parameters' digest and every step loss's bits, and under load it must equal the digest the
// run gave alone, like a graph's.
const (
	WorkloadGraphs = "graphs"
	WorkloadTrain  = "train"

	trainModel = "mlp"
	trainSteps = 3
	trainLR    = 0.05
)

// trainRun runs the training entry of seed once on b and returns its digest and wall time.
func trainRun(ctx context.Context, b backend.Backend, seed uint64) (string, float64, error) {
	opt, err := training.NewOptimizer("sgd", trainLR, b)
	if err != nil {
		return "", 0, err
	}
	t0 := time.Now()
	r, err := training.Run(ctx, training.Config{Model: trainModel, DType: numerics.F32, Steps: trainSteps, Seed: seed, Optimizer: opt, Backend: b})
	ms := float64(time.Since(t0).Microseconds()) / 1000
	if err != nil {
		return "", ms, err
	}
	bits := make([]string, len(r.Losses))
	for i, l := range r.Losses {
		bits[i] = l.Bits
	}
	return r.Digest + "/" + strings.Join(bits, ","), ms, nil
}

// MakeTrainPlan is MakePlan for the training workload: perJob training entries per job, each
// run alone reps times, which must agree.
func MakeTrainPlan(ctx context.Context, b backend.Backend, seed uint64, jobs, perJob, reps int) (*Plan, error) {
	p := &Plan{Seed: seed, Device: b.Name(), Workload: WorkloadTrain, Jobs: make([][]Graph, jobs)}
	for j := range jobs {
		for i := range perJob {
			g := Graph{Seed: GraphSeed(seed, j, i, 0), Ops: fmt.Sprintf("train %s %d steps", trainModel, trainSteps)}
			for r := range reps {
				d, ms, err := trainRun(ctx, b, g.Seed)
				if err != nil {
					return nil, errs.Wrap(errs.CodeOf(err), err, "stress: training entry %s (seed %d) alone", caseName(j, i), g.Seed)
				}
				if r == 0 {
					g.Digest = d
				} else if d != g.Digest {
					return nil, errs.New(errs.Nondeterministic, "stress: training entry %s (seed %d) gave two digests alone: %s then %s", caseName(j, i), g.Seed, g.Digest, d)
				}
				g.AloneMS = append(g.AloneMS, ms)
			}
			p.Jobs[j] = append(p.Jobs[j], g)
		}
	}
	return p, nil
}

// trainEvent runs entry k of job under load and judges it against its alone digest.
func trainEvent(ctx context.Context, b backend.Backend, job, k int, g Graph) Event {
	d, ms, err := trainRun(ctx, b, g.Seed)
	e := Event{Kind: "graph", Job: job, Graph: k, MS: ms, Verdict: harness.VerdictPass}
	switch {
	case err != nil:
		e.Verdict, e.Code, e.Reason = harness.VerdictError, string(errs.CodeOf(err)), err.Error()
	case d != g.Digest:
		e.Verdict, e.Code = harness.VerdictFail, string(errs.Nondeterministic)
		e.Reason = fmt.Sprintf("training run of seed %d under load: digest %s, alone %s (replay: tessera-qa train --model %s --optimizer sgd --steps %d --lr %g --seed %d)",
			g.Seed, d, g.Digest, trainModel, trainSteps, trainLR, g.Seed)
	}
	return e
}
