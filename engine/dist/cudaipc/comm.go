// Package cudaipc is the `cuda` transport's communicator: ranks are processes on one node
// (several may share one GPU, which is what the one-GPU test machines have) and collectives
// work on device buffers that peers read in place through CUDA IPC.
//
// Two planes. The control plane is a host dist.Transport (tcp between processes; inproc for
// the simulated-device tests): small frames carrying which buffer to read, checked like every
// engine/dist frame (communicator, sequence, op, phase, sender, CRC) so a mismatched call is
// E_DESYNC and a silent peer E_TIMEOUT_COMM naming it. The data plane is the GPU: each rank
// maps its peers' buffers once (cuIpcOpenMemHandle, cached per buffer) and orders its stream
// against theirs with interprocess events (cuIpcOpenEventHandle + cuStreamWaitEvent).
//
// A collective is a few fences. A fence records this rank's event (all work enqueued so far),
// tells every peer so over the control plane, and makes this rank's stream wait for every
// peer's event of the same fence. Between fences the GPU work of one phase runs: copies
// (cuMemcpyDtoDAsync from a peer's mapped memory) and the reduction kernel of
// engine/dist/devreduce, which reads every rank's contribution through the mapped pointers in
// rank order and so gives the bits of the host transports. The last fence of every collective
// makes each rank's later work wait until the peers have finished reading its memory, so a
// caller may overwrite its buffers as soon as its stream reaches them. The host never waits
// for the GPU inside a collective: work is enqueued and the call returns; Synchronize waits
// (polling, bounded).
//
// Memory plane: CUDA IPC exports whole cuMemAlloc allocations. Buffers from Alloc are
// dedicated allocations that peers read in place; any other device pointer is first staged
// into the communicator's scratch allocation (one device copy). The scratch grows
// collectively: every rank computes the same size from the call's arguments.
//
// Rules: every rank calls the same collectives in the same order with matching arguments
// (count, dtype, reduction, root), as with NCCL; Free and Close are collective too, because a
// block may be freed only after every peer has unmapped it (the CUDA documentation makes
// anything else undefined). After a failure the communicator refuses further calls with the
// first error: its fences may be half done.
package cudaipc

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sort"
	"sync"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/backend/cuda"
	"github.com/tessera-qa/tessera-qa/engine/dist"
	"github.com/tessera-qa/tessera-qa/engine/dist/tcp"
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

// DefaultID is the communicator id of a DeviceComm's control frames ("CUDA"), distinct from
// the host world communicator (0) on a shared transport.
const DefaultID uint32 = 0x43554441

// eventSlots interprocess events per rank, used round-robin by fences. A slot is recorded
// again eventSlots fences later, and only once every peer's device has executed its wait on
// the earlier record (see fence), so a wait can never meet a later record than the one it was
// meant for, whether the driver captures the record when the wait is enqueued (as
// cuStreamWaitEvent documents) or when it runs. The host runs at most eventSlots-1 fences
// ahead of the slowest peer's device.
const eventSlots = 8

// Options configure a DeviceComm.
type Options struct {
	// Mode: deterministic (default) and fast both reduce in rank order with the devreduce
	// kernel (fast makes no promise but gets the same bits here); exact is E_UNSUPPORTED on the
	// device (use the host Comm).
	Mode dist.Mode
	// Timeout bounds every control-plane wait of one call; 0 means dist.DefaultTimeout.
	Timeout time.Duration
	// ID is the control frames' communicator id; 0 means DefaultID.
	ID uint32
}

// DeviceComm is one rank's communicator over device buffers.
type DeviceComm struct {
	dev         Device
	t           dist.Transport
	ownT        io.Closer // the transport Join opened, closed by Close
	opts        Options
	rank, world int
	sms         int

	mu      sync.Mutex // one call at a time
	seq     uint64
	fences  uint64
	broken  error
	closed  bool
	events  [eventSlots]cuda.Event   // this rank's interprocess events
	peerEv  [][eventSlots]cuda.Event // imported, by rank
	syncEv  cuda.Event               // Synchronize's own event
	nextID  uint64
	own     map[uint64]*ownBuf  // this rank's exportable allocations, by id
	scratch *ownBuf             // staging for pointers that are not Alloc'ed
	mapped  map[peerBuf]mapping // peers' allocations mapped here
}

type ownBuf struct {
	id     uint64
	ptr    uint64
	size   int
	handle cuda.IPCMemHandle
}

type peerBuf struct {
	rank int
	id   uint64
}

