//go:build unix

// Package shm is the transport for ranks that are processes of one machine: every ordered pair
// of ranks (i -> j) gets a single-producer single-consumer ring buffer in a file under
// /dev/shm (os.TempDir where /dev/shm is absent), mapped by both processes, set up through the
// same rendezvous store as tcp (engine/dist/rdzv).
//
// Setup (Connect): every rank creates and maps its outgoing rings and publishes their paths in
// the store; every rank maps its incoming rings and unlinks their files at once, so that
// nothing is left in /dev/shm once the mesh is up, whatever happens to the processes later.
// Connect ends with a barrier. A ring's control page names its job, world, generation and both
// ranks; a mapping of another job or place is refused with E_COMM_INIT, and so are ranks on
// different hosts (their boot ids differ).
//
// Data: the byte stream in a ring is the tcp transport's wire format, a frame's 48-byte
// header (dist.Header with its own checksum) followed by its payload, so the communicator's
// checks (CRC of the payload, every header field) catch corruption exactly as on tcp. Send
// copies the frame into the ring in pieces as room appears (a frame larger than the ring
// streams through it) and returns once all of it is in the ring. One reader goroutine per
// incoming ring copies frames out into bounded queues per (communicator, sender), as tcp's
// connection readers do.
//
// Waiting: a side that finds the ring full (or empty) spins briefly, then sleeps on a futex
// word in the mapping that the other side bumps after progress, in slices of at most 20 ms,
// so that a deadline, a closed flag in the mapping or a peer process that no longer exists
// (kill(pid, 0), checked every 100 ms; not where the peer's pid was not visible at setup,
// another pid namespace) ends the wait with E_TIMEOUT_COMM naming the peer.
package shm

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/dist"
	"github.com/tessera-qa/tessera-qa/engine/dist/internal/framequeue"
	"github.com/tessera-qa/tessera-qa/engine/dist/rdzv"
	"github.com/tessera-qa/tessera-qa/engine/errs"
)

const (
	// DefaultQueueBytes and DefaultQueueFrames bound one (communicator, sender) queue.
	DefaultQueueBytes  = 64 << 20
	DefaultQueueFrames = 4096
	// MaxRingBytes and MinRingBytes bound the default ring (see Config.RingBytes).
	MaxRingBytes = 8 << 20
	MinRingBytes = 64 << 10
	// ringBudget is what all rings of a world may take together by default.
	ringBudget = 512 << 20
	// closeSendTimeout: Close waits this long for a Send still copying.
	closeSendTimeout = time.Second
)

// Config says where a rank is and how to meet the others.
type Config struct {
	Rank, World int
	// Store is the job's rendezvous store (rdzv.Join's Session.Store, or rdzv.Dial).
	Store rdzv.Store
	// JobID keeps jobs sharing a store apart.
	JobID string
	// Dir holds the ring files while they are set up (default /dev/shm, else os.TempDir).
	Dir string
	// RingBytes is each ring's data capacity, rounded down to a power of two (default: 512 MiB
	// shared by the world's n(n-1) rings, within MinRingBytes..MaxRingBytes).
	RingBytes int
	// Timeout bounds Connect (default rdzv.DefaultTimeout); ctx's earlier deadline wins.
	Timeout time.Duration
	// QueueBytes and QueueFrames bound each (communicator, sender) receive queue.
	QueueBytes, QueueFrames int
}

// Transport is one rank's endpoint of a shm world. It implements dist.Transport.
type Transport struct {
	rank, world int
	job         string
	ringBytes   int
	peers       []*peer // peers[rank] is the loopback "peer": frames a rank sends itself
	qBytes      int
	qFrames     int

	closing   chan struct{}
	closeOnce sync.Once
	wg        sync.WaitGroup
	sess      *rdzv.Session // owned when FromEnv made the transport

	sent, recvd atomic.Int64
	landed      atomic.Int64 // frames read straight into a posted buffer
	lentN       atomic.Int64 // frames handed out in place (dist.Lender)
}

var _ dist.Transport = (*Transport)(nil)

type peer struct {
	t    *Transport
	rank int
	out  *ring // this rank -> peer; nil for the loopback peer
	in   *ring // peer -> this rank

	wlock chan struct{} // one frame at a time, whole; Close keeps it
	hdr   [dist.HeaderSize]byte

	mu     sync.Mutex
	queues map[uint32]*framequeue.Queue

	lmu   sync.Mutex
	lands map[landKey]*landing // posted receive buffers (land.go)

	dead    chan struct{}
	deadErr error
	once    sync.Once
}

