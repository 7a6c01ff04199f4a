package training

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/backend"
	"github.com/tessera-qa/tessera-qa/engine/checkpoint"
	"github.com/tessera-qa/tessera-qa/engine/dist"
	"github.com/tessera-qa/tessera-qa/engine/dist/mesh"
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
	"github.com/tessera-qa/tessera-qa/harness"
	"github.com/tessera-qa/tessera-qa/profiling"
)

// Optimizer updates parameters in place from their gradients and exports its state as named
// tensors and a step count, so that a checkpoint restores it bit for bit.
type Optimizer interface {
	Step(params, grads map[string]*tensor.Tensor) error
	State() (map[string]*tensor.Tensor, int)
	Restore(state map[string]*tensor.Tensor, step int) error
}

// Config is one rank's run.
type Config struct {
	Model string
	Dims  Dims // zero: DefaultDims(Model)
	DType numerics.DType
	Steps int
	Seed  uint64
	// Optimizer builds the optimizer for the model's parameters.
	Optimizer func() (Optimizer, error)
	Backend   backend.Backend
	// Comm is the data-parallel group (nil: one rank). Gradients and the loss are averaged
	// over it in deterministic mode.
	Comm *dist.Comm
	// Mesh, when it has a tp axis, makes Comm's ranks a dp x tp mesh (mesh.go): the step is
	// compiled for the mesh and each rank holds its blocks of the parameters.
	Mesh *mesh.Mesh
	// CheckpointDir, CheckpointEvery: commit a checkpoint after every K-th step (0: never).
	CheckpointDir   string
	CheckpointEvery int
	// Resume starts from the newest good checkpoint in CheckpointDir (a fresh start when
	// there is none).
	Resume bool
	// Timeout bounds each collective and checkpoint barrier (0: dist.DefaultTimeout).
	Timeout time.Duration
	// ProfileDir, when set, makes every rank record its steps, kernel launches and
	// collectives and write them to ProfileDir/rank-N.json (docs/profiling.md); the bits do
	// not change.
	ProfileDir string
	// Progress, when set, is called after every step with the (averaged) loss.
	Progress func(step int, loss float64)
	// KillAtStep, when > 0, makes the process SIGKILL itself right after that step (after
	// its checkpoint, if one is due): the chaos and resume specs' real crash.
	KillAtStep int
	// Observe, when set, is told on this rank (every rank, unlike Progress) of the checkpoint
	// it resumed from, of every step as soon as it is applied to the parameters, and of every
	// checkpoint once this rank's save returned (committed): the chaos harness records its
	// history from these calls and injects faults at them.
	Observe func(Observation)
	// Schedule, MicroBatches, Chunks: with a pp axis in Mesh, the pipeline schedule (gpipe,
	// 1f1b (default) or interleaved), the micro-batches per step (0: 2 x pp) and the stages per
	// rank (0: 1, or 2 for interleaved); training/pipeline.go.
	Schedule     string
	MicroBatches int
	Chunks       int
	// MoE sizes the moe model (zero: DefaultMoE); MoEUnpadded sends only the filled capacity
	// slots (counts first) instead of every expert's whole capacity buffer.
	MoE         MoEDims
	MoEUnpadded bool
	// NoOverlap, with pp and dp: average the gradients over dp after the whole step instead of
	// each stage's as soon as its last backward ran (the same bits either way).
	NoOverlap bool
	// CommMode is the reduction mode of FirstStep's communicators (zero: deterministic).
	CommMode dist.Mode
	// Wrap, when set, wraps this rank's transport (Rank, Inproc) before the communicator is
	// made: the chaos harness acts on the real outgoing frames through dist.Intercept.
	Wrap func(dist.Transport) dist.Transport
	// Join, when set, is how Rank joins the job this process is a rank of (nil: tcp.FromEnv):
	// train --transport shm passes shm's joiner, which meets through the same store.
	Join func(ctx context.Context) (dist.Transport, error)
}

