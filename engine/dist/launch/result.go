package launch

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/dist/rdzv"
	"github.com/tessera-qa/tessera-qa/engine/errs"
)

// InJob reports whether this process was started as a rank of a job: torchrun's variables
// (RANK, WORLD_SIZE, as Run and torchrun set them, or by hand) or Slurm's (SLURM_PROCID).
func InJob() bool {
	for _, k := range []string{"RANK", "WORLD_SIZE", "SLURM_PROCID", "JOB_COMPLETION_INDEX"} {
		if _, ok := os.LookupEnv(k); ok {
			return true
		}
	}
	return false
}

// RunForResult starts world ranks of program with args on this node (Run: torchrun's
// variables, the store served here), with resultEnv naming a file that rank 0 writes its JSON
// result to, and decodes that file into v once every rank succeeded. exit is the first failing
// rank's exit code (0 when all succeeded; the ranks printed their own error lines to out).
// err is for a launch that could not happen or a result rank 0 did not leave; what names the
// verb in errors. rdzvTimeout bounds the ranks' rendezvous (0: 60 s). No rank outlives the call.
func RunForResult(ctx context.Context, what string, world int, program string, args []string, resultEnv string,
	out io.Writer, rdzvTimeout time.Duration, v any) (exit int, err error) {
	if world < 1 || world > rdzv.MaxWorld {
		return 2, errs.New(errs.Input, "%s: %d processes (want 1..%d)", what, world, rdzv.MaxWorld)
	}
	dir, err := os.MkdirTemp("", "tessera-"+what+"-")
	if err != nil {
		return 3, errs.New(errs.Input, "%s: temporary folder: %v", what, err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "rank0.json")
	if rdzvTimeout <= 0 {
		rdzvTimeout = 60 * time.Second
	}
	if out == nil {
		out = io.Discard
	}
	exit, err = Run(ctx, Spec{NProcPerNode: world, Program: program, Args: args,
		Env: []string{resultEnv + "=" + path}, Timeout: rdzvTimeout, Stdout: out, Stderr: out, Log: out})
	if err != nil || exit != 0 {
		return exit, err
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return 1, errs.New(errs.Internal, "%s: every rank succeeded but rank 0 left no result: %v", what, err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		return 1, errs.New(errs.Internal, "%s: rank 0's result: %v", what, err)
	}
	return 0, nil
}
