package shm

import (
	"sync"

	"github.com/tessera-qa/tessera-qa/engine/dist"
)

// queue holds the frames one sender sent on one communicator that nobody has received yet.
// It is bounded in bytes and frames (a frame larger than the byte bound still passes alone):
// when it is full the ring's reader waits, the ring fills and the sender waits for room:
// backpressure, as TCP gives the tcp transport.
type queue struct {
	mu        sync.Mutex
	frames    []*dist.Frame
	head      int
	bytes     int
	maxBytes  int
	maxFrames int
	avail     chan struct{} // a token when frames may be waiting
	space     chan struct{} // a token when room may have appeared
}

func newQueue(maxBytes, maxFrames int) *queue {
	return &queue{maxBytes: maxBytes, maxFrames: maxFrames, avail: make(chan struct{}, 1), space: make(chan struct{}, 1)}
}

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// push appends f, waiting for room; it gives up (false) when either stop channel closes.
func (q *queue) push(f *dist.Frame, stop1, stop2 <-chan struct{}) bool {
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

// tryPop takes the oldest frame, if any. Tokens are passed on so that several waiters (or a
// waiting pusher) are all woken in turn.
func (q *queue) tryPop() *dist.Frame {
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
