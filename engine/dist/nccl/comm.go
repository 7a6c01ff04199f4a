package nccl

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/backend/cuda"
	"github.com/tessera-qa/tessera-qa/engine/dist"
	"github.com/tessera-qa/tessera-qa/engine/dist/devreduce"
	"github.com/tessera-qa/tessera-qa/engine/dist/tcp"
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

// Device is what a Comm needs from its GPU; *cuda.Raw implements it. NCCL calls run inside
// Do, on the thread where the device's context is current (NCCL takes its device from the
// calling thread), and enqueue on Stream.
type Device interface {
	Info() cuda.DeviceInfo
	Do(f func() error) error
	Stream() uintptr
	Alloc(n int) (uint64, error)
	Free(p uint64) error
	CopyAsync(dst, src uint64, n int) error
	Launch(ptx, entry string, grid, threads int, args []uint64) error
	NewEvent(interprocess bool) (cuda.Event, error)
	DestroyEvent(e cuda.Event) error
	Record(e cuda.Event) error
	Done(e cuda.Event) (bool, error)
}

var _ Device = (*cuda.Raw)(nil)

// DefaultID is the control frames' communicator id ("NCCL").
const DefaultID uint32 = 0x4E43434C

// Options configure a Comm.
type Options struct {
	// Mode: deterministic (default: data-only NCCL calls plus the devreduce kernel) or fast
	// (ncclAllReduce / ncclReduceScatter; no promise about bits). Exact is E_UNSUPPORTED.
	Mode dist.Mode
	// Timeout bounds setup and every wait of one call; 0 means dist.DefaultTimeout.
	Timeout time.Duration
	// NoCallCheck skips the per-call agreement over the control transport (one host round
	// trip that turns mismatched calls into E_DESYNC instead of a hang ended by the timeout).
	NoCallCheck bool
	// ID is the control frames' communicator id; 0 means DefaultID.
	ID uint32
}

// Comm is one rank's NCCL communicator.
type Comm struct {
	a           *api
	dev         Device
	t           dist.Transport // control plane: the unique id, call checks (nil for world 1)
	ownT        io.Closer      // the transport Join opened, closed by Close
	opts        Options
	rank, world int

	mu      sync.Mutex
	comm    uintptr
	seq     uint64
	broken  error
	closed  bool
	scratch uint64
	scrSize int
	syncEv  cuda.Event
}

// Control frame phases (Header.Aux).
const (
	phaseID    = 200
	phaseCheck = 201
)

// New creates rank t.Rank()'s communicator of t.World() ranks on dev: rank 0 makes the unique
// id and sends it over t; every rank initialises non-blocking and polls until NCCL is ready,
// within opts.Timeout (ctx's earlier deadline wins), else aborts: E_COMM_INIT naming the rank
// and NCCL's last error. t may be nil for a world of one. A missing library is E_NO_DEVICE.
func New(ctx context.Context, dev Device, t dist.Transport, opts Options) (*Comm, error) {
	a, err := load()
	if err != nil {
		return nil, err
	}
	return newComm(ctx, a, dev, t, opts)
}

// Join is one rank's whole setup under a launcher (tessera-qa launch, torchrun, srun): the
// local rank's device (cuda.OpenLocalRaw: $TESSERA_CUDA_DEVICE, else LOCAL_RANK modulo the
// devices), the tcp transport from the environment as the control plane (tcp.FromEnv) and
// New. Close closes the transport too.
func Join(ctx context.Context, opts Options) (*Comm, error) {
	if _, err := load(); err != nil {
		return nil, err
	}
	raw, err := cuda.OpenLocalRaw()
	if err != nil {
		return nil, err
	}
	t, err := tcp.FromEnv(ctx, opts.Timeout)
	if err != nil {
		return nil, err
	}
	c, err := New(ctx, raw, t, opts)
	if err != nil {
		t.Close()
		return nil, err
	}
	c.ownT = t
	return c, nil
}

