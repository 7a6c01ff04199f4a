package cli

import (
	"context"
	"fmt"
	"github.com/tessera-qa/tessera-qa/engine/dist/fabric"
	"github.com/tessera-qa/tessera-qa/engine/dist/launch"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/vbauerster/mpb/v8"
	"github.com/vbauerster/mpb/v8/decor"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/tessera-qa/tessera-qa/bench"
	"github.com/tessera-qa/tessera-qa/determinism/strategies"
	"github.com/tessera-qa/tessera-qa/engine/backend"
	"github.com/tessera-qa/tessera-qa/engine/dist"
	"github.com/tessera-qa/tessera-qa/engine/dist/mesh"
	"github.com/tessera-qa/tessera-qa/engine/dist/pipeline"
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/profiling"
	"github.com/tessera-qa/tessera-qa/training"
)

func init() { registerVerb(newTrainCmd) }

// trainJoiners are the process transports train takes beside tcp (training.Rank's default),
// by --transport name: each joins the job from the launcher's variables.
var trainJoiners = map[string]func(context.Context) (dist.Transport, error){}

func newTrainCmd(e *env) *cobra.Command {
	var (
		cfg                              training.Config
		model, meshArg, transport, dtype string
		optName, backendArg, jsonPath    string
		topology                         string
		lr                               float64
		timeStep, strategiesTable        bool
		dims                             training.Dims
		reps, preflightLevel             int
		metricsAddr                      string
	)
	cmd := &cobra.Command{
		Use:   "train",
		Short: "The reference training workload: forward, autodiff backward, optimizer, data-parallel, checkpoints",
		Long: `Train a small model (mlp, transformer-block or fno) on a seeded synthetic task: the forward graph is
differentiated by engine/autodiff, compiled once, stepped with AdamW (or SGD) update kernels.
--mesh dp=N splits every step's global batch over N data-parallel ranks whose gradients are
averaged in deterministic mode (the bits do not depend on arrival order): goroutines with
--transport inproc, processes with --transport tcp (started through tessera-qa launch's
machinery, or joined under a launcher) or --transport shm (processes of one machine, launched
the same way, frames through shared-memory rings: engine/dist/shm). --mesh dp=N,tp=M adds tensor parallelism: the step
(forward, loss, gradient) is compiled for the N x M mesh by the compiler's shard pass, the
batch split over dp, the weights as Megatron-LM splits them over tp (column- then
row-parallel pairs), each rank holding its blocks; the final digest is of the whole
parameters gathered from the blocks. --mesh pp=P (or dp=N,pp=P) cuts the model into pipeline
stages run by --schedule (gpipe, 1f1b, interleaved with --chunks stages per rank) over
--micro-batches micro-batches; the schedule is validated and dry-run before the first step
(a schedule that would deadlock is E_DEADLOCK). --model moe --mesh dp=N,ep=M trains a
mixture-of-experts layer (top-2 routing with capacity and a load-balancing loss) with its
experts spread over ep, tokens moved by all_to_all. --model fno trains a Fourier-neural-operator
block (rfft2, the low modes of both corners mixed by complex weights, irfft2, a 1x1 path) on 2-D
fields; on a tp axis its output channels are split (docs/spectral.md). Checkpoints are committed in two phases every
--checkpoint-every steps; --resume continues from the newest good one.

Same seed, mesh and device class: the same loss curve and final digest, bit for bit, also
for a run killed and resumed. Exit 0 on success, 1 when a step failed (E_NAN_INF ...), 2 for
bad flags or a checkpoint of another run, 3 when --backend cannot run here.`,
		Example: `  tessera-qa train --model mlp --steps 50 --seed 1
  tessera-qa train --model mlp --steps 50 --mesh dp=2 --transport tcp --checkpoint-dir ck --checkpoint-every 10
  tessera-qa train --model mlp --steps 50 --mesh dp=2 --transport tcp --checkpoint-dir ck --resume
  tessera-qa train --model transformer-block --steps 20 --mesh dp=2,tp=2
  tessera-qa train --model fno --steps 10 --mesh dp=2,tp=2 --transport tcp
  tessera-qa train --model transformer-block --steps 10 --mesh pp=4 --schedule 1f1b --micro-batches 8 --transport tcp
  tessera-qa train --model moe --steps 20 --mesh dp=2,ep=4 --transport tcp
  tessera-qa train --model transformer-block --strategies`,
		Args: exactArgs(),
		RunE: verb(func(cmd *cobra.Command, args []string) error {
			dt, err := numerics.Parse(dtype)
			if err != nil || !dt.IsFloat() {
				return usage(cmd, "--dtype %q: want a float dtype", dtype)
			}
			if err := e.preflight(cmd, preflightLevel); err != nil {
				return err
			}
			if timeStep {
				return trainTimeStep(e, model, dt, dims, reps, jsonPath)
			}
			if strategiesTable {
				b, err := backend.Get(backendArg)
				if err != nil {
					return err
				}
				rows, err := strategies.Table(context.Background(), model, b, []dist.Mode{dist.Deterministic, dist.Exact}, strategies.Default)
				if err != nil {
					return err
				}
				w := e.human(jsonPath)
				size := fmt.Sprintf("global batch %d", strategies.Dims(model).Batch)
				if model == training.MoEModel {
					size = fmt.Sprintf("%d groups of %d tokens", training.DefaultMoE.Groups, training.DefaultMoE.GroupTokens)
				}
				fmt.Fprintf(w, "train --strategies: one step of %s (%s) from the same parameters, against one rank\n", model, size)
				strategies.Write(w, rows)
				return e.writeJSON(jsonPath, rows)
			}
			if dims.Batch < 0 {
				return usage(cmd, "--batch %d: want a positive global batch", dims.Batch)
			}
			if dims.Batch > 0 {
				// Without --time-step, --batch sets the global batch of the default model
				// (a dp world larger than the default batch of 32 needs one it divides).
				cfg.Dims = training.DefaultDims(model)
				cfg.Dims.Batch = dims.Batch
			}
			world := 1
			if meshArg != "" {
				m, err := mesh.ParseMesh(meshArg)
				if err != nil {
					return usage(cmd, "--mesh: %v", err)
				}
				for _, a := range m.Axes {
					if a.Name != "dp" && a.Name != "tp" && a.Name != "pp" && a.Name != "ep" {
						return usage(cmd, "--mesh %s: axis %q; train knows dp (data), tp (tensor), pp (pipeline) and ep (expert) parallelism", meshArg, a.Name)
					}
				}
				if m.AxisIndex("pp") >= 0 && m.AxisIndex("tp") >= 0 {
					return usage(cmd, "--mesh %s: pp combines with dp only (tp with pp is not built)", meshArg)
				}
				world = m.World()
				if (m.AxisIndex("ep") >= 0) != (model == training.MoEModel && m.AxisIndex("ep") >= 0) {
					return usage(cmd, "--mesh %s: an ep axis places experts; only --model moe has them", meshArg)
				}
				if model == training.MoEModel && (m.AxisIndex("tp") >= 0 || m.AxisIndex("pp") >= 0) {
					return usage(cmd, "--mesh %s: --model moe takes dp and ep axes", meshArg)
				}
				if m.AxisIndex("tp") >= 0 || m.AxisIndex("pp") >= 0 || m.AxisIndex("ep") >= 0 {
					cfg.Mesh = m
				}
				if topology != "" {
					tp, err := fabric.Parse(topology)
					if err != nil {
						return err
					}
					warns, err := fabric.Placement(tp, m)
					if err != nil {
						return err
					}
					for _, w := range warns {
						fmt.Fprintf(e.stderr, "train: warning: %s\n", w)
					}
				}
			}
			if cfg.Mesh == nil || cfg.Mesh.AxisIndex("pp") < 0 {
				if cmd.Flags().Changed("schedule") || cmd.Flags().Changed("micro-batches") || cmd.Flags().Changed("chunks") {
					return usage(cmd, "--schedule, --micro-batches and --chunks need a pp axis in --mesh")
				}
			} else if !slices.Contains(pipeline.Schedules, cfg.Schedule) {
				return usage(cmd, "--schedule %q: want one of %v", cfg.Schedule, pipeline.Schedules)
			} else if cfg.MicroBatches < 0 || cfg.Chunks < 0 {
				return usage(cmd, "--micro-batches and --chunks must be >= 0")
			}
			if join, ok := trainJoiners[transport]; ok {
				cfg.Join = join
			} else if transport != "inproc" && transport != "tcp" {
				return usage(cmd, "--transport %q: want inproc, tcp or shm", transport)
			}
			b, err := backend.Get(backendArg)
			if err != nil {
				return err
			}
			if err := b.Available(); err != nil {
				return errs.Wrap(errs.NoDevice, err, "backend %s", backendArg)
			}
			opt, err := training.NewOptimizer(optName, lr, b)
			if err != nil {
				return usage(cmd, "%v", err)
			}
			cfg.Model, cfg.DType, cfg.Backend, cfg.Optimizer = model, dt, b, opt
			ctx := context.Background()
			m, stopMetrics, err := e.startMetrics(metricsAddr, "train")
			if err != nil {
				return err
			}
			defer stopMetrics()
			var res *training.Result
			w := e.human(jsonPath)
			switch {
			case transport != "inproc" && launch.InJob():
				if os.Getenv(training.ResultEnv) == "" { // under an outside launcher: the log is the progress
					cfg.Progress = func(step int, loss float64) { fmt.Fprintf(e.stderr, "step %d loss %.6g\n", step, loss) }
				}
				if rank, err := strconv.Atoi(os.Getenv("RANK")); err == nil && m != nil {
					cfg.Progress = timedSteps(m, rank, cfg.Progress)
				}
				if res, err = training.Rank(ctx, cfg); err != nil {
					return err
				}
				if os.Getenv(training.ResultEnv) != "" {
					return nil // a self-launched rank: the starting process prints
				}
			case transport != "inproc" && world > 1:
				exe, err := collectivesExe()
				if err != nil {
					return errs.New(errs.Internal, "train: cannot find this program to start its ranks: %v", err)
				}
				var exit int
				res, exit, err = training.SelfLaunch(ctx, world, exe, trainArgs(cmd), e.stderr)
				if err != nil {
					return err
				}
				if exit != 0 {
					return &exitError{code: exit}
				}
			default:
				bar := newTrainBar(e.stderr, model, cfg.Steps)
				cfg.Progress = timedSteps(m, 0, bar.step)
				res, err = training.Inproc(ctx, cfg, world)
				bar.wait()
				if err != nil {
					return err
				}
			}
			onMesh := ""
			if res.Mesh != "" {
				onMesh = " (mesh " + res.Mesh + ")"
			}
			fmt.Fprintf(w, "train: %s %s, world %d%s, seed %d, steps %d..%d on %s\n", res.Model, res.DType, res.World, onMesh, res.Seed, res.StartStep+1, res.Steps, res.Device)
			for _, n := range res.Notices {
				fmt.Fprintf(w, "train: %s\n", n)
			}
			if res.StartStep > 0 {
				fmt.Fprintf(w, "train: resumed from the checkpoint of step %d\n", res.StartStep)
			}
			for _, l := range res.Losses {
				fmt.Fprintf(w, "step %4d  loss %.8g  (%s)\n", l.Step, l.Value, l.Bits)
			}
			if p := res.Pipeline; p != nil {
				fmt.Fprintf(w, "train: pipeline %s, %d ranks x %d chunks = %d stages, %d micro-batches; bubble %.4f in virtual time (formula %.4f)\n",
					p.Schedule, p.Ranks, p.Chunks, p.Stages, p.MicroBatches, p.Bubble, p.BubbleFormula)
			}
			fmt.Fprintf(w, "train: final digest %s\n", res.Digest)
			if cfg.ProfileDir != "" {
				if err := trainProfileSummary(w, cfg.ProfileDir); err != nil {
					return err
				}
			}
			return e.writeJSON(jsonPath, res)
		}),
	}
	f := cmd.Flags()
	f.StringVar(&model, "model", "mlp", "mlp, transformer-block, fno (a Fourier neural operator block) or moe (a mixture-of-experts layer; --mesh dp=N,ep=M)")
	f.IntVar(&cfg.Steps, "steps", 50, "optimizer steps")
	f.Uint64Var(&cfg.Seed, "seed", 1, "seed of the parameters and the data")
	f.StringVar(&meshArg, "mesh", "", "the ranks' mesh: dp=N (data parallel), dp=N,tp=M (and tensor parallel) or pp=P / dp=N,pp=P (pipeline parallel) (default: one rank)")
	f.StringVar(&cfg.Schedule, "schedule", "1f1b", "with a pp axis: the pipeline schedule, gpipe, 1f1b or interleaved")
	f.IntVar(&cfg.MicroBatches, "micro-batches", 0, "with a pp axis: micro-batches per step (0: 2 x pp)")
	f.IntVar(&cfg.Chunks, "chunks", 0, "with a pp axis: stages per rank (0: 1, or 2 for interleaved)")
	f.StringVar(&transport, "transport", "inproc", "inproc (goroutine ranks), tcp (process ranks) or shm (process ranks of one machine, shared-memory rings)")
	f.StringVar(&dtype, "dtype", "f32", "parameter and activation dtype")
	f.StringVar(&optName, "optimizer", "adamw", "adamw or sgd")
	f.Float64Var(&lr, "lr", 1e-2, "learning rate")
	f.StringVar(&backendArg, "backend", "cpu", "cpu or cuda")
	f.StringVar(&cfg.CheckpointDir, "checkpoint-dir", "", "`DIR` for checkpoints")
	f.IntVar(&cfg.CheckpointEvery, "checkpoint-every", 0, "commit a checkpoint every K steps (0: never)")
	f.StringVar(&cfg.ProfileDir, "profile", "", "record every rank's kernels and collectives into `DIR` (rank-N.json), write DIR/train.trace.json and print the per-rank summary with the straggler ranking")
	f.BoolVar(&cfg.Resume, "resume", false, "continue from the newest good checkpoint in --checkpoint-dir")
	f.IntVar(&cfg.KillAtStep, "kill-at-step", 0, "testing: SIGKILL this process right after step S (every rank)")
	f.MarkHidden("kill-at-step")
	f.BoolVar(&timeStep, "time-step", false, "time one step (forward+backward, AdamW) on the GPU against torch eager in the same command, at --batch/--seq/--width/--heads/--ffn")
	f.StringVar(&topology, "topology", "", "warn when a tp group of --mesh crosses a slow link of this topology (nodes=GxL, racks=RxGxL, nvl72; rank r on its rank r)")
	f.IntVar(&dims.Batch, "batch", 0, "global batch (rows for mlp, sequences for transformer-block); dp must divide it (default 32 for mlp)")
	f.IntVar(&dims.Seq, "seq", 0, "with --time-step: sequence length")
	f.IntVar(&dims.Width, "width", 0, "with --time-step: model width")
	f.IntVar(&dims.Heads, "heads", 0, "with --time-step: attention heads")
	f.IntVar(&dims.FFN, "ffn", 0, "with --time-step: feed-forward width (default 4 x width)")
	f.BoolVar(&strategiesTable, "strategies", false, "print the determinism-across-strategies table of --model (one step on one rank, dp, tp, pp and combinations to 8 ranks, deterministic and exact modes)")
	f.IntVar(&reps, "reps", 20, "with --time-step: timed steps per side (median)")
	addJSONFlag(cmd, &jsonPath)
	addPreflightFlag(cmd, &preflightLevel)
	addMetricsFlag(cmd, &metricsAddr)
	return cmd
}

