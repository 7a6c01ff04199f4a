package dist

import (
	"context"
	"sync"

	"github.com/tessera-qa/tessera-qa/engine/errs"
)

// mailboxDepth bounds how many frames one (communicator, sender, receiver) queue holds before
// Send waits: enough for every phase of one collective, small enough to give backpressure.
const mailboxDepth = 16

// hub is the shared state of one in-process world.
type hub struct {
	mu     sync.Mutex
	boxes  map[boxKey]chan *Frame
	closed []chan struct{} // closed[r] is closed when rank r's endpoint closes
}

type boxKey struct {
	comm     uint32
	from, to int
}

func (h *hub) box(k boxKey) chan *Frame {
	h.mu.Lock()
	defer h.mu.Unlock()
	b, ok := h.boxes[k]
	if !ok {
		b = make(chan *Frame, mailboxDepth)
		h.boxes[k] = b
	}
	return b
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
	h := &hub{boxes: map[boxKey]chan *Frame{}, closed: make([]chan struct{}, n)}
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