func newComm(ctx context.Context, a *api, dev Device, t dist.Transport, opts Options) (*Comm, error) {
	if opts.Timeout <= 0 {
		opts.Timeout = dist.DefaultTimeout
	}
	if opts.ID == 0 {
		opts.ID = DefaultID
	}
	c := &Comm{a: a, dev: dev, t: t, opts: opts, world: 1}
	if t != nil {
		c.rank, c.world = t.Rank(), t.World()
	}
	ctx, cancel := c.bound(ctx)
	defer cancel()
	start := time.Now()

	var id UniqueID
	if c.rank == 0 {
		if err := c.call(func() result { return a.ncclGetUniqueId(&id) }, true, "ncclGetUniqueId"); err != nil {
			return nil, err
		}
	}
	if c.world > 1 {
		if err := c.shareID(ctx, &id); err != nil {
			return nil, err
		}
	}
	cfg := newConfig()
	cfg.Blocking = 0
	var comm uintptr
	err := dev.Do(func() error {
		r := a.ncclCommInitRankConfig(&comm, int32(c.world), id, int32(c.rank), &cfg)
		if r != ncclSuccess && r != ncclInProgress {
			err := a.errorf(errs.CommInit, r, "nccl rank %d: ncclCommInitRankConfig(nranks=%d)", c.rank, c.world)
			if a.ncclGetLastError != nil {
				if msg := a.ncclGetLastError(comm); msg != "" {
					err = errs.New(errs.CommInit, "%s: %s", strings.TrimPrefix(err.Error(), string(errs.CommInit)+": "), msg)
				}
			}
			return err
		}
		return nil
	})
	c.comm = comm
	if err == nil {
		err = c.settle(ctx, true, fmt.Sprintf("ncclCommInitRankConfig (%d ranks)", c.world), start)
	}
	if err != nil {
		c.abort()
		return nil, err
	}
	if c.syncEv, err = dev.NewEvent(false); err != nil {
		c.abort()
		return nil, err
	}
	return c, nil
}

// bound gives ctx the communicator's timeout unless it has an earlier deadline.
func (c *Comm) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	if d, ok := ctx.Deadline(); ok && time.Until(d) < c.opts.Timeout {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, c.opts.Timeout)
}

// shareID sends rank 0's id to every rank over the control transport.
func (c *Comm) shareID(ctx context.Context, id *UniqueID) error {
	if c.rank == 0 {
		for p := 1; p < c.world; p++ {
			if err := c.send(ctx, p, 0, phaseID, id.Internal[:]); err != nil {
				return errs.Wrap(errs.CommInit, err, "nccl rank 0: sending the unique id to rank %d", p)
			}
		}
		return nil
	}
	b, err := c.recv(ctx, 0, 0, phaseID)
	if err != nil {
		return errs.Wrap(errs.CommInit, err, "nccl rank %d: waiting for rank 0's unique id", c.rank)
	}
	if len(b) != len(id.Internal) {
		return errs.New(errs.CommInit, "nccl rank %d: rank 0 sent a %d-byte unique id", c.rank, len(b))
	}
	copy(id.Internal[:], b)
	return nil
}

func (c *Comm) send(ctx context.Context, to int, seq uint64, phase uint32, payload []byte) error {
	f := &dist.Frame{Header: dist.Header{Comm: c.opts.ID, Seq: seq, Op: dist.OpBarrier, DType: numerics.I8,
		Src: uint16(c.rank), Aux: phase, Count: uint64(len(payload)), CRC: dist.Checksum(payload)}, Payload: payload}
	if err := c.t.Send(ctx, to, f); err != nil {
		return c.commErr(err, to, "sending to")
	}
	return nil
}

func (c *Comm) recv(ctx context.Context, from int, seq uint64, phase uint32) ([]byte, error) {
	f, err := c.t.Recv(ctx, c.opts.ID, from)
	if err != nil {
		return nil, c.commErr(err, from, "waiting for")
	}
	want := dist.Expect{Comm: c.opts.ID, Src: uint16(from), Seq: seq, Op: dist.OpBarrier, Red: dist.RedNone, DType: numerics.I8, Aux: phase, CheckAux: true, Count: -1}
	if fe := want.Check(f); fe != nil {
		return nil, dist.DesyncError(fmt.Sprintf("nccl rank %d: control frame", c.rank), from, fe)
	}
	return f.Payload, nil
}

func (c *Comm) commErr(err error, peer int, doing string) error {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return errs.New(errs.TimeoutComm, "nccl rank %d: %s rank %d: nothing within the timeout (rank %d is silent or stuck)", c.rank, doing, peer, peer)
	}
	return errs.Wrap(errs.TimeoutComm, err, "nccl rank %d: %s rank %d", c.rank, doing, peer)
}

