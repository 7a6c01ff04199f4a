// Package tcp is the transport for ranks that are processes, on one host (loopback) or on a
// cluster: a full mesh of TCP connections, one per pair of ranks, set up through the
// rendezvous store (engine/dist/rdzv).
//
// Setup (Connect): every rank listens on an ephemeral port, publishes host:port in the store,
// dials every lower rank and accepts every higher one. A handshake carries the job id, the
// world size, both ranks and the generation (how many transports this rank has opened in the
// job), so a stray or mismatched peer is refused with E_COMM_INIT. Connect ends with a
// barrier: it returns on every rank only once the whole mesh is up.
//
// Data: a frame is its 48-byte header (dist.Header, with its own checksum) followed by
// Count*DType.Size() payload bytes. Send writes the frame whole under the connection's write
// lock and returns when the kernel has it, so the caller may reuse the payload at once. One
// reader goroutine per connection routes frames into a bounded queue per (communicator,
// sender); a full queue pauses that connection (TCP backpressure). Frames of one sender on
// one communicator arrive in order; frames of different communicators do not wait for each
// other unless one communicator lets QueueBytes pile up unreceived.
//
// Failure: a peer whose connection ends (its process died, or it closed its transport) fails
// every pending and later Recv from it and Send to it at once with E_TIMEOUT_COMM naming it;
// frames it sent before are still delivered first. Close flushes nothing it has not written,
// half-closes every connection so that peers see a clean end of stream, drains briefly, and
// returns with no goroutine left behind.
package tcp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/dist"
	"github.com/tessera-qa/tessera-qa/engine/dist/internal/framequeue"
	"github.com/tessera-qa/tessera-qa/engine/dist/rdzv"
	"github.com/tessera-qa/tessera-qa/engine/errs"
)

// Tuning. Socket buffers are asked for, the kernel may grant less (net.core.rmem_max).
const (
	socketBuffer      = 4 << 20
	readBuffer        = 256 << 10
	keepAliveIdle     = 10 * time.Second
	keepAliveInterval = 5 * time.Second
	keepAliveCount    = 3
	handshakeTimeout  = 10 * time.Second
	lingerTimeout     = 250 * time.Millisecond // Close drains incoming bytes this long at most
	closeWriteTimeout = time.Second            // Close waits this long for an in-flight Send

	// DefaultQueueBytes and DefaultQueueFrames bound one (communicator, sender) queue.
	DefaultQueueBytes  = 64 << 20
	DefaultQueueFrames = 4096
)

// Config says where a rank is and how to meet the others.
type Config struct {
	Rank, World int
	// Store is the job's rendezvous store (rdzv.Join's Session.Store, or rdzv.Dial).
	Store rdzv.Store
	// JobID keeps jobs sharing a store apart; peers of another job are refused.
	JobID string
	// ListenHost is the address this rank listens on and publishes. Default: 127.0.0.1 when
	// MASTER_ADDR is unset or a loopback address, else this host's address on the route to
	// MASTER_ADDR.
	ListenHost string
	// Timeout bounds Connect (default rdzv.DefaultTimeout); ctx's earlier deadline wins.
	Timeout time.Duration
	// QueueBytes and QueueFrames bound each (communicator, sender) receive queue
	// (DefaultQueueBytes, DefaultQueueFrames when 0).
	QueueBytes, QueueFrames int
}

// Transport is one rank's endpoint of a tcp world. It implements dist.Transport.
type Transport struct {
	rank, world int
	job         string
	addr        string
	peers       []*peer // peers[rank] is the loopback "peer": frames a rank sends itself
	qBytes      int
	qFrames     int

	closing   chan struct{}
	closeOnce sync.Once
	wg        sync.WaitGroup
	sess      *rdzv.Session // owned when FromEnv made the transport

	sent, recvd atomic.Int64
}

var _ dist.Transport = (*Transport)(nil)

