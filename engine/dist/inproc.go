package dist

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/tessera-qa/tessera-qa/engine/errs"
)

// mailboxDepth bounds how many frames one (communicator, sender, receiver) queue holds before
// Send waits: enough for every phase of one collective, small enough to give backpressure.
const mailboxDepth = 16

// hub is the shared state of one in-process world. The queues of a communicator are a table
// indexed by (sender, receiver), each made on first use; the communicators' tables sit in a
// map that is copied on write and read without a lock. With hundreds of ranks, one mutex over
// one map of every queue was the world's bottleneck (every send and receive took it).
type hub struct {
	n      int
	mu     sync.Mutex // serializes adding a communicator's table
	comms  atomic.Pointer[map[uint32]*commBoxes]
	closed []chan struct{} // closed[r] is closed when rank r's endpoint closes
}

// commBoxes holds one row of queues per sender, made when that sender first uses the
// communicator: a sub-communicator of m members costs m rows, not the world's square.
type commBoxes struct {
	rows []atomic.Pointer[[]atomic.Pointer[chan *Frame]]
}

type boxKey struct {
	comm     uint32
	from, to int
}

func (h *hub) box(k boxKey) chan *Frame {
	cb := (*h.comms.Load())[k.comm]
	if cb == nil {
		h.mu.Lock()
		old := *h.comms.Load()
		if cb = old[k.comm]; cb == nil {
			cb = &commBoxes{rows: make([]atomic.Pointer[[]atomic.Pointer[chan *Frame]], h.n)}
			next := make(map[uint32]*commBoxes, len(old)+1)
			for id, v := range old {
				next[id] = v
			}
			next[k.comm] = cb
			h.comms.Store(&next)
		}
		h.mu.Unlock()
	}
	row := cb.rows[k.from].Load()
	if row == nil {
		r := make([]atomic.Pointer[chan *Frame], h.n)
		cb.rows[k.from].CompareAndSwap(nil, &r)
		row = cb.rows[k.from].Load()
	}
	slot := &(*row)[k.to]
	if b := slot.Load(); b != nil {
		return *b
	}
	c := make(chan *Frame, mailboxDepth)
	slot.CompareAndSwap(nil, &c)
	return *slot.Load()
}

// inproc is one rank's endpoint of an in-process world: ranks are goroutines, frames are
// copied through channels.
type inproc struct {
	h     *hub
	rank  int
	once  sync.Once
	world int
}

// NewInproc returns the endpoints of a world of n ranks living in this process.
func NewInproc(n int) []Transport {
	h := &hub{n: n, closed: make([]chan struct{}, n)}
	h.comms.Store(&map[uint32]*commBoxes{})
	out := make([]Transport, n)
	for r := range out {
		h.closed[r] = make(chan struct{})
		out[r] = &inproc{h: h, rank: r, world: n}
	}
	return out
}

func (t *inproc) Name() string { return "inproc" }
func (t *inproc) Rank() int    { return t.rank }
func (t *inproc) World() int   { return t.world }

func (t *inproc) Send(ctx context.Context, to int, f *Frame) error {
	if to < 0 || to >= t.world {
		return errs.New(errs.Input, "inproc rank %d: send to rank %d outside world %d", t.rank, to, t.world)
	}
	select {
	case <-t.h.closed[t.rank]:
		return errs.New(errs.TimeoutComm, "inproc rank %d: send on a closed endpoint", t.rank)
	default:
	}
	// The copy is what lets the caller reuse its buffer as soon as Send returns.
	c := &Frame{Header: f.Header, Payload: PayloadBuffer(len(f.Payload))}
	copy(c.Payload, f.Payload)
	select {
	case t.h.box(boxKey{f.Comm, t.rank, to}) <- c:
		return nil
	case <-t.h.closed[to]:
		return errs.New(errs.TimeoutComm, "inproc rank %d: rank %d is gone (endpoint closed)", t.rank, to)
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (t *inproc) Recv(ctx context.Context, comm uint32, from int) (*Frame, error) {
	if from < 0 || from >= t.world {
		return nil, errs.New(errs.Input, "inproc rank %d: receive from rank %d outside world %d", t.rank, from, t.world)
	}
	b := t.h.box(boxKey{comm, from, t.rank})
	select {
	case f := <-b:
		return f, nil
	case <-t.h.closed[from]:
		// A frame sent before the peer closed is still delivered.
		select {
		case f := <-b:
			return f, nil
		default:
		}
		return nil, errs.New(errs.TimeoutComm, "inproc rank %d: rank %d is gone (endpoint closed)", t.rank, from)
	case <-t.h.closed[t.rank]:
		return nil, errs.New(errs.TimeoutComm, "inproc rank %d: receive on a closed endpoint", t.rank)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (t *inproc) Close() error {
	t.once.Do(func() { close(t.h.closed[t.rank]) })
	return nil
}

// Recycle takes back a received frame's payload (Recycler).
func (t *inproc) Recycle(f *Frame) {
	RecyclePayload(f.Payload)
	f.Payload = nil
}