// call runs one NCCL call on the device thread: ncclInProgress counts as success (the caller
// settles), anything else but ncclSuccess is an error.
func (c *Comm) call(f func() result, setup bool, what string) error {
	return c.dev.Do(func() error {
		if r := f(); r != ncclSuccess && r != ncclInProgress {
			return c.a.errorf(codeOf(r, setup), r, "nccl rank %d: %s", c.rank, what)
		}
		return nil
	})
}

// state is ncclCommGetAsyncError's answer.
func (c *Comm) state() (result, error) {
	var st result
	err := c.dev.Do(func() error {
		if r := c.a.ncclCommGetAsyncError(c.comm, &st); r != ncclSuccess {
			return c.a.errorf(errs.Internal, r, "nccl rank %d: ncclCommGetAsyncError", c.rank)
		}
		return nil
	})
	return st, err
}

// settle polls the communicator until it leaves ncclInProgress (a non-blocking communicator
// must reach ncclSuccess before the next call), failing at ctx's deadline.
func (c *Comm) settle(ctx context.Context, setup bool, what string, start time.Time) error {
	pause := 50 * time.Microsecond
	for {
		st, err := c.state()
		if err != nil {
			return err
		}
		switch st {
		case ncclSuccess:
			return nil
		case ncclInProgress:
		default:
			return c.failure(st, setup, what)
		}
		select {
		case <-ctx.Done():
			code := errs.TimeoutComm
			if setup {
				code = errs.CommInit
			}
			return errs.New(code, "nccl rank %d: %s still in progress after %s: a peer is missing or stuck; communicator aborted",
				c.rank, what, time.Since(start).Round(time.Millisecond))
		case <-time.After(pause):
		}
		pause = min(2*pause, 5*time.Millisecond)
	}
}

// failure is the error for an asynchronous failure, with NCCL's last error message.
func (c *Comm) failure(st result, setup bool, what string) error {
	msg := ""
	if c.a.ncclGetLastError != nil {
		_ = c.dev.Do(func() error { msg = c.a.ncclGetLastError(c.comm); return nil })
	}
	err := c.a.errorf(codeOf(st, setup), st, "nccl rank %d: %s", c.rank, what)
	if msg != "" {
		var e *errs.Error
		if errors.As(err, &e) {
			e.Msg += ": " + msg
		}
	}
	return err
}

// abort ends the communicator at once (ncclCommAbort also stops operations in flight).
func (c *Comm) abort() {
	if c.comm == 0 {
		return
	}
	comm := c.comm
	c.comm = 0
	_ = c.dev.Do(func() error { c.a.ncclCommAbort(comm); return nil })
}

// Abort aborts the communicator (for fault injection and shutdown after a failure): every
// later call fails.
func (c *Comm) Abort() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.abort()
	if c.broken == nil {
		c.broken = errs.New(errs.TimeoutComm, "nccl rank %d: communicator aborted", c.rank)
	}
}

// Rank, World and Mode describe the communicator; Version is the library's ("2.28.9").
func (c *Comm) Rank() int       { return c.rank }
func (c *Comm) World() int      { return c.world }
func (c *Comm) Mode() dist.Mode { return c.opts.Mode }

// op is one collective in flight.
type op struct {
	c     *Comm
	ctx   context.Context
	name  dist.Op
	start time.Time
}

// run executes one collective: lock, refuse a failed communicator, bound the waits, and abort
// on any NCCL failure so that no rank is left waiting in NCCL forever.
func (c *Comm) run(ctx context.Context, name dist.Op, body func(o *op) error) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return errs.New(errs.Input, "nccl rank %d: %s on a closed communicator", c.rank, name)
	}
	if c.broken != nil {
		return errs.Wrap(errs.Internal, c.broken, "nccl rank %d: %s refused: the communicator failed earlier", c.rank, name)
	}
	ctx, cancel := c.bound(ctx)
	defer cancel()
	o := &op{c: c, ctx: ctx, name: name, start: time.Now()}
	if err := body(o); err != nil {
		if code := errs.CodeOf(err); code == errs.Input || code == errs.DType || code == errs.Unsupported {
			return err // rejected before anything was enqueued or sent
		}
		c.abort()
		c.broken = err
		return err
	}
	return nil
}

