// Package framequeue holds, for the host transports (tcp, shm), the frames one sender sent on
// one communicator that nobody has received yet.
package framequeue

import (
	"sync"

	"github.com/tessera-qa/tessera-qa/engine/dist"
)

// Queue holds the frames one sender sent on one communicator that nobody has received yet.
// It is bounded in bytes and frames (a frame larger than the byte bound still passes alone):
// when it is full the transport's reader waits, and the transport slows the sender down (TCP
// through its socket buffers, shm through its full ring).
type Queue struct {
	mu        sync.Mutex
	frames    []*dist.Frame
	head      int
	bytes     int
	maxBytes  int
	maxFrames int
	avail     chan struct{} // a token when frames may be waiting
	space     chan struct{} // a token when room may have appeared
}

func New(maxBytes, maxFrames int) *Queue {
	return &Queue{maxBytes: maxBytes, maxFrames: maxFrames, avail: make(chan struct{}, 1), space: make(chan struct{}, 1)}
}

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// Push appends f, waiting for room; it gives up (false) when either stop channel closes.
func (q *Queue) Push(f *dist.Frame, stop1, stop2 <-chan struct{}) bool {
	for {
		q.mu.Lock()
		n := len(q.frames) - q.head
		if n == 0 || (q.bytes+len(f.Payload) <= q.maxBytes && n < q.maxFrames) {
			q.frames = append(q.frames, f)
			q.bytes += len(f.Payload)
			q.mu.Unlock()
			signal(q.avail)
			return true
		}
		q.mu.Unlock()
		select {
		case <-q.space:
		case <-stop1:
			return false
		case <-stop2:
			return false
		}
	}
}

// TryPop takes the oldest frame, if any. Tokens are passed on so that several waiters (or a
// waiting pusher) are all woken in turn.
func (q *Queue) TryPop() *dist.Frame {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.head == len(q.frames) {
		return nil
	}
	f := q.frames[q.head]
	q.frames[q.head] = nil
	q.head++
	q.bytes -= len(f.Payload)
	if q.head == len(q.frames) {
		q.frames, q.head = q.frames[:0], 0
	} else {
		signal(q.avail)
	}
	if q.head > 1024 && q.head*2 > len(q.frames) {
		n := copy(q.frames, q.frames[q.head:])
		clear(q.frames[n:])
		q.frames, q.head = q.frames[:n], 0
	}
	signal(q.space)
	return f
}

// Avail receives a token when frames may be waiting: a receiver selects on it beside its
// deadline and its peer's end, then calls TryPop again.
func (q *Queue) Avail() <-chan struct{} { return q.avail }