type mapping struct {
	addr uint64
	size uint64
}

// Buffer is device memory from Alloc: a dedicated allocation that peers read in place.
type Buffer struct {
	Ptr   uint64
	Bytes int
}

// Control frame phases (Header.Aux). Collectives use 1..3 for their fences.
const (
	phaseHello   = 100
	phaseGrow    = 110
	phaseGrown   = 111
	phaseFree    = 120
	phaseFreed   = 121
	phaseClose   = 130 // close frames carry sequence number 0: they follow no collective
	phaseClosed  = 131
	phaseBarrier = 140
)

const helloMagic = 0x49504331 // "IPC1"

// New sets up rank t.Rank()'s communicator on dev: it creates the rank's interprocess events
// and exchanges their handles with every peer over t (a collective: every rank calls New).
// A peer whose events cannot be opened (another node, IPC not supported) is E_COMM_INIT
// naming it.
func New(ctx context.Context, dev Device, t dist.Transport, opts Options) (*DeviceComm, error) {
	if opts.Timeout <= 0 {
		opts.Timeout = dist.DefaultTimeout
	}
	if opts.ID == 0 {
		opts.ID = DefaultID
	}
	c := &DeviceComm{dev: dev, t: t, opts: opts, rank: t.Rank(), world: t.World(), sms: dev.Info().SMs,
		own: map[uint64]*ownBuf{}, mapped: map[peerBuf]mapping{}, peerEv: make([][eventSlots]cuda.Event, t.World())}
	if c.world > 1<<15 || c.world < 1 {
		return nil, errs.New(errs.Input, "cuda transport: world of %d ranks", c.world)
	}
	var created []cuda.Event
	cleanup := func() {
		for _, e := range created {
			_ = dev.DestroyEvent(e)
		}
	}
	for i := range c.events {
		e, err := dev.NewEvent(true)
		if err != nil {
			cleanup()
			return nil, errs.Wrap(errs.CommInit, err, "cuda transport rank %d: interprocess event", c.rank)
		}
		c.events[i] = e
		created = append(created, e)
	}
	e, err := dev.NewEvent(false)
	if err != nil {
		cleanup()
		return nil, err
	}
	c.syncEv = e
	created = append(created, e)

	cl, done, err := c.begin(ctx, dist.OpBarrier)
	if err != nil {
		cleanup()
		return nil, err
	}
	defer done()
	hello := make([]byte, 8+eventSlots*64)
	binary.LittleEndian.PutUint32(hello[0:], helloMagic)
	binary.LittleEndian.PutUint16(hello[4:], uint16(c.world))
	binary.LittleEndian.PutUint16(hello[6:], eventSlots)
	for i, ev := range c.events {
		h, err := dev.ExportEvent(ev)
		if err != nil {
			cleanup()
			return nil, errs.New(errs.CommInit, "cuda transport rank %d: cannot export an interprocess event: %v", c.rank, err)
		}
		copy(hello[8+64*i:], h.Reserved[:])
	}
	got, err := cl.exchange(phaseHello, hello)
	if err != nil {
		cleanup()
		return nil, err
	}
	for p, b := range got {
		if p == c.rank {
			continue
		}
		if len(b) != len(hello) || binary.LittleEndian.Uint32(b) != helloMagic ||
			int(binary.LittleEndian.Uint16(b[4:])) != c.world || binary.LittleEndian.Uint16(b[6:]) != eventSlots {
			cleanup()
			return nil, errs.New(errs.CommInit, "cuda transport rank %d: rank %d answered the setup with something else (another world size or version)", c.rank, p)
		}
		for i := range eventSlots {
			var h cuda.IPCEventHandle
			copy(h.Reserved[:], b[8+64*i:])
			ev, err := dev.ImportEvent(h)
			if err != nil {
				cleanup()
				return nil, errs.New(errs.CommInit, "cuda transport rank %d: cannot open rank %d's interprocess event (ranks must be separate processes on one node: CUDA refuses a handle in the process that exported it): %v", c.rank, p, err)
			}
			c.peerEv[p][i] = ev
			created = append(created, ev)
		}
	}
	return c, nil
}

// Join is one rank's whole setup under a launcher (tessera-qa launch, torchrun, srun): the
// local rank's device (OpenLocal), the tcp transport from the environment (tcp.FromEnv,
// bounded by opts.Timeout when set) and New. Close closes the transport too.
func Join(ctx context.Context, opts Options) (*DeviceComm, error) {
	dev, err := OpenLocal()
	if err != nil {
		return nil, err
	}
	t, err := tcp.FromEnv(ctx, opts.Timeout)
	if err != nil {
		return nil, err
	}
	dc, err := New(ctx, dev, t, opts)
	if err != nil {
		t.Close()
		return nil, err
	}
	dc.ownT = t
	return dc, nil
}

