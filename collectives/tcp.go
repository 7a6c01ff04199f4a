package collectives

import (
	"context"
	"io"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/dist"
	"github.com/tessera-qa/tessera-qa/engine/dist/launch"
	"github.com/tessera-qa/tessera-qa/engine/dist/rdzv"
	"github.com/tessera-qa/tessera-qa/engine/dist/tcp"
)

// ResultEnv names the file rank 0 of a self-launched job writes its Report to (SelfLaunch
// sets it); ranks started with it print nothing when they succeed.
const ResultEnv = "TESSERA_COLLECTIVES_RESULT"

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
func SelfLaunch(ctx context.Context, spec LaunchSpec) (*Report, int, error) {
	rep := &Report{}
	exit, err := launch.RunForResult(ctx, "collectives", spec.World, spec.Program, spec.Args, ResultEnv, spec.Output, spec.RdzvTimeout, rep)
	if err != nil || exit != 0 {
		return nil, exit, err
	}
	return rep, 0, nil
}
