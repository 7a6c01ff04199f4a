//go:build unix

package shm

import (
	"context"
	"errors"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/tessera-qa/tessera-qa/engine/dist"
)

// A ring is one direction of one pair of ranks: a file mapping shared by exactly one producer
// (the sending rank) and one consumer (the receiving rank's reader). Its first page holds the
// control words, each group on its own cache line so producer and consumer do not share one:
//
//	0   magic u64, capacity u64, world u32, from u32, to u32, generation u64, job hash u64
//	128 head u64: bytes ever written (producer)
//	256 tail u64: bytes ever read (consumer)
//	384 data futex u32, consumer waiting u32
//	512 space futex u32, producer waiting u32
//	640 producer closed u32, consumer closed u32, producer pid u32, consumer pid u32
//
// then capacity (a power of two) bytes of data. Head and tail only grow, so head-tail is what
// is buffered and neither side ever needs the other's lock.
const (
	ctlBytes      = 4096
	ringMagic     = 0x474e495248535154 // "TQSHRING"
	offMagic      = 0
	offCap        = 8
	offWorld      = 16
	offFrom       = 20
	offTo         = 24
	offGen        = 32
	offJob        = 40
	offHead       = 128
	offTail       = 256
	offDataSeq    = 384
	offDataWait   = 388
	offSpaceSeq   = 512
	offSpaceWait  = 516
	offProdClosed = 640
	offConsClosed = 644
	offProdPid    = 648
	offConsPid    = 652

	// spinRounds checks before a waiter sleeps: a peer that is copying right now is seen
	// without a system call, a peer that is not costs a few microseconds of one core.
	spinRounds = 4000
	// sleepSlice bounds one futex sleep, so that deadlines and a dead peer are noticed even
	// when no wake comes.
	sleepSlice = 20 * time.Millisecond
	// livenessEvery is how often a sleeping waiter asks the kernel whether the peer process
	// still exists (a killed rank sets no closed flag).
	livenessEvery = 100 * time.Millisecond
)

type ring struct {
	mem  []byte
	data []byte
	mask uint64
	path string
	// noPid: the peer's pid means nothing here (it looked dead while it was mapping this
	// ring: another pid namespace sharing /dev/shm), so only its closed flag and the deadline
	// tell that it is gone.
	noPid bool

	head, tail                               *uint64
	dataSeq, dataWait, spaceSeq, spaceWait   *uint32
	prodClosed, consClosed, prodPid, consPid *uint32

	// The consumer's side, in this process: rd is how far the reader has read; the shared
	// tail stays at the start of the oldest payload still lent out (lent, in stream order), so
	// the producer never overwrites bytes a receiver reads in place.
	cmu  sync.Mutex
	rd   uint64
	lent []*span
}

// A span is a payload read in place and lent out, from stream position start on.
type span struct {
	start uint64
	back  bool // handed back
}

func u64At(b []byte, off int) *uint64 { return (*uint64)(unsafe.Pointer(&b[off])) }
func u32At(b []byte, off int) *uint32 { return (*uint32)(unsafe.Pointer(&b[off])) }

