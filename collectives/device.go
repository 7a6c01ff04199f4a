package collectives

import (
	"context"
	"slices"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/backend/cuda"
	"github.com/tessera-qa/tessera-qa/engine/dist"
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

// The device transports (cuda: engine/dist/cudaipc, nccl: engine/dist/nccl). Each rank is a
// process with a GPU (several may share one). A case runs as on the host transports, on the
// same seeded per-(rank, case) inputs, uploaded to device buffers: out of place, then in place
// (placed as nccl-tests places it), each result downloaded and checked against the same
// float64 reference and digested the same way, so a device row's digest compares with the
// inproc and tcp rows' of the same case. Times are CUDA events around each call (warm-up
// first, each timed call after a host barrier, the slowest rank's time per call, the median
// over calls). The ranks' records travel over a host communicator on the tcp transport the
// device communicator already uses for its control frames (another communicator id).

// DeviceComm is what the checks need from a device communicator: cudaipc.DeviceComm and
// nccl.Comm. Counts are NCCL's (per-rank for all_gather's send and reduce_scatter's receive,
// per-peer block for all_to_all); work is enqueued on the device's stream and Synchronize
// waits for it.
type DeviceComm interface {
	Rank() int
	World() int
	AllReduce(ctx context.Context, dt numerics.DType, send, recv uint64, count int, op dist.RedOp) error
	ReduceScatter(ctx context.Context, dt numerics.DType, send, recv uint64, count int, op dist.RedOp) error
	AllGather(ctx context.Context, dt numerics.DType, send, recv uint64, count int) error
	Broadcast(ctx context.Context, dt numerics.DType, send, recv uint64, count, root int) error
	AllToAll(ctx context.Context, dt numerics.DType, send, recv uint64, count int) error
	Synchronize(ctx context.Context) error
}

// DeviceMem is what the checks need from a rank's GPU: *cuda.Raw, or any cudaipc.Device.
type DeviceMem interface {
	Info() cuda.DeviceInfo
	Alloc(n int) (uint64, error)
	Free(p uint64) error
	CopyAsync(dst, src uint64, n int) error
	Upload(ctx context.Context, dst uint64, src []byte) error
	Download(ctx context.Context, dst []byte, src uint64) error
	NewEvent(interprocess bool) (cuda.Event, error)
	DestroyEvent(e cuda.Event) error
	Record(e cuda.Event) error
	WaitDone(ctx context.Context, e cuda.Event, what string) error
	Elapsed(start, end cuda.Event) (float64, error)
}

// DeviceRank is one rank of a run over a device transport.
type DeviceRank struct {
	Transport string // "cuda" or "nccl": the rows' transport
	Comm      DeviceComm
	Mem       DeviceMem
	// Host is a host communicator of the same world and rank (another id on the device
	// communicator's control transport): barriers before timed calls, and the gathering of
	// every rank's records.
	Host *dist.Comm
	// Alloc and Free give the collectives' buffers (cudaipc: DeviceComm.Alloc and its
	// collective Free, buffers peers read in place). Nil: Mem's.
	Alloc func(ctx context.Context, n int) (uint64, error)
	Free  func(ctx context.Context, p uint64, n int) error
}

func (d *DeviceRank) alloc(ctx context.Context, n int) (uint64, error) {
	if d.Alloc != nil {
		return d.Alloc(ctx, n)
	}
	return d.Mem.Alloc(n)
}

func (d *DeviceRank) free(ctx context.Context, p uint64, n int) error {
	if d.Free != nil {
		return d.Free(ctx, p, n)
	}
	return d.Mem.Free(p)
}

// IsDevice reports whether transport moves device buffers (cuda, nccl).
func IsDevice(transport string) bool { return transport == "cuda" || transport == "nccl" }

// deviceRun is one rank's run state: the timing events.
type deviceRun struct {
	*DeviceRank
	cfg        Config
	start, end cuda.Event
	timeout    time.Duration
}

// RunDeviceRank runs every case of cfg on this rank of d (every rank calls it with the same
// cfg), then gathers every rank's records over d.Host and returns the rows, the same on every
// rank. Exact mode is E_UNSUPPORTED (the device communicators do not implement it); injected
// delays and mismatched calls are host-transport tests (E_INPUT).
func RunDeviceRank(ctx context.Context, d *DeviceRank, cfg Config) ([]Row, error) {
	n := d.Comm.World()
	switch {
	case d.Host == nil || d.Host.World() != n || d.Host.Rank() != d.Comm.Rank():
		return nil, errs.New(errs.Internal, "collectives %s: the host communicator is not the device communicator's world", d.Transport)
	case cfg.Mode == dist.Exact:
		return nil, errs.New(errs.Unsupported, "collectives --transport %s: exact mode is not implemented on the device transports (run it on inproc or tcp)", d.Transport)
	case cfg.Delay > 0 || cfg.Mismatch != nil:
		return nil, errs.New(errs.Input, "collectives --transport %s: --delay and --mismatch act on host frames (use inproc or tcp)", d.Transport)
	case cfg.Iters < 0 || cfg.Warmup < 0:
		return nil, errs.New(errs.Input, "collectives: iterations %d and warm-up %d must not be negative", cfg.Iters, cfg.Warmup)
	}
	for _, cs := range cfg.Cases {
		if err := cs.check(n); err != nil {
			return nil, err
		}
	}
	run := &deviceRun{DeviceRank: d, cfg: cfg, timeout: cfg.Timeout}
	if run.timeout <= 0 {
		run.timeout = dist.DefaultTimeout
	}
	var err error
	if run.start, err = d.Mem.NewEvent(false); err != nil {
		return nil, err
	}
	defer d.Mem.DestroyEvent(run.start)
	if run.end, err = d.Mem.NewEvent(false); err != nil {
		return nil, err
	}
	defer d.Mem.DestroyEvent(run.end)
	recs := make([]byte, len(cfg.Cases)*recSize)
	for i, cs := range cfg.Cases {
		rec, err := run.runCase(ctx, cs)
		if err != nil {
			return nil, err
		}
		rec.put(recs[i*recSize:])
		if d.Comm.Rank() == 0 && cfg.Progress != nil {
			cfg.Progress(i+1, len(cfg.Cases))
		}
	}
	return gatherRows(ctx, d.Host, cfg, d.Transport, recs)
}

// ncclCount is the case's count as the device communicators take it (NCCL's convention).
func ncclCount(cs Case, n int) int {
	sendN, recvN, count := cs.Buffers(n)
	switch cs.Op {
	case AllGather:
		return sendN
	case ReduceScatter:
		return recvN
	case AllToAll:
		return count / n
	}
	return count
}

func (d *deviceRun) runCase(ctx context.Context, cs Case) (record, error) {
	var rec record
	c := d.Comm
	n, r := c.World(), c.Rank()
	dt, sz := cs.DType, cs.DType.Size()
	sendN, recvN, _ := cs.Buffers(n)
	cnt := ncclCount(cs, n)
	g := newGen(d.cfg.Seed, cs)
	v := newVerifier(cs, n, d.cfg.Mode, g)
	call := func(send, recv uint64) error {
		switch cs.Op {
		case AllReduce:
			return c.AllReduce(ctx, dt, send, recv, cnt, cs.Red)
		case AllGather:
			return c.AllGather(ctx, dt, send, recv, cnt)
		case ReduceScatter:
			return c.ReduceScatter(ctx, dt, send, recv, cnt, cs.Red)
		case Broadcast:
			return c.Broadcast(ctx, dt, send, recv, cnt, cs.Root)
		}
		return c.AllToAll(ctx, dt, send, recv, cnt)
	}
	// fetch waits for the stream (naming a stuck peer) and downloads n bytes at p.
	fetch := func(p uint64, n int) ([]byte, error) {
		if err := c.Synchronize(ctx); err != nil {
			return nil, err
		}
		b := make([]byte, n)
		return b, d.Mem.Download(ctx, b, p)
	}

	send := make([]byte, sendN*sz)
	g.fill(uint64(r), 0, send)
	poisoned := make([]byte, recvN*sz)
	poison(poisoned)
	// Every rank allocates the same buffers in the same order (cudaipc's Free is collective).
	sendBytes, recvBytes := max(len(send), 1), max(len(poisoned), 1)
	sendP, err := d.alloc(ctx, sendBytes)
	if err != nil {
		return rec, err
	}
	recvP, err := d.alloc(ctx, recvBytes)
	if err != nil {
		return rec, err
	}

	// Out of place: check the first call, then time.
	if err := d.Mem.Upload(ctx, sendP, send); err != nil {
		return rec, err
	}
	if err := d.Mem.Upload(ctx, recvP, poisoned); err != nil {
		return rec, err
	}
	if err := call(sendP, recvP); err != nil {
		return rec, err
	}
	recv, err := fetch(recvP, len(poisoned))
	if err != nil {
		return rec, err
	}
	rec.wrong = v.wrong(r, recv)
	rec.digest = digestOf(dt, recv)
	if rec.secs, err = d.timeIt(ctx, func() error { return call(sendP, recvP) }); err != nil {
		return rec, err
	}

	// In place, placed as the host path places it (run.go): all_gather's input is this
	// rank's slot of the output, reduce_scatter's output this rank's slot of the input (whose
	// device copy still holds the inputs: out-of-place calls only read it).
	var in, out uint64
	outBytes := recvN * sz
	switch cs.Op {
	case AllGather:
		buf := slices.Clone(poisoned)
		copy(buf[r*sendN*sz:], send)
		if err := d.Mem.Upload(ctx, recvP, buf); err != nil {
			return rec, err
		}
		in, out = recvP+uint64(r*sendN*sz), recvP
	case ReduceScatter:
		in, out = sendP, sendP+uint64(r*recvN*sz)
	default:
		src := send
		if cs.Op == Broadcast && r != cs.Root {
			src = poisoned
		}
		if err := d.Mem.Upload(ctx, recvP, src); err != nil {
			return rec, err
		}
		in, out = recvP, recvP
	}
	if err := call(in, out); err != nil {
		return rec, err
	}
	got, err := fetch(out, outBytes)
	if err != nil {
		return rec, err
	}
	rec.digestIP = digestOf(dt, got)
	if rec.digestIP == rec.digest {
		rec.wrongIP = rec.wrong
	} else {
		rec.wrongIP = v.wrong(r, got)
	}
	if rec.secsIP, err = d.timeIt(ctx, func() error { return call(in, out) }); err != nil {
		return rec, err
	}
	if err := v.meaningless(); err != nil {
		return rec, err
	}

	// The ceiling: rank 0 times a device copy of the row's bytes while the others wait.
	if b := int(cs.Bytes(n)); d.cfg.Iters > 0 && b > 0 {
		if err := c.Synchronize(ctx); err != nil {
			return rec, err
		}
		if err := d.Host.Barrier(ctx); err != nil {
			return rec, err
		}
		if r == 0 {
			if rec.copySecs, err = d.copyTime(ctx, b); err != nil {
				return rec, err
			}
		}
		if err := d.Host.Barrier(ctx); err != nil {
			return rec, err
		}
	}
	if err := d.free(ctx, recvP, recvBytes); err != nil {
		return rec, err
	}
	return rec, d.free(ctx, sendP, sendBytes)
}

// timeIt runs fn Warmup times, waits for the device, then Iters timed calls, each after a host
// barrier, timed by CUDA events recorded around it on this rank's stream. The result is
// timeReps': the median over calls of the slowest rank's time. 0 when Iters is 0.
func (d *deviceRun) timeIt(ctx context.Context, fn func() error) (float64, error) {
	if d.cfg.Iters == 0 {
		return 0, nil
	}
	for range d.cfg.Warmup {
		if err := fn(); err != nil {
			return 0, err
		}
	}
	if err := d.Comm.Synchronize(ctx); err != nil {
		return 0, err
	}
	return timeReps(ctx, d.Host, d.cfg.Iters, nil, func() (float64, error) {
		if err := d.Mem.Record(d.start); err != nil {
			return 0, err
		}
		if err := fn(); err != nil {
			return 0, err
		}
		if err := d.Mem.Record(d.end); err != nil {
			return 0, err
		}
		// Synchronize waits past the end event, bounded, naming a stuck peer.
		if err := d.Comm.Synchronize(ctx); err != nil {
			return 0, err
		}
		ms, err := d.Mem.Elapsed(d.start, d.end)
		return ms / 1e3, err
	})
}

// copyTime is the median time of a device-to-device copy of n bytes on this rank's GPU
// (Warmup untimed copies, then Iters timed by events), in seconds.
func (d *deviceRun) copyTime(ctx context.Context, n int) (float64, error) {
	a, err := d.Mem.Alloc(n)
	if err != nil {
		return 0, err
	}
	defer d.Mem.Free(a)
	b, err := d.Mem.Alloc(n)
	if err != nil {
		return 0, err
	}
	defer d.Mem.Free(b)
	wctx, cancel := context.WithTimeout(ctx, d.timeout)
	defer cancel()
	var times []float64
	for i := range d.cfg.Warmup + d.cfg.Iters {
		if err := d.Mem.Record(d.start); err != nil {
			return 0, err
		}
		if err := d.Mem.CopyAsync(b, a, n); err != nil {
			return 0, err
		}
		if err := d.Mem.Record(d.end); err != nil {
			return 0, err
		}
		if err := d.Mem.WaitDone(wctx, d.end, "a device copy"); err != nil {
			return 0, err
		}
		if i < d.cfg.Warmup {
			continue
		}
		ms, err := d.Mem.Elapsed(d.start, d.end)
		if err != nil {
			return 0, err
		}
		times = append(times, ms/1e3)
	}
	slices.Sort(times)
	k := len(times)
	if k%2 == 1 {
		return times[k/2], nil
	}
	return (times[k/2-1] + times[k/2]) / 2, nil
}