// trainArgs is the verb's command line for its tcp ranks: every flag set, but --mesh's world
// comes from the launcher and --json is the starting process's.
func trainArgs(cmd *cobra.Command) []string {
	args := []string{"train"}
	cmd.Flags().Visit(func(fl *pflag.Flag) {
		if fl.Name == "json" {
			return
		}
		args = append(args, "--"+fl.Name+"="+fl.Value.String())
	})
	return args
}

// trainBar shows the steps and the last loss under a progress bar on a terminal; elsewhere
// the loss table printed at the end says it all.
type trainBar struct {
	p    *mpb.Progress
	bar  *mpb.Bar
	mu   sync.Mutex
	loss float64
}

func newTrainBar(w io.Writer, model string, steps int) *trainBar {
	t := &trainBar{}
	if !isTerminal(w) || steps <= 0 {
		return t
	}
	t.p = mpb.New(mpb.WithOutput(w), mpb.WithWidth(40))
	t.bar = t.p.AddBar(int64(steps),
		mpb.PrependDecorators(decor.Name("train "+model+" "), decor.CountersNoUnit("%d/%d")),
		mpb.AppendDecorators(decor.Any(func(decor.Statistics) string {
			t.mu.Lock()
			defer t.mu.Unlock()
			return fmt.Sprintf(" loss %.5g", t.loss)
		})))
	return t
}