// Rank and World place this member; Device is its GPU; Mode its reduction mode.
func (c *DeviceComm) Rank() int      { return c.rank }
func (c *DeviceComm) World() int     { return c.world }
func (c *DeviceComm) Device() Device { return c.dev }
func (c *DeviceComm) Mode() dist.Mode {
	return c.opts.Mode
}

// call is one operation in flight.
type call struct {
	c      *DeviceComm
	ctx    context.Context
	op     dist.Op
	seq    uint64
	start  time.Time
	talked bool // some control frame went out: a failure now leaves peers mid-protocol
}

// begin locks the communicator for one call that talks to the peers. done unlocks it.
func (c *DeviceComm) begin(ctx context.Context, op dist.Op) (*call, func(), error) {
	return c.beginCall(ctx, op, true)
}

// beginCall is begin; a local call (collective false) takes no sequence number.
func (c *DeviceComm) beginCall(ctx context.Context, op dist.Op, collective bool) (*call, func(), error) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, nil, errs.New(errs.Input, "cuda transport rank %d: %s on a closed communicator", c.rank, op)
	}
	if c.broken != nil {
		err := c.broken
		c.mu.Unlock()
		return nil, nil, errs.Wrap(errs.Internal, err, "cuda transport rank %d: %s refused: the communicator failed earlier", c.rank, op)
	}
	if collective {
		c.seq++
	}
	cl := &call{c: c, op: op, seq: c.seq, start: time.Now()}
	var cancel context.CancelFunc
	if d, ok := ctx.Deadline(); ok && time.Until(d) < c.opts.Timeout {
		cl.ctx, cancel = context.WithCancel(ctx)
	} else {
		cl.ctx, cancel = context.WithTimeout(ctx, c.opts.Timeout)
	}
	return cl, func() { cancel(); c.mu.Unlock() }, nil
}

// fail records err as the communicator's sticky failure and returns it.
func (cl *call) fail(err error) error {
	if err != nil && cl.c.broken == nil {
		cl.c.broken = err
	}
	return err
}

func (cl *call) where() string {
	return fmt.Sprintf("rank %d: %s #%d (comm %#x, cuda)", cl.c.rank, cl.op, cl.seq, cl.c.opts.ID)
}

func (cl *call) commErr(err error, peer int, doing string) error {
	if errors.Is(err, context.DeadlineExceeded) {
		return errs.New(errs.TimeoutComm, "%s: %s rank %d: nothing within %s (rank %d is silent or stuck)",
			cl.where(), doing, peer, time.Since(cl.start).Round(time.Millisecond), peer)
	}
	if errors.Is(err, context.Canceled) {
		return errs.New(errs.TimeoutComm, "%s: %s rank %d: cancelled", cl.where(), doing, peer)
	}
	return errs.Wrap(errs.TimeoutComm, err, "%s: %s rank %d", cl.where(), doing, peer)
}

// exchange sends payload to every peer and returns every rank's payload (this rank's own at
// its index). Frames are checked field by field: anything but this call's frame of this phase
// from that peer is E_DESYNC.
func (cl *call) exchange(phase uint32, payload []byte) ([][]byte, error) {
	c := cl.c
	got := make([][]byte, c.world)
	got[c.rank] = payload
	if c.world == 1 {
		return got, nil
	}
	cl.talked = true
	ctx, cancel := context.WithCancel(cl.ctx)
	defer cancel()
	var wg sync.WaitGroup
	var once sync.Once
	var first error
	for p := range c.world {
		if p == c.rank {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := cl.swap(ctx, p, phase, payload, got)
			if err != nil {
				once.Do(func() { first = err; cancel() })
			}
		}()
	}
	wg.Wait()
	if first != nil {
		return nil, cl.fail(first)
	}
	return got, nil
}

