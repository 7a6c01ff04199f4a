package gloo

import (
	"context"
	"fmt"
	"math"
	"slices"

	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

// maxBenchBytes bounds one size of a bench (each rank holds about two buffers of it).
const maxBenchBytes = 1 << 30

// BenchRow is one size of a bench: the median wall time of one collective over Iters
// repetitions, and its spread. Bandwidths are the caller's to compute (nccl-tests' formula,
// the same code as for the engine), so both sides share one formula.
type BenchRow struct {
	Op, DType, Red string
	World          int
	// Bytes is nccl-tests' "size": Count elements of DType. Count is the elements of the op's
	// whole buffer (all_reduce's and broadcast's buffer, all_gather's receive buffer,
	// all_to_all's buffer), rounded down to a multiple of World for the ops that split it.
	Bytes, Count int
	// Seconds is the median over the timed repetitions of the repetition's time, the time of
	// the slowest rank; P10 and P90 the 10th and 90th percentiles (nearest rank).
	Seconds, P10, P90 float64
	Iters             int
}

// Bench times op over cfg.World gloo ranks for each byte size: cfg.Warmup untimed and cfg.Iters
// timed repetitions per size, each rank timing the call alone (time.perf_counter around it)
// after a barrier; the in-place ops (all_reduce, broadcast) get their input back before each
// barrier, outside the clock. Inputs are fresh random values (never zeros). red is "" for the
// data-only ops; broadcast's root is 0. All sizes run in one group.
//
// Errors as Collective's; avg is E_UNSUPPORTED (gloo has none, and timing the sum under its
// name would mislead).
func Bench(ctx context.Context, cfg Config, op, red, dtype string, sizes []int) ([]BenchRow, error) {
	cfg = cfg.withDefaults()
	n := cfg.World
	if err := checkOp(op, red, 0, n); err != nil {
		return nil, err
	}
	if !reduces(op) {
		red = ""
	}
	dt, err := numerics.Parse(dtype)
	if err != nil {
		return nil, err
	}
	if err := checkDType(op, dt); err != nil {
		return nil, err
	}
	if red == "avg" {
		return nil, errs.New(errs.Unsupported, "gloo bench %s/avg: gloo has no avg (ReduceOp.AVG is refused); time sum instead", op)
	}
	if cfg.Iters < MinIters || cfg.Warmup < 0 {
		return nil, errs.New(errs.Input, "gloo bench: %d timed and %d warm-up repetitions (want >= %d timed, >= 0 warm-up)", cfg.Iters, cfg.Warmup, MinIters)
	}
	if len(sizes) == 0 {
		return nil, errs.New(errs.Input, "gloo bench %s: no sizes", op)
	}
	counts := make([]int, len(sizes))
	for i, b := range sizes {
		c := b / dt.Size()
		if splits(op) {
			c -= c % n
		}
		if b <= 0 || b > maxBenchBytes || c == 0 {
			return nil, errs.New(errs.Input, "gloo bench %s: size %d bytes (want 1 element of %s per rank up to %d bytes)", op, b, dt, maxBenchBytes)
		}
		counts[i] = c
	}
	what := fmt.Sprintf("bench %s/%s on %d ranks", op, dt, n)
	if red != "" {
		what = fmt.Sprintf("bench %s/%s/%s on %d ranks", op, red, dt, n)
	}
	key := refusalKey(cfg.Python, op, red, dt)
	if msg, ok := refusals.Load(key); ok {
		return nil, errs.New(errs.Unsupported, "gloo %s: %s", what, msg)
	}

	var rows []BenchRow
	j := job{Mode: "bench", Op: op, Red: red, DType: dt.String(), World: n, Counts: counts, Iters: cfg.Iters, Warmup: cfg.Warmup}
	collect := func(_ string, times [][][]float64, _ map[int]string) error {
		for k, c := range counts {
			reps := make([]float64, cfg.Iters)
			for r, ts := range times[k] {
				if len(ts) != cfg.Iters {
					return errs.New(errs.Internal, "gloo %s: rank %d timed %d repetitions of size %d, want %d", what, r, len(ts), k, cfg.Iters)
				}
				for i, t := range ts {
					reps[i] = math.Max(reps[i], t)
				}
			}
			slices.Sort(reps)
			rows = append(rows, BenchRow{Op: op, DType: dt.String(), Red: red, World: n,
				Bytes: c * dt.Size(), Count: c, Seconds: median(reps),
				P10: percentile(reps, 0.10), P90: percentile(reps, 0.90), Iters: cfg.Iters})
		}
		return nil
	}
	err = run(ctx, cfg, j, what, func(string) error { return nil }, collect)
	if u, ok := err.(*unsupported); ok {
		refusals.Store(key, u.msg)
		return nil, errs.New(errs.Unsupported, "gloo %s: %s", what, u.msg)
	}
	if err != nil {
		return nil, err
	}
	return rows, nil
}

// median of sorted values.
func median(s []float64) float64 {
	m := len(s) / 2
	if len(s)%2 == 1 {
		return s[m]
	}
	return (s[m-1] + s[m]) / 2
}

// percentile of sorted values, nearest rank.
func percentile(s []float64, p float64) float64 {
	i := int(math.Ceil(p*float64(len(s)))) - 1
	return s[max(0, min(i, len(s)-1))]
}