// enqueue runs NCCL calls (a group when several) on the device thread and settles.
func (o *op) enqueue(what string, calls ...func() result) error {
	c := o.c
	if len(calls) == 0 {
		return nil
	}
	err := c.dev.Do(func() error {
		if len(calls) > 1 {
			if r := c.a.ncclGroupStart(); r != ncclSuccess {
				return c.a.errorf(errs.Internal, r, "nccl rank %d: %s: ncclGroupStart", c.rank, what)
			}
		}
		var first error
		for _, f := range calls {
			if r := f(); r != ncclSuccess && r != ncclInProgress && first == nil {
				first = c.a.errorf(codeOf(r, false), r, "nccl rank %d: %s", c.rank, what)
			}
		}
		if len(calls) > 1 {
			// The group is closed even after a failed call, so the thread's group state is
			// clean for the next user of the device.
			if r := c.a.ncclGroupEnd(); r != ncclSuccess && r != ncclInProgress && first == nil {
				first = c.a.errorf(codeOf(r, false), r, "nccl rank %d: %s: ncclGroupEnd", c.rank, what)
			}
		}
		return first
	})
	if err != nil {
		return err
	}
	return c.settle(o.ctx, false, what, o.start)
}

// agree checks, over the control transport, that every rank called the same collective with
// the same arguments: E_DESYNC naming the first rank that did not.
func (o *op) agree(dt numerics.DType, red dist.RedOp, count, root int) error {
	c := o.c
	if c.world == 1 || c.t == nil || c.opts.NoCallCheck {
		return nil
	}
	c.seq++
	mine := make([]byte, 0, 24)
	mine = append(mine, byte(o.name), byte(dt), byte(red), byte(c.opts.Mode))
	mine = binary.LittleEndian.AppendUint32(mine, uint32(root))
	mine = binary.LittleEndian.AppendUint64(mine, uint64(count))
	var wg sync.WaitGroup
	errsOut := make([]error, c.world)
	for p := range c.world {
		if p == c.rank {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := c.send(o.ctx, p, c.seq, phaseCheck, mine); err != nil {
				errsOut[p] = err
				return
			}
			theirs, err := c.recv(o.ctx, p, c.seq, phaseCheck)
			if err != nil {
				errsOut[p] = err
				return
			}
			if string(theirs) != string(mine) || len(theirs) != 16 {
				errsOut[p] = errs.New(errs.Desync, "nccl rank %d: %s #%d: rank %d called %s, this rank %s", c.rank, o.name, c.seq, p, describe(theirs), describe(mine))
			}
		}()
	}
	wg.Wait()
	for _, err := range errsOut {
		if err != nil {
			return err
		}
	}
	return nil
}

func describe(b []byte) string {
	if len(b) != 16 {
		return fmt.Sprintf("something else (%d bytes)", len(b))
	}
	return fmt.Sprintf("%s %s red=%s mode=%s root=%d count=%d", dist.Op(b[0]), numerics.DType(b[1]), dist.RedOp(b[2]),
		dist.Mode(b[3]), binary.LittleEndian.Uint32(b[4:]), binary.LittleEndian.Uint64(b[8:]))
}

func checkArgs(c *Comm, name dist.Op, dt numerics.DType, count int) error {
	if !dt.Valid() || dt.Size() == 0 {
		return errs.New(errs.DType, "nccl rank %d: %s: invalid dtype %s", c.rank, name, dt)
	}
	if count < 0 {
		return errs.New(errs.Input, "nccl rank %d: %s: negative count %d", c.rank, name, count)
	}
	return nil
}

func (c *Comm) checkReduce(name dist.Op, dt numerics.DType, red dist.RedOp) error {
	switch c.opts.Mode {
	case dist.Exact:
		return errs.New(errs.Unsupported, "nccl rank %d: %s: exact mode is not implemented on the device (use engine/dist's host communicator)", c.rank, name)
	case dist.Fast:
		if _, ok := dataTypeOf(dt); !ok {
			return errs.New(errs.DType, "nccl rank %d: %s: NCCL cannot reduce %s", c.rank, name, dt)
		}
		if _, ok := redOpOf(red); !ok {
			return errs.New(errs.Input, "nccl rank %d: %s: reduction %s is not one of sum, max, min, avg", c.rank, name, red)
		}
		return nil
	}
	return devreduce.Check(dt, red, c.world)
}