// mapFile maps all of f shared; f may be closed afterwards.
func mapFile(f *os.File, size int) (*ring, error) {
	mem, err := syscall.Mmap(int(f.Fd()), 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	if err != nil {
		return nil, err
	}
	r := &ring{mem: mem, data: mem[ctlBytes:], mask: uint64(size-ctlBytes) - 1, path: f.Name()}
	r.head, r.tail = u64At(mem, offHead), u64At(mem, offTail)
	r.dataSeq, r.dataWait = u32At(mem, offDataSeq), u32At(mem, offDataWait)
	r.spaceSeq, r.spaceWait = u32At(mem, offSpaceSeq), u32At(mem, offSpaceWait)
	r.prodClosed, r.consClosed = u32At(mem, offProdClosed), u32At(mem, offConsClosed)
	r.prodPid, r.consPid = u32At(mem, offProdPid), u32At(mem, offConsPid)
	r.rd = atomic.LoadUint64(r.tail)
	return r, nil
}

func (r *ring) capacity() uint64 { return r.mask + 1 }

// chunk bounds one copy, so the other side starts on a large frame while the rest is copied.
func (r *ring) chunk() uint64 { return max(r.capacity()/4, 1) }

func (r *ring) unmap() {
	r.cmu.Lock()
	defer r.cmu.Unlock()
	if r.mem != nil {
		syscall.Munmap(r.mem)
		r.mem, r.data = nil, nil
	}
}

// lentOut is whether a payload of this ring is lent out still.
func (r *ring) lentOut() bool {
	r.cmu.Lock()
	defer r.cmu.Unlock()
	return len(r.lent) > 0
}

// consumed moves the reader past stream position to, and tail with it unless a payload before
// it is lent out.
func (r *ring) consumed(to uint64) {
	r.cmu.Lock()
	r.rd = to
	if len(r.lent) == 0 {
		atomic.StoreUint64(r.tail, to)
	}
	r.cmu.Unlock()
	notify(r.spaceSeq, r.spaceWait)
}

// inPlace waits until the next n bytes are all in the ring and returns them where they lie,
// with give, which hands them back; ok is false (and nothing waited for) where they would not
// lie in one piece (across the ring's end, or more than the producer puts in at once) or not
// at an 8-byte boundary, where a typed view of them (the reduction's) would be misaligned.
func (r *ring) inPlace(w waitFor, n uint64) (b []byte, give func(), ok bool, err error) {
	rd := r.rd
	off := rd & r.mask
	if n == 0 || n > r.chunk() || off+n > r.capacity() || off%8 != 0 {
		return nil, nil, false, nil
	}
	there := func() bool { return atomic.LoadUint64(r.head)-rd >= n }
	for !there() {
		if err := w.wait(there, r.dataSeq, r.dataWait, r.prodClosed, r.prodPid, r.noPid); err != nil {
			return nil, nil, false, err
		}
	}
	s := &span{start: rd}
	r.cmu.Lock()
	r.lent = append(r.lent, s)
	r.rd = rd + n
	r.cmu.Unlock()
	var once sync.Once
	return r.data[off : off+n : off+n], func() { once.Do(func() { r.giveBack(s) }) }, true, nil
}

// giveBack ends s's loan; tail moves up to the oldest payload still lent, or to the reader.
func (r *ring) giveBack(s *span) {
	r.cmu.Lock()
	s.back = true
	for len(r.lent) > 0 && r.lent[0].back {
		r.lent = r.lent[1:]
	}
	t := r.rd
	if len(r.lent) > 0 {
		t = r.lent[0].start
	}
	if r.mem != nil { // a loan ended after Close gave up waiting for it touches nothing
		atomic.StoreUint64(r.tail, t)
		notify(r.spaceSeq, r.spaceWait)
	}
	r.cmu.Unlock()
}

// waitFor says why a wait ended without its condition.
type waitFor struct {
	ctx  context.Context
	stop <-chan struct{}
	// abort, when not nil, also ends the wait: a landing whose receiver gave up on it.
	abort <-chan struct{}
}

var (
	errStopped    = errors.New("this transport is closing")
	errPeerClosed = errors.New("the peer closed its transport")
	errPeerDead   = errors.New("the peer process is gone")
	// errLandingAbandoned: the receiver released a landing the reader was still filling, so the
	// stream stopped mid-frame and cannot be read on.
	errLandingAbandoned = errors.New("a receive into the caller's buffer was abandoned mid-frame")
)

// ctxErr is a wait ended by its context.
type ctxErr struct{ err error }

func (e ctxErr) Error() string { return e.err.Error() }
func (e ctxErr) Unwrap() error { return e.err }

// wait returns once ready() holds, or why it never will: the context ended, this transport
// is closing, the peer set its closed flag or its process no longer exists. seq and waiting
// are the futex word and flag the other side checks after making progress.
func (w waitFor) wait(ready func() bool, seq, waiting, peerClosed, peerPid *uint32, noPid bool) error {
	for range spinRounds {
		if ready() {
			return nil
		}
	}
	// Before sleeping in the kernel, let this process's other goroutines run: the futex wait
	// is a blocking syscall that keeps this thread's P, so a goroutine this one just woke (the
	// receiver of a frame it queued, a Send's caller) would wait for the scheduler to take the
	// P back, milliseconds when it is busy.
	runtime.Gosched()
	if ready() {
		return nil
	}
	lastLive := time.Now()
	for {
		s := atomic.LoadUint32(seq)
		atomic.StoreUint32(waiting, 1)
		if ready() {
			atomic.StoreUint32(waiting, 0)
			return nil
		}
		if atomic.LoadUint32(peerClosed) != 0 {
			atomic.StoreUint32(waiting, 0)
			// The flag is set after the peer's last progress; look once more.
			if ready() {
				return nil
			}
			return errPeerClosed
		}
		select {
		case <-w.stop:
			atomic.StoreUint32(waiting, 0)
			return errStopped
		case <-w.abort:
			atomic.StoreUint32(waiting, 0)
			return errLandingAbandoned
		default:
		}
		d := sleepSlice
		if w.ctx != nil {
			if err := w.ctx.Err(); err != nil {
				atomic.StoreUint32(waiting, 0)
				return ctxErr{err}
			}
			if dl, ok := w.ctx.Deadline(); ok {
				d = min(d, max(time.Until(dl), time.Microsecond))
			}
		}
		sleepOn(seq, s, d)
		atomic.StoreUint32(waiting, 0)
		if !noPid && time.Since(lastLive) >= livenessEvery {
			lastLive = time.Now()
			if !alive(atomic.LoadUint32(peerPid)) {
				if ready() {
					return nil
				}
				return errPeerDead
			}
		}
	}
}

// alive: does process pid exist? Ranks in this same process (tests) are alive while mapped.
func alive(pid uint32) bool {
	if pid == 0 || int(pid) == os.Getpid() {
		return true
	}
	return !errors.Is(syscall.Kill(int(pid), 0), syscall.ESRCH)
}

// kick wakes the other side whether or not it announced a sleep: its word changes, so a
// sleep it is about to start with the old value returns at once.
func kick(seq *uint32) {
	atomic.AddUint32(seq, 1)
	wakeOn(seq)
}

func notify(seq, waiting *uint32) {
	if atomic.LoadUint32(waiting) != 0 {
		atomic.AddUint32(seq, 1)
		wakeOn(seq)
	}
}

// write streams bufs into the ring in pieces as room appears (the producer side); n is how
// many bytes went in, so a caller can tell an untouched stream from a torn one.
func (r *ring) write(w waitFor, bufs ...[]byte) (n int64, err error) {
	head := atomic.LoadUint64(r.head)
	room := func() bool { return r.capacity()-(head-atomic.LoadUint64(r.tail)) > 0 }
	for _, b := range bufs {
		for len(b) > 0 {
			free := r.capacity() - (head - atomic.LoadUint64(r.tail))
			if free == 0 {
				if err := w.wait(room, r.spaceSeq, r.spaceWait, r.consClosed, r.consPid, r.noPid); err != nil {
					return n, err
				}
				continue
			}
			k := min(free, uint64(len(b)), r.chunk())
			off := head & r.mask
			if c := copy(r.data[off:], b[:k]); uint64(c) < k {
				copy(r.data, b[c:k])
			}
			if corruptHook != nil {
				corruptHook(r, head, k)
			}
			head += k
			atomic.StoreUint64(r.head, head)
			notify(r.dataSeq, r.dataWait)
			b = b[k:]
			n += int64(k)
		}
	}
	return n, nil
}

// writeFrame puts the whole frame f into the ring at once, the payload first and then the
// header in front of it, so that the payload's checksum is computed while it is copied
// (dist.CopySumSrc) and still goes into the header, which the stream carries first. It waits
// for room for the whole frame (callers keep frames to a chunk, a quarter of the ring) and
// publishes it with one move of head. It sets f.CRC; hdr is the header's scratch space.
func (r *ring) writeFrame(w waitFor, f *dist.Frame, hdr []byte) (int64, error) {
	total := uint64(dist.HeaderSize + len(f.Payload))
	head := atomic.LoadUint64(r.head)
	room := func() bool { return r.capacity()-(head-atomic.LoadUint64(r.tail)) >= total }
	for !room() {
		if err := w.wait(room, r.spaceSeq, r.spaceWait, r.consClosed, r.consPid, r.noPid); err != nil {
			return 0, err
		}
	}
	f.CRC = r.put(head+dist.HeaderSize, f.Payload, true)
	f.MarshalHeader(hdr)
	r.put(head, hdr[:dist.HeaderSize], false)
	if corruptHook != nil {
		corruptHook(r, head, total)
	}
	atomic.StoreUint64(r.head, head+total)
	notify(r.dataSeq, r.dataWait)
	return int64(total), nil
}

// put copies b into the ring's data at stream position pos, across the ring's end if need be,
// and returns the CRC32C of b when sum is set.
func (r *ring) put(pos uint64, b []byte, sum bool) uint32 {
	off := pos & r.mask
	first := min(uint64(len(b)), r.capacity()-off)
	if !sum {
		copy(r.data[off:], b[:first])
		copy(r.data, b[first:])
		return 0
	}
	crc := dist.CopySumSrc(0, r.data[off:off+first], b[:first])
	return dist.CopySumSrc(crc, r.data[:uint64(len(b))-first], b[first:])
}

// read fills dst from the ring (the consumer side). With sum set, it also returns the CRC32C
// of dst, computed over dst piece by piece right after each piece is copied there
// (dist.CopySumDst), so the bytes checked are the bytes the caller will use.
func (r *ring) read(w waitFor, dst []byte, sum bool) (uint32, error) {
	tail := r.rd
	some := func() bool { return atomic.LoadUint64(r.head) != tail }
	var crc uint32
	for len(dst) > 0 {
		avail := atomic.LoadUint64(r.head) - tail
		if avail == 0 {
			if err := w.wait(some, r.dataSeq, r.dataWait, r.prodClosed, r.prodPid, r.noPid); err != nil {
				return 0, err
			}
			continue
		}
		k := min(avail, uint64(len(dst)), r.chunk())
		off := tail & r.mask
		first := min(k, r.capacity()-off) // the piece up to the ring's end, then the rest from its start
		if sum {
			crc = dist.CopySumDst(crc, dst[:first], r.data[off:])
			crc = dist.CopySumDst(crc, dst[first:k], r.data)
		} else {
			copy(dst[:first], r.data[off:])
			copy(dst[first:k], r.data)
		}
		tail += k
		r.consumed(tail)
		dst = dst[k:]
	}
	return crc, nil
}

// corruptHook, set by tests only, sees each piece right after it was copied into the ring
// and before the consumer may read it: where a flipped bit is what the consumer finds.
var corruptHook func(r *ring, at, n uint64)

// at is the ring byte that stream position pos occupies.
func (r *ring) at(pos uint64) *byte { return &r.data[pos&r.mask] }