// Observation is one thing a rank did, for Config.Observe.
type Observation struct {
	Kind     string   // "resume" (Step: the checkpoint's step, 0 for a fresh start), "step" or "checkpoint"
	Rank     int      // the rank that observed it
	Step     int      //
	LossBits string   // "step": the averaged loss's bits, as in Result.Losses
	Notices  []string // "resume": the checkpoint loader's notices (fallbacks past damaged steps)
	// Compute and Comm split a "step"'s wall time: time in collectives (waits for peers
	// included) and the rest.
	Compute, Comm time.Duration
	// PeerWait is, by rank of Config.Comm, how long the step's collectives on it waited on
	// each peer (dist.Comm.WaitedOn over the step): the signal of a slow link, which changes
	// no rank's compute. Nil without a communicator.
	PeerWait []time.Duration
}

// Result is what a run reports (rank 0's JSON).
type Result struct {
	Model     string   `json:"model"`
	DType     string   `json:"dtype"`
	World     int      `json:"world"`
	Mesh      string   `json:"mesh,omitempty"` // with tensor parallelism: the dp x tp mesh
	Seed      uint64   `json:"seed"`
	Transport string   `json:"transport,omitempty"` // the transport the ranks moved their frames over (none for one rank)
	Steps     int      `json:"steps"`
	StartStep int      `json:"start_step"` // steps already applied by the checkpoint resumed from
	Losses    []Loss   `json:"losses"`     // the steps this run executed
	Digest    string   `json:"digest"`     // of the final parameters, in parameter order
	Notices   []string `json:"notices,omitempty"`
	Device    string   `json:"device"`
	// Pipeline, with a pp axis: the schedule and its bubble in the last step.
	Pipeline *PipelineInfo `json:"pipeline,omitempty"`
}

// Loss is one step's loss, also as the bits of its float32/float64 value.
type Loss struct {
	Step  int     `json:"step"`
	Value float64 `json:"value"`
	Bits  string  `json:"bits"`
}

