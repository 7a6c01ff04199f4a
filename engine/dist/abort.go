package dist

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

// A rank that fails a collective tells its peers why before it returns, so that a mismatch
// one rank detects reaches every rank as E_DESYNC with its reason, not as "rank X is gone" when
// the failing process exits. The abort frame travels on the same per-sender FIFO as the data,
// so a peer reads it before it can see the connection close.

// abortGrace bounds how long a failing rank spends telling its peers, and how long a rank that
// lost a peer waits for that peer's reason.
const abortGrace = 300 * time.Millisecond

// abortErr is an error a peer reported in an abort frame.
type abortErr struct{ err *errs.Error }

func (e abortErr) Error() string { return e.err.Error() }
func (e abortErr) Unwrap() error { return e.err }

// aborted turns a peer's abort frame into this rank's error, with the peer's code.
func (cl *call) aborted(f *Frame) error {
	msg := string(f.Payload)
	code := errs.Internal
	if c, rest, ok := strings.Cut(msg, ": "); ok && strings.HasPrefix(c, "E_") {
		code, msg = errs.Code(c), rest // the line keeps one code: the peer's
	}
	// A peer that timed out on this rank blames it, but this rank may itself have been
	// waiting for another: say so, or the line names the wrong rank as the root cause.
	me := cl.c.ranks[cl.c.me]
	if strings.Contains(msg, fmt.Sprintf("(rank %d is silent or stuck)", me)) {
		if on := cl.awaited(int(f.Src)); len(on) > 0 {
			msg += fmt.Sprintf("; rank %d was itself waiting for rank(s) %v", me, on)
		}
	}
	return abortErr{err: errs.New(code, "%s: rank %d gave up: %s", cl.where(), f.Src, msg)}
}

// giveUp runs when a collective fails on this rank. If the failure was losing a peer, the
// peer may have said why before it went: that reason wins. Unless the error came from a peer,
// the peers are told.
func (cl *call) giveUp(err error) error {
	var ab abortErr
	if errors.As(err, &ab) {
		return err
	}
	if errs.CodeOf(err) == errs.TimeoutComm {
		if reason := cl.peerReason(); reason != nil {
			return reason
		}
	}
	cl.tellPeers(err)
	return err
}

// peerReason looks, briefly, for an abort frame that a peer left before going.
func (cl *call) peerReason() error {
	ctx, cancel := context.WithTimeout(context.Background(), abortGrace)
	defer cancel()
	var mu sync.Mutex
	var found error
	var wg sync.WaitGroup
	for p := range cl.c.World() {
		if p == cl.c.me {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				f, err := cl.c.t.Recv(ctx, cl.c.opts.ID, cl.c.ranks[p])
				if err != nil {
					return
				}
				if f.Op == OpAbort && Checksum(f.Payload) == f.CRC {
					mu.Lock()
					if found == nil {
						found = cl.aborted(f)
					}
					mu.Unlock()
					cancel()
					return
				}
			}
		}()
	}
	wg.Wait()
	return found
}

// tellPeers sends every peer an abort frame carrying err, best effort and bounded.
func (cl *call) tellPeers(err error) {
	ctx, cancel := context.WithTimeout(context.Background(), abortGrace)
	defer cancel()
	msg := []byte(err.Error())
	if len(msg) > 4096 {
		msg = msg[:4096]
	}
	var wg sync.WaitGroup
	for p := range cl.c.World() {
		if p == cl.c.me {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			f := &Frame{Header: Header{Comm: cl.c.opts.ID, Seq: cl.seq, Op: OpAbort, DType: numerics.I8,
				Src: uint16(cl.c.ranks[cl.c.me]), Count: uint64(len(msg)), CRC: Checksum(msg)}, Payload: msg}
			_ = cl.c.t.Send(ctx, cl.c.ranks[p], f)
		}()
	}
	wg.Wait()
}