func (cl *call) swap(ctx context.Context, p int, phase uint32, payload []byte, got [][]byte) error {
	c := cl.c
	f := &dist.Frame{Header: dist.Header{Comm: c.opts.ID, Seq: cl.seq, Op: cl.op, Red: dist.RedNone, DType: numerics.I8,
		Src: uint16(c.rank), Aux: phase, Count: uint64(len(payload)), CRC: dist.Checksum(payload)}, Payload: payload}
	if err := c.t.Send(ctx, p, f); err != nil {
		return cl.commErr(err, p, "sending to")
	}
	g, err := c.t.Recv(ctx, c.opts.ID, p)
	if err != nil {
		return cl.commErr(err, p, "waiting for")
	}
	want := dist.Expect{Comm: c.opts.ID, Src: uint16(p), Seq: cl.seq, Op: cl.op, Red: dist.RedNone, DType: numerics.I8, Aux: phase, CheckAux: true, Count: -1}
	if fe := want.Check(g); fe != nil {
		return dist.DesyncError(cl.where()+" control frame", p, fe)
	}
	got[p] = g.Payload
	return nil
}

// fence orders this rank's stream after every peer's work so far and every peer's after this
// rank's (see the package comment). It carries payload to every peer and returns every
// rank's payload.
func (cl *call) fence(phase uint32, payload []byte) ([][]byte, error) {
	c := cl.c
	no := c.fences
	slot := int(no % eventSlots)
	if no >= eventSlots {
		// Every peer enqueued its wait on this slot's previous record (fence no-eventSlots)
		// before recording its fence no-eventSlots+1; once that record is complete on the
		// peer's device, so is the wait, and the slot may be recorded again.
		if err := cl.awaitPeers(no - eventSlots + 1); err != nil {
			return nil, cl.fail(err)
		}
	}
	c.fences++
	if err := c.dev.Record(c.events[slot]); err != nil {
		return nil, cl.fail(err)
	}
	msg := make([]byte, 8+len(payload))
	binary.LittleEndian.PutUint64(msg, no)
	copy(msg[8:], payload)
	got, err := cl.exchange(phase, msg)
	if err != nil {
		return nil, err
	}
	for p, b := range got {
		if len(b) < 8 || binary.LittleEndian.Uint64(b) != no {
			var theirs uint64
			if len(b) >= 8 {
				theirs = binary.LittleEndian.Uint64(b)
			}
			return nil, cl.fail(errs.New(errs.Desync, "%s: rank %d is at fence %d, this rank at %d", cl.where(), p, theirs, no))
		}
		got[p] = b[8:]
		if p == c.rank {
			continue
		}
		if err := c.dev.WaitEvent(c.peerEv[p][slot]); err != nil {
			return nil, cl.fail(err)
		}
	}
	return got, nil
}

// awaitPeers polls until every peer's record of fence no is complete on its device (the peer
// recorded it before this rank could reach this fence), bounded by the call's deadline.
func (cl *call) awaitPeers(no uint64) error {
	c := cl.c
	slot := int(no % eventSlots)
	pause := 10 * time.Microsecond
	for p := range c.world {
		if p == c.rank {
			continue
		}
		for {
			done, err := c.dev.Done(c.peerEv[p][slot])
			if err != nil {
				return err
			}
			if done {
				break
			}
			select {
			case <-cl.ctx.Done():
				return errs.New(errs.TimeoutComm, "%s: rank %d's device work up to fence %d did not finish within %s (rank %d's GPU work is stuck or very slow)",
					cl.where(), p, no, time.Since(cl.start).Round(time.Millisecond), p)
			case <-time.After(pause):
			}
			pause = min(2*pause, time.Millisecond)
		}
	}
	return nil
}

// Synchronize waits until every collective enqueued so far has finished on this rank's
// device. A stuck peer is E_TIMEOUT_COMM naming the ranks whose device work is not done.
func (c *DeviceComm) Synchronize(ctx context.Context) error {
	cl, done, err := c.beginCall(ctx, dist.OpBarrier, false)
	if err != nil {
		return err
	}
	defer done()
	return cl.fail(cl.drain())
}

// drain waits for this rank's stream, naming stuck peers on timeout.
func (cl *call) drain() error {
	c := cl.c
	if err := c.dev.Record(c.syncEv); err != nil {
		return err
	}
	err := c.dev.WaitDone(cl.ctx, c.syncEv, "collectives")
	if errs.CodeOf(err) != errs.Timeout {
		return err
	}
	var stuck []int
	if c.fences > 0 {
		slot := int((c.fences - 1) % eventSlots)
		for p := range c.world {
			if p == c.rank {
				continue
			}
			if ok, qerr := c.dev.Done(c.peerEv[p][slot]); qerr == nil && !ok {
				stuck = append(stuck, p)
			}
		}
	}
	if len(stuck) == 0 {
		return errs.New(errs.TimeoutComm, "rank %d (cuda): this rank's device work did not finish within %s (no peer is behind: a kernel of this rank is stuck)",
			c.rank, time.Since(cl.start).Round(time.Millisecond))
	}
	return errs.New(errs.TimeoutComm, "rank %d (cuda): device work did not finish within %s: waiting for rank(s) %v, whose device work up to fence %d has not finished",
		c.rank, time.Since(cl.start).Round(time.Millisecond), stuck, c.fences-1)
}

