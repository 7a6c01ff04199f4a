package training

import (
	"context"
	"encoding/json"
	"io"
	"os"

	"github.com/tessera-qa/tessera-qa/engine/dist"
	"github.com/tessera-qa/tessera-qa/engine/dist/launch"
	"github.com/tessera-qa/tessera-qa/engine/dist/tcp"
	"github.com/tessera-qa/tessera-qa/engine/errs"
)

// ResultEnv names the file rank 0 of a self-launched tcp job writes its Result to.
const ResultEnv = "TESSERA_TRAIN_RESULT"

// Inproc runs cfg on world goroutine ranks over the in-process transport and returns rank 0's
// result; every rank must end with the same parameters (E_NONDETERMINISTIC otherwise).
func Inproc(ctx context.Context, cfg Config, world int) (*Result, error) {
	if world == 1 {
		return Run(ctx, cfg)
	}
	ts := dist.NewInproc(world)
	res := make([]*Result, world)
	errc := make(chan error, world)
	for r := range world {
		go func() {
			c := cfg
			var t dist.Transport = ts[r]
			if cfg.Wrap != nil {
				t = cfg.Wrap(t)
			}
			c.Comm = dist.NewComm(t, dist.Options{Mode: dist.Deterministic, Timeout: cfg.Timeout})
			if r != 0 {
				c.Progress = nil
			}
			var err error
			res[r], err = Run(ctx, c)
			if err != nil {
				ts[r].Close()
			}
			errc <- err
		}()
	}
	var first error
	for range world {
		if err := <-errc; err != nil && first == nil {
			first = err
		}
	}
	if first != nil {
		return nil, first
	}
	for r := 1; r < world; r++ {
		if res[r].Digest != res[0].Digest {
			return nil, errs.New(errs.Nondeterministic, "train: rank %d ended with parameters %s, rank 0 with %s", r, res[r].Digest, res[0].Digest)
		}
	}
	return res[0], nil
}

// Rank runs cfg as this process's rank of a job (torchrun's variables): rendezvous, the
// transport's connections (tcp's full mesh, or cfg.Join's), deterministic averaging. Rank 0
// writes its result to $ResultEnv when set.
func Rank(ctx context.Context, cfg Config) (*Result, error) {
	join := cfg.Join
	if join == nil {
		join = func(ctx context.Context) (dist.Transport, error) { return tcp.FromEnv(ctx, 0) }
	}
	t, err := join(ctx)
	if err != nil {
		return nil, err
	}
	defer t.Close()
	var tr dist.Transport = t
	if cfg.Wrap != nil {
		tr = cfg.Wrap(tr)
	}
	cfg.Comm = dist.NewComm(tr, dist.Options{Mode: dist.Deterministic, Timeout: cfg.Timeout})
	if cfg.Comm.Rank() != 0 {
		cfg.Progress = nil
	}
	res, err := Run(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if path := os.Getenv(ResultEnv); path != "" && cfg.Comm.Rank() == 0 {
		data, _ := json.Marshal(res)
		if err := os.WriteFile(path, data, 0o644); err != nil {
			return nil, errs.New(errs.Input, "train: writing the result: %v", err)
		}
	}
	return res, nil
}

// SelfLaunch starts world ranks of program args (this program's train verb) through
// engine/dist/launch and returns rank 0's result; exit is the first failing rank's exit code
// (its error line went to out). No rank process outlives the call.
func SelfLaunch(ctx context.Context, world int, program string, args []string, out io.Writer) (*Result, int, error) {
	res := &Result{}
	exit, err := launch.RunForResult(ctx, "train", world, program, args, ResultEnv, out, 0, res)
	if err != nil || exit != 0 {
		return nil, exit, err
	}
	return res, 0, nil
}