func (p *peer) queue(comm uint32) *framequeue.Queue {
	p.mu.Lock()
	defer p.mu.Unlock()
	q, ok := p.queues[comm]
	if !ok {
		q = framequeue.New(p.t.qBytes, p.t.qFrames)
		p.queues[comm] = q
	}
	return q
}

// fail marks the peer gone: pending and later calls for it return err.
func (p *peer) fail(err error) {
	p.once.Do(func() {
		p.deadErr = err
		close(p.dead)
	})
}

func (p *peer) err() error {
	select {
	case <-p.dead:
		return p.deadErr
	default:
		return nil
	}
}

// Name, Rank, World: dist.Transport.
func (t *Transport) Name() string { return "shm" }
func (t *Transport) Rank() int    { return t.rank }
func (t *Transport) World() int   { return t.world }

// RingBytes is the data capacity of each of this rank's rings.
func (t *Transport) RingBytes() int { return t.ringBytes }

// Stats are payload and header bytes moved since Connect.
type Stats struct {
	BytesSent, BytesReceived int64
	// Landed counts frames read from a ring straight into a receiver's buffer (dist.Lander).
	Landed int64
	// Lent counts frames handed out with their payloads still in the ring (dist.Lender).
	Lent int64
}

func (t *Transport) Stats() Stats {
	return Stats{t.sent.Load(), t.recvd.Load(), t.landed.Load(), t.lentN.Load()}
}

func (t *Transport) closedErr(doing string, other int) error {
	return errs.New(errs.TimeoutComm, "shm rank %d: %s rank %d on a closed transport", t.rank, doing, other)
}

func (t *Transport) isClosing() bool {
	select {
	case <-t.closing:
		return true
	default:
		return false
	}
}

// goneErr is the E_TIMEOUT_COMM of a wait that ended because of the peer or of ctx.
func (t *Transport) goneErr(p *peer, doing string, err error) error {
	var ce ctxErr
	switch {
	case errors.As(err, &ce):
		return errs.Wrap(errs.TimeoutComm, ce.err, "shm rank %d: %s rank %d", t.rank, doing, p.rank)
	case errors.Is(err, errStopped):
		return t.closedErr(doing, p.rank)
	case errors.Is(err, errLandingAbandoned):
		return errs.New(errs.TimeoutComm, "shm rank %d: %s rank %d: %v, so its stream ends here", t.rank, doing, p.rank, err)
	}
	return errs.New(errs.TimeoutComm, "shm rank %d: rank %d is gone: %v", t.rank, p.rank, err)
}

// Send copies f into the ring to rank `to` and returns once all of it is there (the caller may
// then reuse f.Payload). A Send cut short by ctx after part of the frame went in leaves the
// stream torn: that peer is then failed with E_TIMEOUT_COMM, on both sides.
func (t *Transport) Send(ctx context.Context, to int, f *dist.Frame) error {
	return t.send(ctx, to, f, false)
}

// SendSummed is Send that also computes f's payload checksum, while it copies the payload
// into the ring (dist.SummingSender): a frame of up to a chunk goes in whole, its header
// written after its payload; a larger one is checksummed first and streams as Send's do.
func (t *Transport) SendSummed(ctx context.Context, to int, f *dist.Frame) error {
	return t.send(ctx, to, f, true)
}

var _ dist.SummingSender = (*Transport)(nil)

