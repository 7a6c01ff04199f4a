package shm

import (
	"sync"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/dist"
)

// A landing is a receiver's buffer posted for one frame (dist.Lander): the reader copies that
// frame's payload from the ring straight into it, checksumming what it wrote, instead of into a
// pooled payload that the communicator would copy again.
//
// A loan (dist.Lender) is a landing without dst: the reader leaves the frame's n payload bytes
// in the ring, checksums them there and hands out the frame with give, which frees them.
type landing struct {
	dst     []byte
	claimed bool          // the reader is copying into dst (or has)
	done    chan struct{} // closed when the reader is done with dst
	abort   chan struct{} // closed by a release that gives up on a claimed landing

	lend bool
	n    int
	give func() // set, under lmu, before done closes, where the frame went out lent
}

type landKey struct {
	comm uint32
	seq  uint64
	part uint32
}

// abandonAfter is how long a release waits for a landing the reader is filling before it stops
// the copy (which breaks the peer's stream: the frame is half read). Only a failed call
// releases a claimed landing; a healthy copy of a frame ends far sooner.
const abandonAfter = 200 * time.Millisecond

var _ dist.Lander = (*Transport)(nil)

// Land posts dst for the frame (comm, seq, part) from rank `from` (dist.Lander).
func (t *Transport) Land(comm uint32, from int, seq uint64, part uint32, dst []byte) func() {
	if from < 0 || from >= t.world || from == t.rank || len(dst) == 0 {
		return func() {}
	}
	return t.post(from, landKey{comm, seq, part}, &landing{dst: dst, n: len(dst)})
}

var _ dist.Lender = (*Transport)(nil)

// Lend posts the frame (comm, seq, part) of n payload bytes from rank `from` to be read in place
// (dist.Lender).
func (t *Transport) Lend(comm uint32, from int, seq uint64, part uint32, n int) func() {
	if from < 0 || from >= t.world || from == t.rank || n <= 0 {
		return func() {}
	}
	return t.post(from, landKey{comm, seq, part}, &landing{lend: true, n: n})
}

func (t *Transport) post(from int, k landKey, l *landing) func() {
	p := t.peers[from]
	l.done, l.abort = make(chan struct{}), make(chan struct{})
	p.lmu.Lock()
	if p.lands == nil {
		p.lands = map[landKey]*landing{}
	}
	if _, dup := p.lands[k]; dup {
		p.lmu.Unlock()
		return func() {} // one buffer per frame; a second post is a plain receive
	}
	p.lands[k] = l
	p.lmu.Unlock()
	var once sync.Once
	return func() { once.Do(func() { p.release(k, l) }) }
}

func (p *peer) release(k landKey, l *landing) {
	p.lmu.Lock()
	if !l.claimed {
		delete(p.lands, k)
		p.lmu.Unlock()
		return
	}
	p.lmu.Unlock()
	defer func() {
		// A lent frame the receiver did not recycle (its call failed) is freed here: after
		// release nothing reads it.
		p.lmu.Lock()
		give := l.give
		p.lmu.Unlock()
		if give != nil {
			give()
		}
	}()
	select {
	case <-l.done: // the healthy case, once per landed frame: no timer for it
		return
	default:
	}
	select {
	case <-l.done:
		return
	case <-time.After(abandonAfter):
	}
	close(l.abort)
	// The reader's ring wait looks at abort at least every sleepSlice, and a copy of data
	// already in the ring does not wait, so this ends; the bound is a guard, not a path.
	select {
	case <-l.done:
	case <-time.After(10 * abandonAfter):
	}
}

// claim takes the landing posted for the frame with header h and n payload bytes, if any.
func (p *peer) claim(h dist.Header, n int) *landing {
	p.lmu.Lock()
	defer p.lmu.Unlock()
	k := landKey{h.Comm, h.Seq, h.Part}
	l := p.lands[k]
	if l == nil || l.n != n {
		return nil // a frame of another size is delivered pooled; its header check says why
	}
	delete(p.lands, k)
	l.claimed = true
	return l
}
