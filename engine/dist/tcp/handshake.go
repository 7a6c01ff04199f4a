package tcp

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// The handshake, once per connection, before any frame. The dialing (higher) rank speaks
// first:
//
//	hello:  "TQTC" u16 version, u16 job length, u32 world, u32 from, u32 to, u64 generation, job
//	answer: u8 accepted, u16 reason length, reason, then (when accepted) the acceptor's hello
//
// Either side refuses a peer of another job, world size, generation or rank with a reason the
// other side reports as E_COMM_INIT. Bytes that do not start with the magic are dropped
// without an answer (a port scanner, a client of some other protocol).

const (
	helloMagic   = "TQTC"
	helloVersion = 1
	helloFixed   = 4 + 2 + 2 + 4 + 4 + 4 + 8
	maxJobBytes  = 1024
	maxReason    = 1024
)

type hello struct {
	job        string
	world      int
	from, to   int
	generation uint64
}

func (h hello) marshal() []byte {
	b := make([]byte, helloFixed+len(h.job))
	le := binary.LittleEndian
	copy(b, helloMagic)
	le.PutUint16(b[4:], helloVersion)
	le.PutUint16(b[6:], uint16(len(h.job)))
	le.PutUint32(b[8:], uint32(h.world))
	le.PutUint32(b[12:], uint32(h.from))
	le.PutUint32(b[16:], uint32(h.to))
	le.PutUint64(b[20:], h.generation)
	copy(b[helloFixed:], h.job)
	return b
}

// errStray marks a connection that does not speak this protocol at all.
type errStray struct{ why string }

func (e errStray) Error() string { return e.why }

func readHello(r io.Reader) (hello, error) {
	b := make([]byte, helloFixed)
	if _, err := io.ReadFull(r, b); err != nil {
		return hello{}, err
	}
	if string(b[:4]) != helloMagic {
		return hello{}, errStray{fmt.Sprintf("not a tessera tcp transport peer (greeting %q)", b[:4])}
	}
	le := binary.LittleEndian
	if v := le.Uint16(b[4:]); v != helloVersion {
		return hello{}, fmt.Errorf("transport protocol version %d, want %d", v, helloVersion)
	}
	n := int(le.Uint16(b[6:]))
	if n > maxJobBytes {
		return hello{}, fmt.Errorf("job id of %d bytes", n)
	}
	job := make([]byte, n)
	if _, err := io.ReadFull(r, job); err != nil {
		return hello{}, err
	}
	return hello{job: string(job), world: int(le.Uint32(b[8:])), from: int(le.Uint32(b[12:])),
		to: int(le.Uint32(b[16:])), generation: le.Uint64(b[20:])}, nil
}

// mismatch says why the peer's hello is not the one expected, or "" when it is.
func (h hello) mismatch(want hello) string {
	switch {
	case h.job != want.job:
		return fmt.Sprintf("it belongs to job %q, this rank to job %q", h.job, want.job)
	case h.world != want.world:
		return fmt.Sprintf("its world size is %d, this rank's %d", h.world, want.world)
	case h.generation != want.generation:
		return fmt.Sprintf("it is in transport generation %d of the job, this rank in %d (one rank connected more often than another)", h.generation, want.generation)
	case h.to != want.to:
		return fmt.Sprintf("it wanted rank %d, this is rank %d", h.to, want.to)
	case want.from >= 0 && h.from != want.from:
		return fmt.Sprintf("it is rank %d, this rank expected rank %d", h.from, want.from)
	}
	return ""
}

func writeAnswer(w io.Writer, reason string, me hello) error {
	if len(reason) > maxReason {
		reason = reason[:maxReason]
	}
	b := make([]byte, 3, 3+len(reason)+helloFixed+len(me.job))
	if reason == "" {
		b[0] = 1
	}
	binary.LittleEndian.PutUint16(b[1:], uint16(len(reason)))
	b = append(b, reason...)
	if reason == "" {
		b = append(b, me.marshal()...)
	}
	_, err := w.Write(b)
	return err
}

// readAnswer returns the acceptor's hello, or its reason for refusing.
func readAnswer(r io.Reader) (hello, string, error) {
	b := make([]byte, 3)
	if _, err := io.ReadFull(r, b); err != nil {
		return hello{}, "", err
	}
	n := int(binary.LittleEndian.Uint16(b[1:]))
	if n > maxReason {
		return hello{}, "", fmt.Errorf("refusal of %d bytes", n)
	}
	reason := make([]byte, n)
	if _, err := io.ReadFull(r, reason); err != nil {
		return hello{}, "", err
	}
	if b[0] != 1 {
		if n == 0 {
			reason = []byte("no reason given")
		}
		return hello{}, string(reason), nil
	}
	h, err := readHello(r)
	return h, "", err
}

// tune sets the options every data connection gets.
func tune(c net.Conn) {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return
	}
	tc.SetNoDelay(true)
	tc.SetReadBuffer(socketBuffer)
	tc.SetWriteBuffer(socketBuffer)
	tc.SetKeepAliveConfig(net.KeepAliveConfig{Enable: true, Idle: keepAliveIdle, Interval: keepAliveInterval, Count: keepAliveCount})
}

// watch sets a deadline of "now" through set when ctx ends, until release is called;
// release clears the deadline again if it fired, so a connection that outlives ctx (handed
// on after a handshake, or written to after a Send whose ctx ended just afterwards) is not
// left with a deadline in the past.
func watch(ctx context.Context, set func(time.Time) error) (release func()) {
	var mu sync.Mutex
	finished, fired := false, false
	stop := context.AfterFunc(ctx, func() {
		mu.Lock()
		defer mu.Unlock()
		if !finished {
			fired = true
			set(time.Now())
		}
	})
	return func() {
		stop()
		mu.Lock()
		finished = true
		f := fired
		mu.Unlock()
		if f {
			set(time.Time{})
		}
	}
}
