package collectives

import (
	"context"
	"fmt"

	"github.com/tessera-qa/tessera-qa/differential/gloo"
	"github.com/tessera-qa/tessera-qa/engine/dist"
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

// The gloo side of --vs gloo: torch.distributed with gloo in World Python processes
// (differential/gloo), timed the way timeIt times the engine (median over >= 20 repetitions of
// the slowest rank's time, a barrier before each, outside the clock), so one formula
// (Bandwidth) turns both into busbw.
func init() {
	GlooProbe = func(ctx context.Context) (string, error) {
		info, err := gloo.Probe(ctx, gloo.Config{})
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("torch %s (python %s, %s)", info.Torch, info.PythonVersion, info.Python), nil
	}
	GlooBench = glooBench
}

func glooBench(ctx context.Context, world int, op Op, red dist.RedOp, dt numerics.DType, sizes []int64, iters, warmup int) ([]float64, error) {
	out := make([]float64, len(sizes))
	var ask, at []int
	for i, b := range sizes {
		if b > 0 {
			ask, at = append(ask, int(b)), append(at, i)
		}
	}
	if len(ask) == 0 {
		return out, nil
	}
	r := ""
	if op.Reduces() {
		r = red.String()
	}
	rows, err := gloo.Bench(ctx, gloo.Config{World: world, Iters: max(iters, gloo.MinIters), Warmup: warmup}, string(op), r, dt.String(), ask)
	if err != nil {
		return nil, err
	}
	if len(rows) != len(ask) {
		return nil, errs.New(errs.Internal, "gloo bench %s: %d rows for %d sizes", op, len(rows), len(ask))
	}
	for j, row := range rows {
		if int64(row.Bytes) != sizes[at[j]] {
			return nil, errs.New(errs.Internal, "gloo bench %s: timed %d bytes for our %d", op, row.Bytes, sizes[at[j]])
		}
		out[at[j]] = row.Seconds
	}
	return out, nil
}
