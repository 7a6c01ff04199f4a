package training

import (
	"context"
	"strconv"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/autodiff"
	"github.com/tessera-qa/tessera-qa/engine/backend"
	"github.com/tessera-qa/tessera-qa/engine/compiler"
	"github.com/tessera-qa/tessera-qa/engine/dist"
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/profile"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
)

// rankStep is how one rank computes a training step: dataStep (every rank the whole model, its
// slice of the batch, gradients averaged over Comm) or meshStep (mesh.go: blocks of the model on
// a dp x tp mesh).
type rankStep interface {
	model() *Model
	// init is this rank's initial parameters.
	init(seed uint64) (map[string]*tensor.Tensor, error)
	// step is the loss (the same on every rank) and this rank's final gradients.
	step(ctx context.Context, seed uint64, step int, params map[string]*tensor.Tensor) (*tensor.Tensor, map[string]*tensor.Tensor, error)
	// agree turns this rank's finiteness check into the verdict every rank reaches.
	agree(ctx context.Context, local error, step int) error
	// digest is the digest of the whole parameters, the same on every rank.
	digest(ctx context.Context, params map[string]*tensor.Tensor) (string, error)
	layoutText() string // for the checkpoint manifest
	mesh() string       // Result.Mesh: "" for data parallelism
	// profileTo makes the step report launches and collectives to sink.
	profileTo(sink profile.Sink)
}

// dataStep is data parallelism: every rank holds the whole model and runs the one-rank step on
// its slice of the global batch; the loss and gradients are averaged over Comm in
// deterministic mode.
type dataStep struct {
	m           *Model
	prog        *compiler.Program
	be          backend.Backend
	comm        *dist.Comm // nil: one rank
	rank, world int
	timeout     time.Duration
	sink        profile.Sink
}

func (s *dataStep) profileTo(sink profile.Sink) { s.sink = sink }

func newDataStep(cfg Config, rank, world int, timeout time.Duration) (*dataStep, error) {
	global := cfg.Dims.Batch
	if global%world != 0 {
		return nil, errs.New(errs.Input, "train: global batch %d does not split over %d data-parallel ranks", global, world)
	}
	m, err := Build(cfg.Model, cfg.DType, cfg.Dims, global/world)
	if err != nil {
		return nil, err
	}
	gg, err := autodiff.Grad(m.Graph, "loss", m.Params...)
	if err != nil {
		return nil, err
	}
	prog, err := compiler.Compile(gg, compiler.Options{})
	if err != nil {
		return nil, err
	}
	return &dataStep{m: m, prog: prog, be: cfg.Backend, comm: cfg.Comm, rank: rank, world: world, timeout: timeout}, nil
}

func (s *dataStep) model() *Model { return s.m }

func (s *dataStep) init(seed uint64) (map[string]*tensor.Tensor, error) { return s.m.Init(seed), nil }

func (s *dataStep) step(ctx context.Context, seed uint64, step int, params map[string]*tensor.Tensor) (*tensor.Tensor, map[string]*tensor.Tensor, error) {
	x, t := s.m.Batch(seed, step, s.rank, s.world)
	feed := map[string]*tensor.Tensor{"x": x, "target": t}
	for k, v := range params {
		feed[k] = v
	}
	var outs []*tensor.Tensor
	var err error
	if s.sink != nil {
		outs, err = backend.RunProfiled(s.be, s.prog, feed, s.sink)
	} else {
		outs, err = s.be.Run(s.prog, feed)
	}
	if err != nil {
		return nil, nil, errs.Wrap(errs.CodeOf(err), err, "train: step %d on rank %d", step, s.rank)
	}
	loss, grads := outs[0], map[string]*tensor.Tensor{}
	for i, name := range s.m.Params {
		grads[name] = outs[1+i]
	}
	if s.comm != nil {
		ts := append([]*tensor.Tensor{loss}, gradList(s.m, grads)...)
		t0, w0 := time.Now(), s.comm.Waited()
		if err := averageAll(ctx, s.comm, s.timeout, ts); err != nil {
			return nil, nil, errs.Wrap(errs.CodeOf(err), err, "train: step %d on rank %d: averaging gradients", step, s.rank)
		}
		if s.sink != nil {
			var n int64
			for _, t := range ts {
				n += int64(len(t.Data))
			}
			s.sink.Collective(profile.Collective{Op: "all_reduce (avg, buckets)", Bytes: n, Peers: s.world - 1, Mode: s.comm.Mode().String(), Start: t0, Dur: time.Since(t0), Wait: s.comm.Waited() - w0})
		}
	}
	return loss, grads, nil
}

// agree: the averaged loss and gradients are the same on every rank, and so is the verdict.
func (s *dataStep) agree(_ context.Context, local error, _ int) error { return local }

func (s *dataStep) digest(_ context.Context, params map[string]*tensor.Tensor) (string, error) {
	return Digest(s.m, params), nil
}

func (s *dataStep) layoutText() string { return "dp=" + strconv.Itoa(s.world) + " replicated" }

func (s *dataStep) mesh() string { return "" }

// averageAll replaces every tensor by its average over the group (deterministic mode: the
// same bits whatever order the contributions arrive in). Consecutive tensors of one dtype travel
// together up to compiler.BucketBytes (PyTorch DDP's buckets), so a step pays one collective's
// latency per bucket instead of one per tensor, with the same bits (Comm.AllReduceEach).
func averageAll(ctx context.Context, c *dist.Comm, timeout time.Duration, ts []*tensor.Tensor) error {
	return averageBuckets(ctx, c, timeout, ts, compiler.BucketBytes)
}

func averageBuckets(ctx context.Context, c *dist.Comm, timeout time.Duration, ts []*tensor.Tensor, capBytes int) error {
	for _, b := range buckets(ts, capBytes) {
		bufs := make([][]byte, len(b))
		for i, t := range b {
			bufs[i] = t.Data
		}
		cctx, cancel := context.WithTimeout(ctx, timeout)
		err := c.AllReduceEach(cctx, b[0].DType, bufs, dist.Avg)
		cancel()
		if err != nil {
			return err
		}
	}
	return nil
}

// buckets groups ts in order: a bucket holds consecutive tensors of one dtype whose bytes
// stay within capBytes together; a tensor larger than the cap travels alone. Every rank holds
// the same tensors in the same order, so every rank makes the same buckets.
func buckets(ts []*tensor.Tensor, capBytes int) [][]*tensor.Tensor {
	var out [][]*tensor.Tensor
	for _, t := range ts {
		if n := len(out); n > 0 {
			last := out[n-1]
			if last[0].DType == t.DType && bucketSize(last)+len(t.Data) <= capBytes {
				out[n-1] = append(last, t)
				continue
			}
		}
		out = append(out, []*tensor.Tensor{t})
	}
	return out
}

func bucketSize(b []*tensor.Tensor) int {
	n := 0
	for _, t := range b {
		n += len(t.Data)
	}
	return n
}

func gradList(m *Model, grads map[string]*tensor.Tensor) []*tensor.Tensor {
	out := make([]*tensor.Tensor, len(m.Params))
	for i, n := range m.Params {
		out[i] = grads[n]
	}
	return out
}

// The pipeline and MoE steps (issue 27) landed beside the profiler (issue 24) and do not yet
// pass the sink to their stages' runs: a --profile of a pp or ep mesh records step times per
// rank, not launches or collectives.
func (s *pipeStep) profileTo(profile.Sink) {}
func (s *moeStep) profileTo(profile.Sink)  {}