func (t *Transport) send(ctx context.Context, to int, f *dist.Frame, summing bool) error {
	if to < 0 || to >= t.world {
		return errs.New(errs.Input, "shm rank %d: send to rank %d outside world %d", t.rank, to, t.world)
	}
	if f == nil {
		return errs.New(errs.Input, "shm rank %d: send of a nil frame to rank %d", t.rank, to)
	}
	n, err := f.PayloadLen()
	if err != nil {
		return errs.New(errs.Input, "shm rank %d: send to rank %d: bad frame header: %s", t.rank, to, msgOf(err))
	}
	if n != len(f.Payload) {
		return errs.New(errs.Input, "shm rank %d: send to rank %d: header announces %d payload bytes (%d x %s), payload has %d", t.rank, to, n, f.Count, f.DType, len(f.Payload))
	}
	if t.isClosing() {
		return t.closedErr("send to", to)
	}
	p := t.peers[to]
	whole := summing && to != t.rank && dist.HeaderSize+n <= int(p.out.chunk())
	if summing && !whole {
		f.CRC = dist.Checksum(f.Payload)
	}
	if to == t.rank {
		c := &dist.Frame{Header: f.Header, Payload: append([]byte(nil), f.Payload...)}
		if !p.queue(f.Comm).Push(c, ctx.Done(), t.closing) {
			if t.isClosing() {
				return t.closedErr("send to", to)
			}
			return errs.Wrap(errs.TimeoutComm, ctx.Err(), "shm rank %d: send to itself on comm %d", t.rank, f.Comm)
		}
		return nil
	}
	if err := p.err(); err != nil {
		return err
	}
	select {
	case p.wlock <- struct{}{}:
	case <-p.dead:
		return p.err()
	case <-t.closing:
		return t.closedErr("send to", to)
	case <-ctx.Done():
		return errs.Wrap(errs.TimeoutComm, ctx.Err(), "shm rank %d: send to rank %d", t.rank, to)
	}
	defer func() { <-p.wlock }()
	if err := p.err(); err != nil {
		return err
	}
	var w int64
	if whole {
		w, err = p.out.writeFrame(waitFor{ctx: ctx, stop: t.closing}, f, p.hdr[:])
	} else {
		f.MarshalHeader(p.hdr[:])
		w, err = p.out.write(waitFor{ctx: ctx, stop: t.closing}, p.hdr[:], f.Payload)
	}
	t.sent.Add(w)
	if err == nil {
		return nil
	}
	gone := t.goneErr(p, "send to", err)
	if w > 0 {
		// Half a frame is in the ring: nothing after it could be framed. The peer's reader
		// sees the closed flag once it has read what is there.
		atomic.StoreUint32(p.out.prodClosed, 1)
		kick(p.out.dataSeq)
		p.fail(errs.New(errs.TimeoutComm, "shm rank %d: a send to rank %d was cut short after %d of %d bytes (%s); the ring is unusable", t.rank, to, w, dist.HeaderSize+n, msgOf(gone)))
	} else if !errors.As(err, new(ctxErr)) && !errors.Is(err, errStopped) {
		p.fail(gone)
	}
	return gone
}

// Recv returns the next frame rank `from` sent on communicator comm. Frames that arrived
// before the peer went away are delivered before its E_TIMEOUT_COMM error.
func (t *Transport) Recv(ctx context.Context, comm uint32, from int) (*dist.Frame, error) {
	if from < 0 || from >= t.world {
		return nil, errs.New(errs.Input, "shm rank %d: receive from rank %d outside world %d", t.rank, from, t.world)
	}
	p := t.peers[from]
	q := p.queue(comm)
	for {
		if f := q.TryPop(); f != nil {
			return f, nil
		}
		select {
		case <-q.Avail():
		case <-p.dead:
			if f := q.TryPop(); f != nil {
				return f, nil
			}
			return nil, p.err()
		case <-t.closing:
			return nil, t.closedErr("receive from", from)
		case <-ctx.Done():
			return nil, errs.Wrap(errs.TimeoutComm, ctx.Err(), "shm rank %d: waiting for rank %d on comm %d", t.rank, from, comm)
		}
	}
}

// read is an incoming ring's reader: frames into queues until the ring ends.
func (t *Transport) read(p *peer) {
	defer t.wg.Done()
	w := waitFor{stop: t.closing}
	var hb [dist.HeaderSize]byte
	for {
		if _, err := p.in.read(w, hb[:], false); err != nil {
			p.fail(t.goneErr(p, "receive from", err))
			return
		}
		h, err := dist.UnmarshalHeader(hb[:])
		if err != nil {
			// The stream lost its framing: nothing after this can be trusted.
			p.fail(errs.Wrap(errs.Desync, err, "shm rank %d: from rank %d", t.rank, p.rank))
			return
		}
		n, _ := h.PayloadLen()
		l := p.claim(h, n)
		f, err := p.lent(l, h, n)
		var crc uint32
		switch {
		case err != nil:
		case f != nil:
			t.lentN.Add(1)
			f.DeferSum() // the reducer checksums the ring's bytes as it adds them
		case l != nil && !l.lend:
			f = &dist.Frame{Header: h, Payload: l.dst}
			f.SetLanded()
			crc, err = p.in.read(waitFor{stop: t.closing, abort: l.abort}, l.dst, true)
			close(l.done)
			t.landed.Add(1)
		default: // no post, or a loan whose payload does not lie in one piece: copied out
			f = &dist.Frame{Header: h, Payload: dist.PayloadBuffer(n)}
			crc, err = p.in.read(w, f.Payload, true)
		}
		if err != nil {
			p.fail(t.goneErr(p, "receive from", err))
			return
		}
		if !f.Deferred() {
			f.SetReceivedSum(crc)
		}
		t.recvd.Add(int64(dist.HeaderSize + n))
		if !p.queue(h.Comm).Push(f, t.closing, p.dead) {
			p.fail(t.closedErr("receive from", p.rank))
			return
		}
		// The frame's receiver was probably just woken onto this P; let it run now rather than
		// after this goroutine next blocks (a whole frame's copy later, or a futex sleep).
		runtime.Gosched()
	}
}