type peer struct {
	t    *Transport
	rank int
	addr string
	conn *net.TCPConn // nil for the loopback peer

	wlock chan struct{} // the write lock: one frame at a time, whole
	hdr   [dist.HeaderSize]byte

	mu     sync.Mutex
	queues map[uint32]*framequeue.Queue

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
		if p.conn != nil {
			p.conn.Close()
		}
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
func (t *Transport) Name() string { return "tcp" }
func (t *Transport) Rank() int    { return t.rank }
func (t *Transport) World() int   { return t.world }

// Addr is the host:port this rank listened on during Connect (empty for a world of one).
func (t *Transport) Addr() string { return t.addr }

// Stats are payload and header bytes moved since Connect.
type Stats struct{ BytesSent, BytesReceived int64 }

func (t *Transport) Stats() Stats { return Stats{t.sent.Load(), t.recvd.Load()} }

func (t *Transport) closedErr(doing string, other int) error {
	return errs.New(errs.TimeoutComm, "tcp rank %d: %s rank %d on a closed transport", t.rank, doing, other)
}

func (t *Transport) isClosing() bool {
	select {
	case <-t.closing:
		return true
	default:
		return false
	}
}

// Send writes f to rank `to` and returns once the kernel holds all of it (the caller may then
// reuse f.Payload). A Send cut short by ctx after part of the frame went out leaves the
// connection unusable: that peer is then failed with E_TIMEOUT_COMM.
func (t *Transport) Send(ctx context.Context, to int, f *dist.Frame) error {
	if to < 0 || to >= t.world {
		return errs.New(errs.Input, "tcp rank %d: send to rank %d outside world %d", t.rank, to, t.world)
	}
	if f == nil {
		return errs.New(errs.Input, "tcp rank %d: send of a nil frame to rank %d", t.rank, to)
	}
	n, err := f.PayloadLen()
	if err != nil {
		return errs.New(errs.Input, "tcp rank %d: send to rank %d: bad frame header: %s", t.rank, to, msgOf(err))
	}
	if n != len(f.Payload) {
		return errs.New(errs.Input, "tcp rank %d: send to rank %d: header announces %d payload bytes (%d x %s), payload has %d", t.rank, to, n, f.Count, f.DType, len(f.Payload))
	}
	if t.isClosing() {
		return t.closedErr("send to", to)
	}
	p := t.peers[to]
	if to == t.rank {
		c := &dist.Frame{Header: f.Header, Payload: append([]byte(nil), f.Payload...)}
		if !p.queue(f.Comm).Push(c, ctx.Done(), t.closing) {
			if t.isClosing() {
				return t.closedErr("send to", to)
			}
			return errs.Wrap(errs.TimeoutComm, ctx.Err(), "tcp rank %d: send to itself on comm %d", t.rank, f.Comm)
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
		return errs.Wrap(errs.TimeoutComm, ctx.Err(), "tcp rank %d: send to rank %d", t.rank, to)
	}
	defer func() { <-p.wlock }()
	if err := p.err(); err != nil {
		return err
	}
	release := watch(ctx, p.conn.SetWriteDeadline)
	f.MarshalHeader(p.hdr[:])
	bufs := net.Buffers{p.hdr[:], f.Payload}
	w, err := bufs.WriteTo(p.conn)
	release()
	t.sent.Add(w)
	if err == nil {
		return nil
	}
	switch {
	case ctx.Err() != nil:
		p.fail(errs.New(errs.TimeoutComm, "tcp rank %d: a send to rank %d (%s) was cut short after %d of %d bytes (%v); the connection is unusable", t.rank, to, p.addr, w, dist.HeaderSize+n, ctx.Err()))
		return errs.Wrap(errs.TimeoutComm, ctx.Err(), "tcp rank %d: send to rank %d", t.rank, to)
	case t.isClosing():
		return t.closedErr("send to", to)
	}
	p.fail(t.goneErr(p, err))
	return p.err()
}

// Recv returns the next frame rank `from` sent on communicator comm. Frames that arrived
// before the peer went away are delivered before its E_TIMEOUT_COMM error.
func (t *Transport) Recv(ctx context.Context, comm uint32, from int) (*dist.Frame, error) {
	if from < 0 || from >= t.world {
		return nil, errs.New(errs.Input, "tcp rank %d: receive from rank %d outside world %d", t.rank, from, t.world)
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
			return nil, errs.Wrap(errs.TimeoutComm, ctx.Err(), "tcp rank %d: waiting for rank %d on comm %d", t.rank, from, comm)
		}
	}
}

func (t *Transport) goneErr(p *peer, err error) error {
	why := err.Error()
	switch {
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		why = "connection closed (the rank exited or closed its transport)"
	default:
		var oe *net.OpError
		if errors.As(err, &oe) && oe.Err != nil {
			why = oe.Err.Error()
		}
	}
	return errs.New(errs.TimeoutComm, "tcp rank %d: rank %d (%s) is gone: %s", t.rank, p.rank, p.addr, why)
}

// read is the connection's reader: frames into queues until the connection ends.
func (t *Transport) read(p *peer) {
	defer t.wg.Done()
	r := newReader(p.conn)
	var hb [dist.HeaderSize]byte
	for {
		if _, err := io.ReadFull(r, hb[:]); err != nil {
			t.readEnded(p, err)
			return
		}
		h, err := dist.UnmarshalHeader(hb[:])
		if err != nil {
			// The byte stream lost its framing: nothing after this can be trusted.
			p.fail(errs.Wrap(errs.Desync, err, "tcp rank %d: from rank %d (%s)", t.rank, p.rank, p.addr))
			return
		}
		n, _ := h.PayloadLen()
		f := &dist.Frame{Header: h, Payload: dist.PayloadBuffer(n)}
		if _, err := io.ReadFull(r, f.Payload); err != nil {
			t.readEnded(p, err)
			return
		}
		t.recvd.Add(int64(dist.HeaderSize + n))
		if !p.queue(h.Comm).Push(f, t.closing, p.dead) {
			t.drain(p)
			return
		}
	}
}

func (t *Transport) readEnded(p *peer, err error) {
	if t.isClosing() {
		p.fail(t.closedErr("receive from", p.rank))
		return
	}
	p.fail(t.goneErr(p, err))
}

// drain discards what still arrives while closing, until the peer's end of stream or the
// linger deadline, so that closing with unread bytes does not reset the connection and
// destroy frames the peer is still to read.
func (t *Transport) drain(p *peer) {
	io.Copy(io.Discard, p.conn)
	p.fail(t.closedErr("receive from", p.rank))
}

// Close ends the transport: pending and later calls fail, every connection is half-closed
// after the frame being written, incoming bytes are drained for a moment, and every goroutine
// has ended when Close returns. A transport made by FromEnv also leaves the job's store (rank 0
// stops serving it).
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
	var wg sync.WaitGroup
	for _, p := range t.peers {
		if p.conn == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			// A Send blocked on a stuck peer gets a moment, then its write fails.
			p.conn.SetWriteDeadline(time.Now().Add(closeWriteTimeout))
			select {
			case p.wlock <- struct{}{}:
			case <-p.dead:
			}
			if p.err() == nil {
				p.conn.CloseWrite()
			}
			p.conn.SetReadDeadline(time.Now().Add(lingerTimeout))
		}()
	}
	wg.Wait()
	t.wg.Wait()
	for _, p := range t.peers {
		p.fail(t.closedErr("talk to", p.rank))
	}
	if t.sess != nil {
		return t.sess.Close()
	}
	return nil
}