// Run trains cfg.Steps steps (fewer when resuming) on this rank and returns the result.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	if cfg.Dims == (Dims{}) {
		cfg.Dims = defaultDims(cfg)
	}
	if cfg.DType == 0 {
		cfg.DType = numerics.F32
	}
	if cfg.Steps < 0 || cfg.CheckpointEvery < 0 || cfg.Backend == nil || cfg.Optimizer == nil {
		return nil, errs.New(errs.Input, "train: need steps >= 0, checkpoint-every >= 0, a backend and an optimizer")
	}
	if (cfg.CheckpointEvery > 0 || cfg.Resume) && cfg.CheckpointDir == "" {
		return nil, errs.New(errs.Input, "train: --checkpoint-every and --resume need --checkpoint-dir")
	}
	// A fresh run into a folder that holds another run's checkpoints would fail at its first
	// checkpoint (a committed step is never rewritten) after training that far; say so before
	// any work, with both ways on (issue 21: every verb is rerunnable in place).
	if !cfg.Resume && cfg.CheckpointEvery > 0 {
		// step-NNNNNNNN/manifest.json: checkpoint.StepDirName's layout, so name order is step order.
		if old, _ := filepath.Glob(filepath.Join(cfg.CheckpointDir, "step-*", "manifest.json")); len(old) > 0 {
			return nil, errs.New(errs.Input, "train: %s already holds checkpoints of a run (%d committed steps, the newest %s): --resume continues it, another --checkpoint-dir starts afresh (a checkpoint is never overwritten)",
				cfg.CheckpointDir, len(old), filepath.Base(filepath.Dir(old[len(old)-1])))
		}
	}
	rank, world := 0, 1
	if cfg.Comm != nil {
		rank, world = cfg.Comm.Rank(), cfg.Comm.World()
	}
	timeout := cfg.Timeout
	if timeout <= 0 {
		timeout = dist.DefaultTimeout
	}
	cfg, st, err := newRankStep(cfg, rank, world, timeout)
	if err != nil {
		return nil, err
	}
	m := st.model()
	params, err := st.init(cfg.Seed)
	if err != nil {
		return nil, err
	}
	opt, err := cfg.Optimizer()
	if err != nil {
		return nil, err
	}
	res := &Result{Model: cfg.Model, DType: cfg.DType.String(), World: world, Mesh: st.mesh(), Seed: cfg.Seed, Steps: cfg.Steps, Device: cfg.Backend.DeviceClass()}
	if cfg.Comm != nil {
		res.Transport = dist.Base(cfg.Comm.Transport()).Name()
	}
	if cfg.Resume {
		ld, err := checkpoint.LoadLatest(cfg.CheckpointDir, rank, world)
		if err != nil {
			return nil, err
		}
		if ld != nil {
			res.Notices = ld.Notices
			if err := restore(ld.State, m, params, opt, cfg); err != nil {
				return nil, err
			}
			res.StartStep = ld.State.Step
		}
	}
	if cfg.Observe != nil {
		cfg.Observe(Observation{Kind: "resume", Rank: rank, Step: res.StartStep, Notices: res.Notices})
	}
	var rec *profiling.Recorder
	var prof profiling.RankRecord
	if cfg.ProfileDir != "" {
		rec = &profiling.Recorder{}
		st.profileTo(rec)
		prof.Rank = rank
	}
	var clock *commClock
	if cfg.Observe != nil {
		clock = &commClock{}
		if rec != nil {
			clock.next = rec
		}
		st.profileTo(clock)
	}
	var waited []time.Duration
	if cfg.Observe != nil && cfg.Comm != nil {
		waited = cfg.Comm.WaitedOn()
	}
	for step := res.StartStep + 1; step <= cfg.Steps; step++ {
		stepStart := time.Now()
		loss, grads, err := st.step(ctx, cfg.Seed, step, params)
		if err != nil {
			return nil, err
		}
		if err := st.agree(ctx, checkFinite(loss, grads, m, step, rank), step); err != nil {
			return nil, err
		}
		if err := opt.Step(params, grads); err != nil {
			return nil, errs.Wrap(errs.CodeOf(err), err, "train: step %d on rank %d: optimizer", step, rank)
		}
		if rec != nil {
			prof.Steps = append(prof.Steps, profiling.StepSpan{Step: step, Start: stepStart, Dur: time.Since(stepStart)})
		}
		lv := loss.Float64(0)
		res.Losses = append(res.Losses, Loss{Step: step, Value: lv, Bits: fmt.Sprintf("%x", loss.Data)})
		if cfg.Progress != nil {
			cfg.Progress(step, lv)
		}
		if cfg.Observe != nil {
			wall, comm := time.Since(stepStart), clock.lap()
			var peerWait []time.Duration
			if waited != nil {
				now := cfg.Comm.WaitedOn()
				peerWait = make([]time.Duration, len(now))
				for p := range now {
					peerWait[p] = now[p] - waited[p]
				}
				waited = now
			}
			cfg.Observe(Observation{Kind: "step", Rank: rank, Step: step, LossBits: res.Losses[len(res.Losses)-1].Bits,
				Compute: max(wall-comm, 0), Comm: comm, PeerWait: peerWait})
		}
		if cfg.CheckpointEvery > 0 && step%cfg.CheckpointEvery == 0 {
			if err := save(ctx, cfg, m, params, opt, step, rank, world, st.layoutText(), timeout); err != nil {
				return nil, err
			}
			if cfg.Observe != nil {
				cfg.Observe(Observation{Kind: "checkpoint", Rank: rank, Step: step})
			}
		}
		if step == cfg.KillAtStep {
			syscall.Kill(os.Getpid(), syscall.SIGKILL)
			time.Sleep(time.Minute) // the signal is on its way
		}
	}
	if ps, ok := st.(*pipeStep); ok {
		res.Pipeline = ps.info()
	}
	if res.Digest, err = st.digest(ctx, params); err != nil {
		return nil, err
	}
	if rec != nil {
		prof.Launches, _ = rec.Take()
		prof.Collectives = rec.Collectives()
		if err := profiling.WriteRankRecord(cfg.ProfileDir, prof); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// defaultDims is DefaultDims, or PipelineDims with a pp axis.
func defaultDims(cfg Config) Dims {
	if pipelined(cfg) {
		_, m, _ := pipeShape(cfg)
		return PipelineDims(cfg.Model, max(1, cfg.Mesh.Size("dp")), m)
	}
	return DefaultDims(cfg.Model)
}

// newRankStep is how this rank computes a step for cfg: pipeline (a pp axis), mesh (a tp axis)
// or data parallelism.
func newRankStep(cfg Config, rank, world int, timeout time.Duration) (Config, rankStep, error) {
	var st rankStep
	var err error
	if cfg.Model != MoEModel && cfg.Mesh != nil && cfg.Mesh.AxisIndex("ep") >= 0 {
		return cfg, nil, errs.New(errs.Unsupported, "train: mesh %s: an ep axis places experts; only model %s has them", cfg.Mesh, MoEModel)
	}
	switch {
	case cfg.Model == MoEModel:
		st, err = newMoEStep(cfg, timeout)
	case pipelined(cfg):
		st, err = newPipeStep(cfg, timeout)
	case cfg.Mesh != nil && cfg.Mesh.AxisIndex("tp") >= 0:
		st, err = newMeshStep(cfg, cfg.Mesh, timeout)
	default:
		st, err = newDataStep(cfg, rank, world, timeout)
	}
	return cfg, st, err
}

// Digest is the combined digest of the parameters in the model's order.
func Digest(m *Model, params map[string]*tensor.Tensor) string {
	ts := make([]*tensor.Tensor, len(m.Params))
	for i, n := range m.Params {
		ts[i] = params[n]
	}
	return harness.CombinedDigest(ts)
}

// checkFinite refuses to apply a step whose loss or gradients hold NaN or Inf: the parameters
// are never touched by one (E_NAN_INF names the tensor, the step and the rank).
func checkFinite(loss *tensor.Tensor, grads map[string]*tensor.Tensor, m *Model, step, rank int) error {
	check := func(name string, t *tensor.Tensor) error {
		for i, v := range t.Float64s() {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return errs.New(errs.NaNInf, "train: step %d on rank %d: %s[%d] = %v; the step is not applied", step, rank, name, i, v)
			}
		}
		return nil
	}
	if err := check("loss", loss); err != nil {
		return err
	}
	for _, n := range m.Params {
		if err := check("grad_"+n, grads[n]); err != nil {
			return err
		}
	}
	return nil
}