// ensureScratch grows the local staging allocation (no peer maps it: NCCL copies).
func (o *op) ensureScratch(n int) error {
	c := o.c
	if n <= c.scrSize {
		return nil
	}
	if c.scratch != 0 {
		if err := o.drain(); err != nil {
			return err
		}
		if err := c.dev.Free(c.scratch); err != nil {
			return err
		}
		c.scratch, c.scrSize = 0, 0
	}
	size := max(n, 1<<20, 2*c.scrSize)
	p, err := c.dev.Alloc(size)
	if err != nil {
		return err
	}
	c.scratch, c.scrSize = p, size
	return nil
}

// reduce launches the devreduce kernel over ins into out.
func (o *op) reduce(dt numerics.DType, red dist.RedOp, out uint64, count int, ins []uint64) error {
	if count == 0 {
		return nil
	}
	k, err := devreduce.Generate(dt, red, len(ins))
	if err != nil {
		return err
	}
	args, err := k.Args(out, count, ins)
	if err != nil {
		return err
	}
	return o.c.dev.Launch(k.PTX, k.Entry, devreduce.Grid(count, o.c.dev.Info().SMs), devreduce.Threads, args)
}

func chunk(count, n, j int) (lo, hi int) { return j * count / n, (j + 1) * count / n }

func overlap(a uint64, an int, b uint64, bn int) bool {
	return an > 0 && bn > 0 && a < b+uint64(bn) && b < a+uint64(an)
}

// exchange is one grouped round of byte transfers: to[q] goes to rank q, from[q] comes from
// rank q (this rank's own entry is a device copy). Every pair agrees on sizes because every
// rank computes them from the same arguments; empty transfers are skipped on both sides.
type xfer struct {
	ptr uint64
	n   int
}

func (o *op) exchange(what string, to, from []xfer) error {
	c := o.c
	var calls []func() result
	for q := range c.world {
		if q == c.rank {
			continue
		}
		if s := to[q]; s.n > 0 {
			calls = append(calls, func() result {
				return c.a.ncclSend(s.ptr, uint64(s.n), ncclUint8, int32(q), c.comm, c.dev.Stream())
			})
		}
		if r := from[q]; r.n > 0 {
			calls = append(calls, func() result {
				return c.a.ncclRecv(r.ptr, uint64(r.n), ncclUint8, int32(q), c.comm, c.dev.Stream())
			})
		}
	}
	if self := to[c.rank]; self.n > 0 && self.ptr != from[c.rank].ptr {
		if err := c.dev.CopyAsync(from[c.rank].ptr, self.ptr, self.n); err != nil {
			return err
		}
	}
	if len(calls) == 1 {
		// One call still goes in a group: send/recv pairs must not block each other.
		calls = append(calls, func() result { return ncclSuccess })
	}
	return o.enqueue(what, calls...)
}

// AllReduce reduces count elements of send over every rank into recv on every rank. In
// deterministic mode: every rank receives every rank's contribution to its chunk (grouped
// send/recv), reduces them in rank order with the devreduce kernel, and the reduced chunks
// are gathered (grouped send/recv again). recv may equal send.
func (c *Comm) AllReduce(ctx context.Context, dt numerics.DType, send, recv uint64, count int, red dist.RedOp) error {
	return c.run(ctx, dist.OpAllReduce, func(o *op) error {
		if err := checkArgs(c, dist.OpAllReduce, dt, count); err != nil {
			return err
		}
		if err := c.checkReduce(dist.OpAllReduce, dt, red); err != nil {
			return err
		}
		if err := o.agree(dt, red, count, 0); err != nil {
			return err
		}
		if count == 0 {
			return nil
		}
		if c.opts.Mode == dist.Fast {
			ndt, _ := dataTypeOf(dt)
			nop, _ := redOpOf(red)
			return o.enqueue("ncclAllReduce", func() result {
				return c.a.ncclAllReduce(send, recv, uint64(count), ndt, nop, c.comm, c.dev.Stream())
			})
		}
		n, me, size := c.world, c.rank, dt.Size()
		if n == 1 {
			return o.reduce(dt, red, recv, count, []uint64{send})
		}
		lo, hi := chunk(count, n, me)
		w := (count + n - 1) / n // slot per contribution in the scratch
		if err := o.ensureScratch(n * w * size); err != nil {
			return err
		}
		to, from := make([]xfer, n), make([]xfer, n)
		for q := range n {
			qlo, qhi := chunk(count, n, q)
			to[q] = xfer{send + uint64(qlo*size), (qhi - qlo) * size}
			from[q] = xfer{c.scratch + uint64(q*w*size), (hi - lo) * size}
		}
		if err := o.exchange("all_reduce: contributions", to, from); err != nil {
			return err
		}
		ins := make([]uint64, n)
		for q := range ins {
			ins[q] = from[q].ptr
		}
		if err := o.reduce(dt, red, recv+uint64(lo*size), hi-lo, ins); err != nil {
			return err
		}
		for q := range n {
			qlo, qhi := chunk(count, n, q)
			to[q] = xfer{recv + uint64(lo*size), (hi - lo) * size}
			from[q] = xfer{recv + uint64(qlo*size), (qhi - qlo) * size}
		}
		to[me] = xfer{}
		return o.exchange("all_reduce: results", to, from)
	})
}

