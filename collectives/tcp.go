package collectives

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/dist"
	"github.com/tessera-qa/tessera-qa/engine/dist/launch"
	"github.com/tessera-qa/tessera-qa/engine/dist/rdzv"
	"github.com/tessera-qa/tessera-qa/engine/dist/tcp"
	"github.com/tessera-qa/tessera-qa/engine/errs"
)

// ResultEnv names the file rank 0 of a self-launched job writes its Report to (SelfLaunch
// sets it); ranks started with it print nothing when they succeed.
const ResultEnv = "TESSERA_COLLECTIVES_RESULT"

// InJob reports whether this process was started as a rank of a job: torchrun's variables
// (RANK, WORLD_SIZE, as tessera-qa launch and torchrun set them, or by hand) or Slurm's
// (SLURM_PROCID under srun).
func InJob() bool {
	for _, k := range []string{"RANK", "WORLD_SIZE", "SLURM_PROCID"} {
		if _, ok := os.LookupEnv(k); ok {
			return true
		}
	}
	return false
}

// JobWorld reads the job's world size from the environment without joining it; bad
// variables (RANK outside WORLD_SIZE, a malformed MASTER_PORT, ...) are one E_INPUT line.
func JobWorld() (int, error) {
	e, err := rdzv.FromOS()
	if err != nil {
		return 0, err
	}
	return e.World, nil
}

// tcpFromEnv joins the job this process is a rank of over tcp (rendezvous, then a full
// mesh of TCP connections). timeout bounds each step (0: TESSERA_RDZV_TIMEOUT or its default).
func tcpFromEnv(ctx context.Context, timeout time.Duration) (dist.Transport, error) {
	t, err := tcp.FromEnv(ctx, timeout)
	if err != nil {
		return nil, err
	}
	return t, nil
}

// LaunchSpec is a self-launched tcp job on this node.
type LaunchSpec struct {
	World int
	// Program and Args start one rank (tessera-qa itself: os.Executable and the verb's
	// arguments); every rank joins the job (Run) and rank 0 writes its Report to $ResultEnv.
	Program string
	Args    []string
	// Output receives the ranks' prefixed output (their error lines) and the launcher's.
	Output io.Writer
	// RdzvTimeout bounds how long the ranks wait for each other (0: 60 s).
	RdzvTimeout time.Duration
}

// SelfLaunch starts spec.World ranks through engine/dist/launch (torchrun's variables, the
// rendezvous store served by the launcher), waits for every one of them, and returns rank 0's
// report. exit is the first failing rank's exit code (0 when all succeeded): then the ranks
// have printed their own error lines to Output and rep is nil. err is for a launch that could
// not happen (E_INPUT, E_COMM_INIT). No rank process outlives the call.
func SelfLaunch(ctx context.Context, spec LaunchSpec) (rep *Report, exit int, err error) {
	if spec.World < 1 || spec.World > rdzv.MaxWorld {
		return nil, 2, errs.New(errs.Input, "collectives: %d processes (want 1..%d)", spec.World, rdzv.MaxWorld)
	}
	dir, err := os.MkdirTemp("", "tessera-collectives-")
	if err != nil {
		return nil, 3, errs.New(errs.Input, "collectives: temporary folder: %v", err)
	}
	defer os.RemoveAll(dir)
	out := filepath.Join(dir, "rank0.json")
	to := spec.RdzvTimeout
	if to <= 0 {
		to = 60 * time.Second
	}
	w := spec.Output
	if w == nil {
		w = io.Discard
	}
	exit, err = launch.Run(ctx, launch.Spec{NProcPerNode: spec.World, Program: spec.Program, Args: spec.Args,
		Env: []string{ResultEnv + "=" + out}, Timeout: to, Stdout: w, Stderr: w, Log: w})
	if err != nil || exit != 0 {
		return nil, exit, err
	}
	data, err := os.ReadFile(out)
	if err != nil {
		return nil, 1, errs.New(errs.Internal, "collectives: every rank succeeded but rank 0 left no report: %v", err)
	}
	rep = &Report{}
	if err := json.Unmarshal(data, rep); err != nil {
		return nil, 1, errs.New(errs.Internal, "collectives: rank 0's report: %v", err)
	}
	return rep, 0, nil
}