// Barrier returns once every rank has called it. It synchronises the hosts only, not the
// devices (benchmarks use it so that every rank starts a timed collective together).
func (c *DeviceComm) Barrier(ctx context.Context) error {
	cl, done, err := c.begin(ctx, dist.OpBarrier)
	if err != nil {
		return err
	}
	defer done()
	_, err = cl.exchange(phaseBarrier, nil)
	return err
}

// Alloc returns a dedicated device allocation of n bytes that peers read in place (no
// staging copy). It is local: peers map it the first time a collective names it.
func (c *DeviceComm) Alloc(ctx context.Context, n int) (Buffer, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || c.broken != nil {
		return Buffer{}, errs.New(errs.Input, "cuda transport rank %d: alloc on a closed or failed communicator", c.rank)
	}
	b, err := c.allocOwn(n)
	if err != nil {
		return Buffer{}, err
	}
	return Buffer{Ptr: b.ptr, Bytes: b.size}, nil
}

func (c *DeviceComm) allocOwn(n int) (*ownBuf, error) {
	p, err := c.dev.Alloc(n)
	if err != nil {
		return nil, err
	}
	b := &ownBuf{ptr: p, size: n}
	if c.world > 1 {
		if b.handle, err = c.dev.ExportMem(p); err != nil {
			_ = c.dev.Free(p)
			return nil, errs.New(errs.CommInit, "cuda transport rank %d: cannot export a %d-byte allocation through CUDA IPC: %v", c.rank, n, err)
		}
	}
	c.nextID++
	b.id = c.nextID
	c.own[b.id] = b
	return b, nil
}

// Free releases an Alloc'ed buffer. It is collective: every rank frees its corresponding
// buffer in the same order, so that every peer unmaps the block before its owner frees it.
func (c *DeviceComm) Free(ctx context.Context, b Buffer) error {
	cl, done, err := c.begin(ctx, dist.OpBarrier)
	if err != nil {
		return err
	}
	defer done()
	own := c.find(b.Ptr, b.Bytes)
	if own == nil || own.ptr != b.Ptr || own == c.scratch {
		return errs.New(errs.Input, "cuda transport rank %d: Free of 0x%x (%d bytes), which Alloc did not return", c.rank, b.Ptr, b.Bytes)
	}
	return cl.fail(cl.retire(own, phaseFree, phaseFreed))
}

// retire frees one of this rank's allocations collectively: drain the stream (so every
// peer's reads of it, which this stream waited for at their closing fences, are done), tell
// the peers which one, let them unmap theirs, then free.
func (cl *call) retire(own *ownBuf, phase, phaseDone uint32) error {
	c := cl.c
	if err := cl.drain(); err != nil {
		return err
	}
	var id uint64
	if own != nil {
		id = own.id
	}
	msg := binary.LittleEndian.AppendUint64(nil, id)
	got, err := cl.exchange(phase, msg)
	if err != nil {
		return err
	}
	for p, b := range got {
		if p == c.rank || len(b) != 8 {
			continue
		}
		key := peerBuf{p, binary.LittleEndian.Uint64(b)}
		if m, ok := c.mapped[key]; ok {
			if err := c.dev.CloseMem(m.addr); err != nil {
				return err
			}
			delete(c.mapped, key)
		}
	}
	if _, err := cl.exchange(phaseDone, nil); err != nil {
		return err
	}
	if own == nil {
		return nil
	}
	delete(c.own, own.id)
	return c.dev.Free(own.ptr)
}

// find returns the allocation of this rank that holds [p, p+n), or nil.
func (c *DeviceComm) find(p uint64, n int) *ownBuf {
	for _, b := range c.own {
		if p >= b.ptr && p+uint64(n) <= b.ptr+uint64(b.size) {
			return b
		}
	}
	return nil
}