// ReduceScatter reduces World()*count elements of send over every rank and leaves block r in
// rank r's recv (count elements).
func (c *Comm) ReduceScatter(ctx context.Context, dt numerics.DType, send, recv uint64, count int, red dist.RedOp) error {
	return c.run(ctx, dist.OpReduceScatter, func(o *op) error {
		if err := checkArgs(c, dist.OpReduceScatter, dt, count); err != nil {
			return err
		}
		if err := c.checkReduce(dist.OpReduceScatter, dt, red); err != nil {
			return err
		}
		if err := o.agree(dt, red, count, 0); err != nil {
			return err
		}
		if count == 0 {
			return nil
		}
		if c.opts.Mode == dist.Fast {
			ndt, _ := dataTypeOf(dt)
			nop, _ := redOpOf(red)
			return o.enqueue("ncclReduceScatter", func() result {
				return c.a.ncclReduceScatter(send, recv, uint64(count), ndt, nop, c.comm, c.dev.Stream())
			})
		}
		n, me, b := c.world, c.rank, count*dt.Size()
		if n == 1 {
			return o.reduce(dt, red, recv, count, []uint64{send})
		}
		if err := o.ensureScratch(n * b); err != nil {
			return err
		}
		to, from := make([]xfer, n), make([]xfer, n)
		for q := range n {
			to[q] = xfer{send + uint64(q*b), b}
			from[q] = xfer{c.scratch + uint64(q*b), b}
		}
		if err := o.exchange("reduce_scatter: contributions", to, from); err != nil {
			return err
		}
		ins := make([]uint64, n)
		for q := range ins {
			ins[q] = from[q].ptr
		}
		_ = me
		return o.reduce(dt, red, recv, count, ins)
	})
}

// AllGather places rank q's count elements of send at block q of recv on every rank
// (ncclAllGather on bytes; in place when send == recv + rank*count elements).
func (c *Comm) AllGather(ctx context.Context, dt numerics.DType, send, recv uint64, count int) error {
	return c.run(ctx, dist.OpAllGather, func(o *op) error {
		if err := checkArgs(c, dist.OpAllGather, dt, count); err != nil {
			return err
		}
		if err := o.agree(dt, dist.RedNone, count, 0); err != nil {
			return err
		}
		b := count * dt.Size()
		if b == 0 {
			return nil
		}
		return o.enqueue("ncclAllGather", func() result {
			return c.a.ncclAllGather(send, recv, uint64(b), ncclUint8, c.comm, c.dev.Stream())
		})
	})
}

// Broadcast copies root's count elements of send into recv on every rank (ncclBroadcast).
func (c *Comm) Broadcast(ctx context.Context, dt numerics.DType, send, recv uint64, count, root int) error {
	return c.run(ctx, dist.OpBroadcast, func(o *op) error {
		if err := checkArgs(c, dist.OpBroadcast, dt, count); err != nil {
			return err
		}
		if root < 0 || root >= c.world {
			return errs.New(errs.Input, "nccl rank %d: broadcast root %d outside world %d", c.rank, root, c.world)
		}
		if err := o.agree(dt, dist.RedNone, count, root); err != nil {
			return err
		}
		b := count * dt.Size()
		if b == 0 {
			return nil
		}
		return o.enqueue("ncclBroadcast", func() result {
			return c.a.ncclBroadcast(send, recv, uint64(b), ncclUint8, int32(root), c.comm, c.dev.Stream())
		})
	})
}

