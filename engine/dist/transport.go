package dist

import "context"

// Transport moves frames between the ranks of one world. It never looks inside a payload and
// never adds: the communicator above it checks headers and checksums and does all arithmetic,
// which is why every transport gives the same bits.
//
// Frames from one sender on one communicator arrive in the order they were sent (per
// (communicator, sender) FIFO); frames of different communicators never block each other.
type Transport interface {
	// Name is the transport's kind: inproc, tcp, cuda, nccl.
	Name() string
	// Rank and World place this endpoint in the world.
	Rank() int
	World() int
	// Send hands f to rank `to` and returns when the transport no longer needs f.Payload (it
	// was written to the wire or copied), or with ctx's error: the caller may then reuse the
	// buffer, which is what makes in-place collectives safe.
	Send(ctx context.Context, to int, f *Frame) error
	// Recv returns the next frame sent by rank `from` on communicator comm. It returns ctx's
	// error when ctx ends first and a coded E_TIMEOUT_COMM error when the peer is gone.
	Recv(ctx context.Context, comm uint32, from int) (*Frame, error)
	// Close releases the endpoint; pending and later calls fail.
	Close() error
}

// A Wrapper is a transport layered on another (an interception, a modeled fabric): Unwrap
// returns the one below, so that what a layer adds (a clock) and what the bottom is (its
// Name) can be found through any stack of layers.
type Wrapper interface {
	Unwrap() Transport
}

// Base is the bottom transport of t's layers.
func Base(t Transport) Transport {
	for {
		w, ok := t.(Wrapper)
		if !ok {
			return t
		}
		t = w.Unwrap()
	}
}

// A Lander is a transport that can copy a frame's payload from the wire straight into a buffer
// the receiver names before the frame arrives, saving the copy out of a pooled payload. Land
// posts dst for the frame (comm, from, seq, part) whose payload is exactly len(dst) bytes; that
// frame, if it is read after the post, comes out of Recv with Payload aliasing dst (SetLanded, and its
// received checksum recorded, so Expect.Check still decides whether it may be used). A frame
// read before the post arrives in a pooled payload as usual. release ends the post: once it
// returns, the transport never writes dst again. Such a frame must not be recycled.
type Lander interface {
	Land(comm uint32, from int, seq uint64, part uint32, dst []byte) (release func())
}

// A Lender is a transport that can hand a frame out with its payload still in the transport's
// own memory (the shm rings), read in place, saving the copy out of the wire that a reduction
// would read once and drop. Lend posts the frame (comm, from, seq, part) with a payload of n
// bytes; that frame, if it is read after the post and the transport can keep it whole, comes
// out of Recv lent (SetLent) and unchecked (DeferSum: the poster checksums the payload as it
// reads it, so the transport's memory is read once, and must not use it otherwise): its payload stays
// valid until the frame is recycled, and the transport holds the memory, and whatever the
// sender wrote after it, until then, so the receiver must recycle it soon and must never wait
// on that sender in between. release ends the post and hands back a lent frame not yet
// recycled; after it the payload must not be read.
type Lender interface {
	Lend(comm uint32, from int, seq uint64, part uint32, n int) (release func())
}

// Landed reports whether f's payload is dst (a Lander put it there).
func Landed(f *Frame, dst []byte) bool {
	return f.landed && len(dst) > 0 && len(f.Payload) == len(dst) && &f.Payload[0] == &dst[0]
}
