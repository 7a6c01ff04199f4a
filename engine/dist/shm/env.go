//go:build unix

package shm

import (
	"context"
	"os"
	"strconv"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/dist/rdzv"
	"github.com/tessera-qa/tessera-qa/engine/errs"
)

// EnvRingBytes overrides each ring's capacity in bytes (Config.RingBytes).
const EnvRingBytes = "TESSERA_SHM_RING_BYTES"

// FromEnv is the one call a rank program makes: read the job from the environment (torchrun's
// variables, as tessera-qa launch sets them; see rdzv.ParseEnv), meet the other ranks
// (rdzv.Join) and map the rings. timeout bounds each of the two steps; 0 means
// TESSERA_RDZV_TIMEOUT or rdzv.DefaultTimeout. Closing the transport leaves the job's store.
func FromEnv(ctx context.Context, timeout time.Duration) (*Transport, error) {
	env, err := rdzv.FromOS()
	if err != nil {
		return nil, err
	}
	if timeout > 0 {
		env.Timeout = timeout
	}
	return Join(ctx, env)
}

// Join is FromEnv for an Env read elsewhere.
func Join(ctx context.Context, env rdzv.Env) (*Transport, error) {
	ring := 0
	if s := os.Getenv(EnvRingBytes); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 4096 {
			return nil, errs.New(errs.Input, "%s=%q: want a byte count of at least 4096", EnvRingBytes, s)
		}
		ring = n
	}
	sess, err := rdzv.Join(ctx, env)
	if err != nil {
		return nil, err
	}
	t, err := Connect(ctx, Config{Rank: env.Rank, World: env.World, Store: sess.Store, JobID: env.JobID,
		Timeout: env.Timeout, RingBytes: ring})
	if err != nil {
		sess.Close()
		return nil, err
	}
	t.sess = sess
	return t, nil
}