// AllToAll sends block j (count elements) of send to rank j, which places it at block r of
// its recv. ncclAlltoAll where the library has it, else grouped send/recv; overlapping
// buffers are staged first.
func (c *Comm) AllToAll(ctx context.Context, dt numerics.DType, send, recv uint64, count int) error {
	return c.run(ctx, dist.OpAllToAll, func(o *op) error {
		if err := checkArgs(c, dist.OpAllToAll, dt, count); err != nil {
			return err
		}
		if err := o.agree(dt, dist.RedNone, count, 0); err != nil {
			return err
		}
		n, b := c.world, count*dt.Size()
		if b == 0 {
			return nil
		}
		src := send
		if overlap(send, n*b, recv, n*b) {
			if err := o.ensureScratch(n * b); err != nil {
				return err
			}
			if err := c.dev.CopyAsync(c.scratch, send, n*b); err != nil {
				return err
			}
			src = c.scratch
		}
		if c.a.ncclAlltoAll != nil && n > 1 {
			return o.enqueue("ncclAlltoAll", func() result {
				return c.a.ncclAlltoAll(src, recv, uint64(b), ncclUint8, c.comm, c.dev.Stream())
			})
		}
		to, from := make([]xfer, n), make([]xfer, n)
		for q := range n {
			to[q] = xfer{src + uint64(q*b), b}
			from[q] = xfer{recv + uint64(q*b), b}
		}
		return o.exchange("all_to_all", to, from)
	})
}

// drain waits for this rank's stream, polling NCCL's asynchronous error too.
func (o *op) drain() error {
	c := o.c
	if err := c.dev.Record(c.syncEv); err != nil {
		return err
	}
	pause := 20 * time.Microsecond
	for {
		done, err := c.dev.Done(c.syncEv)
		if err != nil {
			return err
		}
		if done {
			return nil
		}
		if c.comm != 0 {
			st, err := c.state()
			if err != nil {
				return err
			}
			if st != ncclSuccess && st != ncclInProgress {
				return c.failure(st, false, fmt.Sprintf("%s: asynchronous error", o.name))
			}
		}
		select {
		case <-o.ctx.Done():
			return errs.New(errs.TimeoutComm, "nccl rank %d: device work not finished within %s (a peer is missing or stuck); communicator aborted",
				c.rank, time.Since(o.start).Round(time.Millisecond))
		case <-time.After(pause):
		}
		pause = min(2*pause, 2*time.Millisecond)
	}
}

// Synchronize waits until every collective enqueued so far has finished on the device. A
// timeout or an asynchronous NCCL error aborts the communicator.
func (c *Comm) Synchronize(ctx context.Context) error {
	return c.run(ctx, dist.OpBarrier, func(o *op) error { return o.drain() })
}

// Close finishes the communicator: wait for the stream, ncclCommFinalize (polled) and
// ncclCommDestroy; after a failure or past the deadline, ncclCommAbort instead.
func (c *Comm) Close(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	c.closed = true
	ctx, cancel := c.bound(ctx)
	defer cancel()
	o := &op{c: c, ctx: ctx, name: dist.OpBarrier, start: time.Now()}
	var first error
	if c.comm != 0 && c.broken == nil {
		first = o.drain()
		if first == nil && c.a.ncclCommFinalize != nil {
			first = c.call(func() result { return c.a.ncclCommFinalize(c.comm) }, false, "ncclCommFinalize")
			if first == nil {
				first = c.settle(ctx, false, "ncclCommFinalize", o.start)
			}
		}
		if first == nil {
			comm := c.comm
			first = c.call(func() result { return c.a.ncclCommDestroy(comm) }, false, "ncclCommDestroy")
			if first == nil {
				c.comm = 0
			}
		}
	}
	c.abort() // no-op after a clean destroy
	if c.scratch != 0 {
		if err := c.dev.Free(c.scratch); err != nil && first == nil {
			first = err
		}
		c.scratch = 0
	}
	if c.syncEv != 0 {
		if err := c.dev.DestroyEvent(c.syncEv); err != nil && first == nil {
			first = err
		}
		c.syncEv = 0
	}
	if c.ownT != nil {
		if err := c.ownT.Close(); err != nil && first == nil {
			first = err
		}
	}
	return first
}
