package dist

import (
	"math/bits"
	"sync"
)

// Receive buffers come from size classes of powers of two, so a transport that receives many
// frames of the same size reuses memory instead of allocating (and zeroing) a fresh payload per
// frame. A buffer is returned by the communicator once nothing reads it (Recycler); one that is
// never returned is simply collected.

const (
	minPoolClass = 12 // 4 KiB: smaller payloads are cheap to allocate
	maxPoolClass = 31
)

var pools [maxPoolClass + 1]sync.Pool

// PayloadBuffer returns a buffer of length n, recycled when one of its size class is free.
// Its contents are not zeroed: the caller overwrites all n bytes.
func PayloadBuffer(n int) []byte {
	c := bits.Len(uint(n - 1))
	if n < 1<<minPoolClass || c > maxPoolClass {
		return make([]byte, n)
	}
	if b, ok := pools[c].Get().(*[]byte); ok {
		return (*b)[:n]
	}
	return make([]byte, n, 1<<c)
}

// RecyclePayload gives b back for reuse; the caller must not touch it afterwards.
func RecyclePayload(b []byte) {
	c := bits.Len(uint(cap(b) - 1))
	if cap(b) < 1<<minPoolClass || c > maxPoolClass || cap(b) != 1<<c {
		return
	}
	b = b[:cap(b)]
	pools[c].Put(&b)
}

// Recycler is implemented by transports whose received payloads come from PayloadBuffer: the
// communicator hands a frame back once it no longer reads its payload.
type Recycler interface {
	Recycle(f *Frame)
}

// recycle returns frames to the transport: a lent payload to the memory it aliases, a pooled
// one when the transport reuses buffers.
func (c *Comm) recycle(fs ...*Frame) {
	r, ok := c.t.(Recycler)
	for _, f := range fs {
		switch {
		case f == nil || f.landed:
		case f.EndLoan():
		case ok:
			r.Recycle(f)
		}
	}
}