// msgOf is an error's message without its code.
func msgOf(err error) string {
	var e *errs.Error
	if errors.As(err, &e) {
		return e.Msg
	}
	return err.Error()
}

// hostToward is this host's address on the route to master: 127.0.0.1 for a loopback (or
// absent) master, else the source address the kernel picks for it, else the host name.
func hostToward(master string) string {
	if master == "" || rdzv.IsLoopback(master) {
		return "127.0.0.1"
	}
	if c, err := net.Dial("udp", net.JoinHostPort(master, "9")); err == nil {
		defer c.Close()
		if a, ok := c.LocalAddr().(*net.UDPAddr); ok && !a.IP.IsUnspecified() {
			return a.IP.String()
		}
	}
	if h, err := os.Hostname(); err == nil {
		return h
	}
	return "127.0.0.1"
}

func rankKey(prefix, what string, rank int) string {
	return prefix + "/" + what + "/" + strconv.Itoa(rank)
}

func (c *Config) check() error {
	switch {
	case c.World < 1 || c.World > rdzv.MaxWorld:
		return errs.New(errs.Input, "tcp: world size %d (want 1..%d)", c.World, rdzv.MaxWorld)
	case c.Rank < 0 || c.Rank >= c.World:
		return errs.New(errs.Input, "tcp: rank %d outside world %d", c.Rank, c.World)
	case c.Store == nil && c.World > 1:
		return errs.New(errs.Input, "tcp rank %d: no rendezvous store", c.Rank)
	case len(c.JobID) > maxJobBytes:
		return errs.New(errs.Input, "tcp rank %d: job id of %d bytes (at most %d)", c.Rank, len(c.JobID), maxJobBytes)
	}
	if c.JobID == "" {
		c.JobID = "default"
	}
	if c.Timeout <= 0 {
		c.Timeout = rdzv.DefaultTimeout
	}
	if c.ListenHost == "" {
		c.ListenHost = hostToward(os.Getenv("MASTER_ADDR"))
	}
	if c.QueueBytes <= 0 {
		c.QueueBytes = DefaultQueueBytes
	}
	if c.QueueFrames <= 0 {
		c.QueueFrames = DefaultQueueFrames
	}
	return nil
}

func (t *Transport) String() string {
	return fmt.Sprintf("tcp rank %d/%d job %s at %s", t.rank, t.world, t.job, t.addr)
}

// Recycle takes back a received frame's payload for later frames (dist.Recycler).
func (t *Transport) Recycle(f *dist.Frame) {
	dist.RecyclePayload(f.Payload)
	f.Payload = nil
}
