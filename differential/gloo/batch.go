package gloo

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
)

// Reply is one Request's answer in a Batch: every rank's output, or why there is none.
type Reply struct {
	Outs []*tensor.Tensor
	Err  error
}

// Batch runs the requests, all on cfg.World ranks, in one gloo group, one after the other: a
// table of collectives pays for one interpreter start and rendezvous (seconds of importing
// torch) instead of one per row. A request refused while planning, or by gloo, gets its
// E_UNSUPPORTED (or E_INPUT ...) reply and the others still run; a group that fails (a rank
// dies or hangs) fails every request that had not been refused.
func Batch(ctx context.Context, cfg Config, reqs []Request) []Reply {
	if cfg.World == 0 && len(reqs) > 0 {
		cfg.World = len(reqs[0].Inputs)
	}
	cfg = cfg.withDefaults()
	replies := make([]Reply, len(reqs))
	var plans []*planned
	var index []int // plans[k] answers reqs[index[k]]
	for i, r := range reqs {
		p, err := plan(cfg, r)
		if err != nil {
			replies[i].Err = err
			continue
		}
		plans, index = append(plans, p), append(index, i)
	}
	if len(plans) == 0 {
		return replies
	}
	j := job{Mode: "batch", World: cfg.World}
	for _, p := range plans {
		j.Items = append(j.Items, p.item)
	}
	what := fmt.Sprintf("a batch of %d collectives on %d ranks", len(plans), cfg.World)
	prepare := func(dir string) error {
		for k, i := range index {
			for r, t := range reqs[i].Inputs {
				if err := writeNPY(filepath.Join(dir, fmt.Sprintf("in%d_%d.npy", k, r)), t); err != nil {
					return errs.Wrap(errs.Input, err, "gloo %s: input of rank %d", plans[k].what, r)
				}
			}
		}
		return nil
	}
	collect := func(dir string, _ [][][]float64, refused map[int]string) error {
		for k, i := range index {
			p := plans[k]
			if msg, ok := refused[k]; ok {
				refusals.Store(p.key, msg)
				replies[i].Err = errs.New(errs.Unsupported, "gloo %s: %s", p.what, msg)
				continue
			}
			outs := make([]*tensor.Tensor, cfg.World)
			for r := range cfg.World {
				a, err := tensor.ReadNPYFile(filepath.Join(dir, fmt.Sprintf("out%d_%d.npy", k, r)))
				if err == nil {
					outs[r], err = a.As(p.dt)
				}
				if err != nil {
					replies[i].Err = errs.Wrap(errs.Internal, err, "gloo %s: output of rank %d", p.what, r)
					break
				}
			}
			if replies[i].Err == nil {
				replies[i].Outs, replies[i].Err = p.finish(outs)
			}
		}
		return nil
	}
	if err := run(ctx, cfg, j, what, prepare, collect); err != nil {
		if u, ok := err.(*unsupported); ok {
			err = errs.New(errs.Unsupported, "gloo %s: %s", what, u.msg)
		}
		for _, i := range index {
			if replies[i].Err == nil && replies[i].Outs == nil {
				replies[i].Err = err
			}
		}
	}
	return replies
}
