package job

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/backend"
	"github.com/tessera-qa/tessera-qa/engine/dist/mesh"
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/harness"
	"github.com/tessera-qa/tessera-qa/training"
)

// The training suite of the main job: the reference workload (training) for a few steps
// on the cpu backend: each model twice (the loss bits and final digest must repeat), the mlp
// data-parallel over 2 in-process ranks, the transformer block and the fno on a dp=2,tp=2 mesh
// (tensor parallel, 4 in-process ranks) twice, the transformer block on a dp=2,pp=2 mesh (a 1F1B
// pipeline per replica) twice, the moe model on dp=2,ep=4 twice, and the mlp stopped at a checkpoint and resumed (the
// digest must equal the uninterrupted run's). The SIGKILL version runs in suites/training.
const trainingSteps = 12

func (r *runner) trainingTasks() []task {
	var ts []task
	for _, model := range training.Models {
		ts = append(ts, func() harness.Result {
			return trainingResult(model+"/repeat", func(cfg training.Config) (string, string, error) {
				a, err := training.Inproc(context.Background(), cfg, 1)
				if err != nil {
					return "", "", err
				}
				b, err := training.Inproc(context.Background(), cfg, 1)
				if err != nil {
					return "", "", err
				}
				return a.Digest, b.Digest, sameLosses(a, b)
			}, model, "")
		})
	}
	ts = append(ts, func() harness.Result {
		return trainingResult("mlp/dp2-inproc/repeat", func(cfg training.Config) (string, string, error) {
			a, err := training.Inproc(context.Background(), cfg, 2)
			if err != nil {
				return "", "", err
			}
			b, err := training.Inproc(context.Background(), cfg, 2)
			if err != nil {
				return "", "", err
			}
			return a.Digest, b.Digest, sameLosses(a, b)
		}, "mlp", "dp=2")
	}, func() harness.Result {
		return trainingResult("transformer-block/dp2xtp2-inproc/repeat", inprocTwice, "transformer-block", "dp=2,tp=2")
	}, func() harness.Result {
		// Issue 26: the Fourier neural operator block (default dims: 4 fields of 2 channels on
		// an 8x8 grid, 8 hidden channels, 3x3 modes per corner), output channels over tp.
		return trainingResult("fno/dp2xtp2-inproc/repeat", inprocTwice, training.FNOModel, "dp=2,tp=2")
	}, func() harness.Result {
		// Issue 27: a pipeline (1F1B, 4 micro-batches) on each of two data-parallel replicas.
		return trainingResult("transformer-block/dp2xpp2-1f1b-inproc/repeat", inprocTwice, "transformer-block", "dp=2,pp=2")
	}, func() harness.Result {
		// Issue 27: the mixture-of-experts layer with its experts over ep=4, twice.
		return trainingResult("moe/dp2xep4-inproc/repeat", inprocTwice, training.MoEModel, "dp=2,ep=4")
	}, func() harness.Result {
		return trainingResult("mlp/resume", func(cfg training.Config) (string, string, error) {
			whole, err := training.Inproc(context.Background(), cfg, 1)
			if err != nil {
				return "", "", err
			}
			dir, err := os.MkdirTemp("", "tessera-train-resume-")
			if err != nil {
				return "", "", errs.New(errs.Input, "training: temporary folder: %v", err)
			}
			defer os.RemoveAll(dir)
			first := cfg
			first.Steps, first.CheckpointDir, first.CheckpointEvery = trainingSteps/2, dir, trainingSteps/2
			if _, err := training.Inproc(context.Background(), first, 1); err != nil {
				return "", "", err
			}
			rest := cfg
			rest.CheckpointDir, rest.Resume = dir, true
			res, err := training.Inproc(context.Background(), rest, 1)
			if err != nil {
				return "", "", err
			}
			if res.StartStep != trainingSteps/2 {
				return "", "", fmt.Errorf("resumed at step %d, want %d", res.StartStep, trainingSteps/2)
			}
			return whole.Digest, res.Digest, nil
		}, "mlp", "")
	})
	return ts
}

func sameLosses(a, b *training.Result) error {
	for i := range a.Losses {
		if i >= len(b.Losses) || a.Losses[i].Bits != b.Losses[i].Bits {
			return fmt.Errorf("step %d: loss %s, then %s", i+1, a.Losses[i].Bits, b.Losses[min(i, len(b.Losses)-1)].Bits)
		}
	}
	return nil
}

// trainingResult runs body (two digests that must be equal) and reports it as a case; meshText
// ("" for one rank) goes into the config and the rerun command.
func trainingResult(name string, body func(training.Config) (string, string, error), model, meshText string) harness.Result {
	start := time.Now()
	b, _ := backend.Get("cpu")
	env := harness.CaptureEnv(b)
	env.Determinism = harness.DeterminismBitwise
	res := harness.Result{Schema: harness.ResultSchema, Suite: SuiteTraining, Case: name, Backend: env.Backend, Device: env.Device,
		DeviceClass: env.DeviceClass, Seed: 1, Outputs: []harness.OutputResult{}, Env: env}
	cfg := training.Config{Model: model, Steps: trainingSteps, Seed: 1, Backend: b}
	rerun := fmt.Sprintf("tessera-qa train --model %s --steps %d --seed 1", model, trainingSteps)
	var err error
	if meshText != "" {
		cfg.Mesh, err = mesh.ParseMesh(meshText)
		rerun += " --mesh " + meshText
	}
	if err == nil {
		cfg.Optimizer, err = training.NewOptimizer("adamw", 1e-2, b)
	}
	if err == nil {
		var want, got string
		want, got, err = body(cfg)
		res.Digest = got
		if err == nil && got != want {
			err = errs.New(errs.Nondeterministic, "final digest %s, want %s", got, want)
		}
	}
	res.Timing.TotalMS = float64(time.Since(start).Microseconds()) / 1000
	switch {
	case errs.CodeOf(err) == errs.Nondeterministic || (err != nil && errs.CodeOf(err) == ""):
		res.Verdict, res.Reason = harness.VerdictFail, err.Error()
	case err != nil:
		res.Verdict, res.ErrorCode, res.Reason = harness.VerdictError, string(errs.CodeOf(err)), err.Error()
	default:
		res.Verdict = harness.VerdictPass
	}
	if res.Reason != "" {
		res.Reason += " (rerun: " + rerun + ")"
	}
	return res
}

// inprocTwice trains cfg on its mesh's ranks in process twice: the repeat rows compare the two
// runs' digests and every loss's bits.
func inprocTwice(cfg training.Config) (string, string, error) {
	a, err := training.Inproc(context.Background(), cfg, cfg.Mesh.World())
	if err != nil {
		return "", "", err
	}
	b, err := training.Inproc(context.Background(), cfg, cfg.Mesh.World())
	if err != nil {
		return "", "", err
	}
	return a.Digest, b.Digest, sameLosses(a, b)
}