func (t *trainBar) step(_ int, loss float64) {
	if t.bar == nil {
		return
	}
	t.mu.Lock()
	t.loss = loss
	t.mu.Unlock()
	t.bar.Increment()
}

func (t *trainBar) wait() {
	if t.p != nil {
		t.bar.Abort(false)
		t.p.Wait()
	}
}

// trainTimeStep is `train --time-step`: the engine's step and torch's on the GPU, one command.
func trainTimeStep(e *env, model string, dt numerics.DType, d training.Dims, reps int, jsonPath string) error {
	def := training.DefaultDims(model)
	if model == "transformer-block" {
		def = training.Dims{Batch: 8, Seq: 2048, Width: 1024, Heads: 16}
	}
	for _, f := range []struct {
		v *int
		d int
	}{{&d.Batch, def.Batch}, {&d.Seq, def.Seq}, {&d.Width, def.Width}, {&d.Heads, def.Heads},
		{&d.In, def.In}, {&d.Hidden, def.Hidden}, {&d.Out, def.Out}} {
		if *f.v == 0 {
			*f.v = f.d
		}
	}
	if d.FFN == 0 {
		d.FFN = 4 * d.Width
	}
	eng, o, err := benchSides("", 5*time.Minute)
	if err != nil {
		return err
	}
	defer o.Close()
	res, err := bench.TrainStep(eng, o, model, dt, d, 3, reps)
	if res != nil {
		w := e.human(jsonPath)
		fmt.Fprintf(w, "train step %s %s %+v on %s\n", res.Model, res.DType, res.Dims, res.Device)
		fmt.Fprintf(w, "  engine %.3f ms (forward+backward %.3f ms in %d kernels, AdamW %.3f ms in %d kernels), loss %.6g\n",
			res.EngineMS, res.GradMS, res.GradKernels, res.OptMS, res.OptKernels, res.EngineLoss)
		fmt.Fprintf(w, "  %s: %.3f ms, loss %.6g\n  ratio torch/engine %.3fx\n", res.Torch, res.TorchMS, res.TorchLoss, res.Ratio)
		for _, k := range res.Top {
			fmt.Fprintf(w, "    %8.3f ms  %-24s %-14s %s\n", k.MS, k.Kernel, k.Kind, k.Path)
		}
		if jerr := e.writeJSON(jsonPath, res); jerr != nil && err == nil {
			err = jerr
		}
	}
	return err
}

// trainProfileSummary merges the ranks' records of dir into one trace (a process per rank) and
// prints the per-rank breakdown, slowest first.
func trainProfileSummary(w io.Writer, dir string) error {
	ranks, origin, err := profiling.LoadRanks(dir)
	if err != nil {
		return err
	}
	path := filepath.Join(dir, "train.trace.json")
	if err := profiling.RankTrace(origin, ranks).WriteFile(path); err != nil {
		return err
	}
	st, err := profiling.ValidateFile(path)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "profile: %d ranks, trace %s (%d slices, valid)\n", len(ranks), path, st.Slices)
	profiling.WriteRankSummary(w, profiling.Summarize(ranks))
	return nil
}