// lent reads the payload of the frame with header h in place when l is a loan for it: the frame
// goes out with the ring's bytes, unchecked: its consumer checksums them as it reads them. A
// nil frame and no error: l is no loan, or the payload does not lie in one piece (the stream
// is then untouched).
func (p *peer) lent(l *landing, h dist.Header, n int) (*dist.Frame, error) {
	if l == nil || !l.lend {
		return nil, nil
	}
	defer close(l.done)
	b, give, ok, err := p.in.inPlace(waitFor{stop: p.t.closing, abort: l.abort}, uint64(n))
	if err != nil || !ok {
		return nil, err
	}
	f := &dist.Frame{Header: h, Payload: b}
	f.SetLent(give)
	p.lmu.Lock()
	l.give = give
	p.lmu.Unlock()
	return f, nil
}

// Close ends the transport: pending and later calls fail, every peer sees this rank's closed
// flags (a Send of theirs waiting for room, or their reader waiting for data, ends with
// E_TIMEOUT_COMM), and the rings are unmapped once no goroutine of this transport touches
// them. A transport made by FromEnv also leaves the job's store.
func (t *Transport) Close() error {
	first := false
	t.closeOnce.Do(func() {
		first = true
		close(t.closing)
	})
	if !first {
		t.wg.Wait()
		return nil
	}
	for _, p := range t.peers {
		if p.in != nil {
			atomic.StoreUint32(p.in.consClosed, 1)
			kick(p.in.spaceSeq)
			kick(p.in.dataSeq) // our own reader, asleep on an empty ring
		}
		if p.out != nil {
			kick(p.out.spaceSeq) // our own Send, asleep on a full ring
		}
	}
	t.wg.Wait()
	var stuck []int
	for _, p := range t.peers {
		if p.out == nil {
			continue
		}
		// A Send in progress sees t.closing within one sleep slice; the lock is then kept,
		// so no later Send touches the mapping.
		select {
		case p.wlock <- struct{}{}:
			atomic.StoreUint32(p.out.prodClosed, 1)
			kick(p.out.dataSeq)
			p.out.unmap()
		case <-time.After(closeSendTimeout):
			stuck = append(stuck, p.rank) // left mapped: unmapping under a copy would crash
		}
	}
	// A payload lent out is in a call that sees t.closing and hands it back as it ends; a ring
	// still lending after the bound stays mapped (unmapping under a reader would crash).
	lendBound := time.Now().Add(closeSendTimeout)
	for _, p := range t.peers {
		if p.in != nil {
			for p.in.lentOut() && time.Now().Before(lendBound) {
				time.Sleep(time.Millisecond)
			}
			if !p.in.lentOut() {
				p.in.unmap()
			}
		}
		p.fail(t.closedErr("talk to", p.rank))
	}
	var err error
	if len(stuck) > 0 {
		err = errs.New(errs.TimeoutComm, "shm rank %d: a send to rank(s) %s did not end within %s of Close", t.rank, rdzv.FormatRanks(stuck), closeSendTimeout)
	}
	if t.sess != nil {
		err = errors.Join(err, t.sess.Close())
	}
	return err
}

// msgOf is an error's message without its code.
func msgOf(err error) string {
	var e *errs.Error
	if errors.As(err, &e) {
		return e.Msg
	}
	return err.Error()
}

func (t *Transport) String() string {
	return fmt.Sprintf("shm rank %d/%d job %s (rings of %d bytes)", t.rank, t.world, t.job, t.ringBytes)
}

// Recycle takes back a received frame's payload for later frames (dist.Recycler).
func (t *Transport) Recycle(f *dist.Frame) {
	if f.EndLoan() {
		return
	}
	dist.RecyclePayload(f.Payload)
	f.Payload = nil
}