// ensureScratch grows the staging allocation to at least need bytes. Every rank computes
// need from the call's arguments alone, so every rank grows in the same call; mismatched
// arguments surface as E_DESYNC in the exchanges.
//
// With one rank nobody else reads this rank's memory: the scratch is needed (and grown) only
// for a call that stages (overlapping buffers).
func (cl *call) ensureScratch(need int, stage bool) error {
	c := cl.c
	if (c.world == 1 && !stage) || (c.scratch != nil && c.scratch.size >= need) || need == 0 {
		return nil
	}
	size := max(need, 1<<20)
	if c.scratch != nil {
		size = max(size, 2*c.scratch.size)
	}
	old := c.scratch
	c.scratch = nil
	if err := cl.retire(old, phaseGrow, phaseGrown); err != nil {
		return err
	}
	b, err := c.allocOwn(size)
	if err != nil {
		return err
	}
	c.scratch = b
	return nil
}

// Close releases everything: every peer unmaps this rank's memory and events before they are
// freed. It is collective, also after a failure: the handshake skips whatever frames a failed
// collective left queued, and a dead or silent peer only delays the local cleanup until ctx's
// deadline (the communicator's timeout when ctx has none). Past it, memory a live peer still
// maps is freed anyway: give a slow peer a long enough ctx.
func (c *DeviceComm) Close(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	var cctx context.Context
	var cancel context.CancelFunc
	if _, ok := ctx.Deadline(); ok {
		cctx, cancel = context.WithCancel(ctx)
	} else {
		cctx, cancel = context.WithTimeout(ctx, c.opts.Timeout)
	}
	defer cancel()
	cl := &call{c: c, ctx: cctx, op: dist.OpBarrier, start: time.Now()}
	var first error
	note := func(err error) {
		if err != nil && first == nil {
			first = err
		}
	}
	if c.broken == nil {
		note(cl.drain())
	}
	// Peers stop touching this rank's memory before they answer phaseClose: they drained
	// their streams first.
	note(cl.handshake(phaseClose))
	for k, m := range c.mapped {
		note(c.dev.CloseMem(m.addr))
		delete(c.mapped, k)
	}
	for p := range c.peerEv {
		for i, e := range c.peerEv[p] {
			if e != 0 {
				note(c.dev.DestroyEvent(e))
				c.peerEv[p][i] = 0
			}
		}
	}
	note(cl.handshake(phaseClosed))
	note(c.release())
	if c.ownT != nil {
		note(c.ownT.Close())
	}
	if c.broken != nil {
		return errs.Wrap(errs.Internal, c.broken, "cuda transport rank %d: closed after a failure", c.rank)
	}
	return first
}

// handshake sends phase to every peer and waits for the same phase from each, skipping any
// other frame (leftovers of a failed collective).
func (cl *call) handshake(phase uint32) error {
	c := cl.c
	if c.world == 1 {
		return nil
	}
	var wg sync.WaitGroup
	errsOut := make([]error, c.world)
	for p := range c.world {
		if p == c.rank {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			f := &dist.Frame{Header: dist.Header{Comm: c.opts.ID, Op: dist.OpBarrier, DType: numerics.I8, Src: uint16(c.rank), Aux: phase, CRC: dist.Checksum(nil)}}
			if err := c.t.Send(cl.ctx, p, f); err != nil {
				errsOut[p] = cl.commErr(err, p, "closing: sending to")
				return
			}
			for {
				g, err := c.t.Recv(cl.ctx, c.opts.ID, p)
				if err != nil {
					errsOut[p] = cl.commErr(err, p, "closing: waiting for")
					return
				}
				if g.Op == dist.OpBarrier && g.Aux == phase && g.Seq == 0 {
					return
				}
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

// release frees this rank's allocations and events (peers' mappings must be gone, or dead).
func (c *DeviceComm) release() error {
	var first error
	note := func(err error) {
		if err != nil && first == nil {
			first = err
		}
	}
	for k, m := range c.mapped {
		note(c.dev.CloseMem(m.addr))
		delete(c.mapped, k)
	}
	for p := range c.peerEv {
		for i, e := range c.peerEv[p] {
			if e != 0 {
				note(c.dev.DestroyEvent(e))
				c.peerEv[p][i] = 0
			}
		}
	}
	ids := make([]uint64, 0, len(c.own))
	for id := range c.own {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	for _, id := range ids {
		note(c.dev.Free(c.own[id].ptr))
		delete(c.own, id)
	}
	c.scratch = nil
	for i, e := range c.events {
		if e != 0 {
			note(c.dev.DestroyEvent(e))
			c.events[i] = 0
		}
	}
	if c.syncEv != 0 {
		note(c.dev.DestroyEvent(c.syncEv))
		c.syncEv = 0
	}
	c.closed = true
	return first
}
