package tcp

import (
	"context"
	"net"
	"os"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/dist/rdzv"
)

// EnvHost overrides the address a rank listens on and publishes (default: see
// Config.ListenHost), for hosts with several networks.
const EnvHost = "TESSERA_TCP_HOST"

// FromEnv is the one call a rank program makes: read the job from the environment (torchrun's
// variables, as tessera-qa launch sets them or as set by hand, or Slurm's under srun; see
// rdzv.ParseEnv), meet the other ranks (rdzv.Join) and connect the mesh. timeout bounds each
// of the two steps; 0 means TESSERA_RDZV_TIMEOUT or rdzv.DefaultTimeout. Closing the
// transport leaves the job's store (rank 0 stops serving it).
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
	sess, err := rdzv.Join(ctx, env)
	if err != nil {
		return nil, err
	}
	host := os.Getenv(EnvHost)
	if host == "" {
		master := env.MasterAddr
		if master == "" {
			master, _, _ = net.SplitHostPort(env.StoreAddr)
		}
		host = hostToward(master)
	}
	t, err := Connect(ctx, Config{Rank: env.Rank, World: env.World, Store: sess.Store, JobID: env.JobID,
		ListenHost: host, Timeout: env.Timeout})
	if err != nil {
		sess.Close()
		return nil, err
	}
	t.sess = sess
	return t, nil
}