const (
	paramPrefix = "param/"
	optPrefix   = "opt/"
)

func save(ctx context.Context, cfg Config, m *Model, params map[string]*tensor.Tensor, opt Optimizer, step, rank, world int, layout string, timeout time.Duration) error {
	ts := map[string]*tensor.Tensor{}
	for _, n := range m.Params {
		ts[paramPrefix+n] = params[n]
	}
	os, optStep := opt.State()
	for k, v := range os {
		ts[optPrefix+k] = v
	}
	// The writer's bound trails the communicator's: a rank that goes silent in a checkpoint
	// barrier is then reported by the barrier itself (E_TIMEOUT_COMM naming the rank), not as
	// the writer's anonymous deadline (found by chaos's node/disconnect).
	w := checkpoint.Writer{Dir: cfg.CheckpointDir, Rank: rank, World: world, Layout: layout, Keep: 3, Timeout: timeout + 2*time.Second}
	if cfg.Comm != nil {
		w.Barrier = cfg.Comm.Barrier
	}
	st := checkpoint.State{Step: step, Tensors: ts, RNG: []uint64{cfg.Seed, uint64(optStep)},
		Meta: map[string]string{"model": m.Name, "dtype": m.DType.String()}}
	if err := w.Save(ctx, st); err != nil {
		return errs.Wrap(errs.CodeOf(err), err, "train: checkpoint at step %d on rank %d", step, rank)
	}
	return nil
}

func restore(st checkpoint.State, m *Model, params map[string]*tensor.Tensor, opt Optimizer, cfg Config) error {
	if st.Meta["model"] != m.Name || st.Meta["dtype"] != m.DType.String() || len(st.RNG) != 2 || st.RNG[0] != cfg.Seed {
		return errs.New(errs.Checkpoint, "train: checkpoint step %d is of model %s %s seed %v, this run is %s %s seed %d",
			st.Step, st.Meta["model"], st.Meta["dtype"], st.RNG, m.Name, m.DType, cfg.Seed)
	}
	for _, n := range m.Params {
		t, ok := st.Tensors[paramPrefix+n]
		if !ok || t.TypeString() != params[n].TypeString() {
			return errs.New(errs.Checkpoint, "train: checkpoint step %d: parameter %s missing or of another type", st.Step, n)
		}
		params[n] = t
	}
	os := map[string]*tensor.Tensor{}
	for k, v := range st.Tensors {
		if len(k) > len(optPrefix) && k[:len(optPrefix)] == optPrefix {
			os[k[len(optPrefix):]] = v
		}
	}
	return opt.Restore(os, int(st.RNG[1]))
}
