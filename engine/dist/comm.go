package dist

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

// Mode says what a communicator promises about the bits of its reductions.
type Mode uint8

const (
	// Deterministic adds contributions in global order (rank 0..n-1, then each rank's local
	// contributions in order) for every element: the same bits for every transport, timing and
	// arrival order, for a fixed world size.
	Deterministic Mode = iota
	// Fast makes no promise about the order of additions (on NCCL it is ncclAllReduce; on the
	// host transports each chunk's owner starts the sum at its own rank, as a ring does).
	Fast
	// Exact sums every contribution exactly and rounds once: the same bits for any world size
	// and any split of the contributions over ranks.
	Exact
	modeLimit
)

var modeNames = [...]string{Deterministic: "deterministic", Fast: "fast", Exact: "exact"}

func (m Mode) String() string {
	if m < modeLimit {
		return modeNames[m]
	}
	return fmt.Sprintf("mode(%d)", uint8(m))
}

// BitsGuaranteed reports whether the mode promises the same bits run after run.
func (m Mode) BitsGuaranteed() bool { return m != Fast }

// ParseMode accepts deterministic, fast, exact.
func ParseMode(s string) (Mode, error) {
	for i, n := range modeNames {
		if n == s {
			return Mode(i), nil
		}
	}
	return 0, errs.New(errs.Input, "unknown collective mode %q (want deterministic, fast or exact)", s)
}

// DefaultTimeout bounds one collective when neither Options nor the context says otherwise.
const DefaultTimeout = 60 * time.Second

// Options configure a communicator.
type Options struct {
	Mode    Mode
	Timeout time.Duration // per collective; 0 means DefaultTimeout
	ID      uint32        // communicator id carried by every frame; the world communicator is 0
}

// Comm is a communicator: an ordered group of ranks of one transport's world. Collectives on
// one Comm run one at a time, in the same order on every member (that order is the sequence
// number every frame carries).
type Comm struct {
	t     Transport
	opts  Options
	ranks []int // world rank of each member, by communicator rank
	me    int   // this endpoint's communicator rank

	mu      sync.Mutex // serializes collectives
	seq     uint64
	p2pMu   sync.Mutex
	p2pSend []uint64 // per-peer sequence numbers of point-to-point messages
	p2pRecv []uint64
	// waited is the time this endpoint's calls spent blocked on a peer (awaitSet), ns.
	waited atomic.Int64
	// peerWait is, per member, the time this endpoint's calls waited on that member's frames
	// (WaitedOn), ns; timed is the transport's own clock when a layer has one.
	peerWait []atomic.Int64
	timed    Timed
}

// Waited is the total time this communicator's calls have spent blocked waiting for a peer's
// frame (not moving bytes): a profiler takes the difference around a collective, the wait
// for the slowest peer that the collective's time includes.
func (c *Comm) Waited() time.Duration { return time.Duration(c.waited.Load()) }

// WaitedOn is, per member (by communicator rank), the total time this communicator's calls
// waited on that member's frames. A slow link or a congested switch changes no rank's compute,
// only how late its frames come: the peers every rank waits on longest are on it (the chaos
// straggler watch's signal). Only each call's first frame from a member counts: that one
// (an all_reduce's contribution, an all_gather block) depends on the member alone, where a
// later one (a reduced chunk) waits for every contribution to it and would spread one slow
// rank's lateness over all of them. The ends of a slow link finish each call late, so their
// first frames of the next call are late to everyone.
//
// On the wall clock it is the time that receive was blocked. On a transport layer with its
// own clock (Timed: a modeled fabric in virtual time, where nothing blocks in modeled time)
// it is how far after the call began the frame arrived on that clock.
func (c *Comm) WaitedOn() []time.Duration {
	out := make([]time.Duration, len(c.peerWait))
	for i := range c.peerWait {
		out[i] = time.Duration(c.peerWait[i].Load())
	}
	return out
}

func (c *Comm) newAwaitSet() *awaitSet {
	w := &awaitSet{n: map[int]int{}, total: &c.waited, last: map[int]time.Duration{}}
	if c.timed != nil {
		w.clk0 = c.timed.Now()
	}
	return w
}

// Timed is a transport layer with a clock of its own (a modeled fabric: fabric.Wrap), found
// through the layers above it (Wrapper).
type Timed interface {
	// Now is this endpoint's time on the layer's clock.
	Now() time.Duration
	// Arrived is when, on that clock, the last frame Recv returned from world rank from on
	// communicator comm arrived.
	Arrived(comm uint32, from int) time.Duration
}

func timedOf(t Transport) Timed {
	for {
		if tm, ok := t.(Timed); ok {
			return tm
		}
		w, ok := t.(Wrapper)
		if !ok {
			return nil
		}
		t = w.Unwrap()
	}
}

// NewComm returns the world communicator of t.
func NewComm(t Transport, opts Options) *Comm {
	ranks := make([]int, t.World())
	for i := range ranks {
		ranks[i] = i
	}
	return newComm(t, opts, ranks, t.Rank())
}

func newComm(t Transport, opts Options, ranks []int, me int) *Comm {
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	return &Comm{t: t, opts: opts, ranks: ranks, me: me,
		p2pSend: make([]uint64, len(ranks)), p2pRecv: make([]uint64, len(ranks)),
		peerWait: make([]atomic.Int64, len(ranks)), timed: timedOf(t)}
}

// Sub returns the communicator over the listed world ranks (communicator rank i is ranks[i]).
// Every member must call Sub with the same id and list; the id must differ from every other
// communicator's on this transport.
func (c *Comm) Sub(id uint32, ranks []int) (*Comm, error) {
	me := -1
	seen := map[int]bool{}
	for i, r := range ranks {
		if r < 0 || r >= c.t.World() || seen[r] {
			return nil, errs.New(errs.Input, "rank %d: sub-communicator %d lists rank %d twice or outside world %d", c.t.Rank(), id, r, c.t.World())
		}
		seen[r] = true
		if r == c.t.Rank() {
			me = i
		}
	}
	if me < 0 {
		return nil, errs.New(errs.Input, "rank %d: sub-communicator %d %v does not include this rank", c.t.Rank(), id, ranks)
	}
	if id == c.opts.ID {
		return nil, errs.New(errs.Input, "rank %d: sub-communicator id %d is the parent's", c.t.Rank(), id)
	}
	o := c.opts
	o.ID = id
	return newComm(c.t, o, slices.Clone(ranks), me), nil
}

// Rank is this member's rank in the communicator; World the number of members.
func (c *Comm) Rank() int  { return c.me }
func (c *Comm) World() int { return len(c.ranks) }

// Mode is the communicator's reduction mode; Transport the endpoint it runs on.
func (c *Comm) Mode() Mode           { return c.opts.Mode }
func (c *Comm) Transport() Transport { return c.t }
func (c *Comm) ID() uint32           { return c.opts.ID }

// call is one collective in flight: the expected header fields and the deadline.
type call struct {
	c     *Comm
	ctx   context.Context
	op    Op
	dt    numerics.DType
	red   RedOp
	seq   uint64
	start time.Time
	// waiting is shared by the copies of a call that run its parts concurrently (group).
	waiting *awaitSet
}

// awaitSet counts, per world rank, a call's receives still blocked on it: a peer that gives
// up blaming this rank is told what this rank was itself waiting for (aborted).
type awaitSet struct {
	mu    sync.Mutex
	n     map[int]int
	since time.Time     // when the set last became non-empty
	total *atomic.Int64 // the communicator's Waited
	// clk0 is the call's start on the transport's own clock (Timed); last holds the members
	// whose first frame of the call WaitedOn has counted.
	clk0 time.Duration
	last map[int]time.Duration
}

// await marks a receive from world rank r as blocked until the returned func runs.
func (cl *call) await(r int) func() {
	w := cl.waiting
	if w == nil {
		return func() {}
	}
	w.mu.Lock()
	if len(w.n) == 0 {
		w.since = time.Now()
	}
	w.n[r]++
	w.mu.Unlock()
	return func() {
		w.mu.Lock()
		if w.n[r]--; w.n[r] == 0 {
			delete(w.n, r)
		}
		if len(w.n) == 0 && w.total != nil {
			w.total.Add(int64(time.Since(w.since)))
		}
		w.mu.Unlock()
	}
}

// waitedOn adds to WaitedOn what the receive from communicator rank peer that began at t0
// (wall clock) waited.
func (cl *call) waitedOn(peer int, t0 time.Time) {
	w := cl.waiting
	if w == nil {
		return
	}
	d := time.Since(t0)
	var a time.Duration
	if tm := cl.c.timed; tm != nil {
		a = tm.Arrived(cl.c.opts.ID, cl.c.ranks[peer])
		d = max(a-w.clk0, 0)
	}
	w.mu.Lock()
	_, seen := w.last[peer]
	w.last[peer] = a
	w.mu.Unlock()
	if !seen {
		cl.c.peerWait[peer].Add(int64(d))
	}
}

// awaited lists the world ranks this call is blocked on, but except.
func (cl *call) awaited(except int) []int {
	w := cl.waiting
	if w == nil {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []int
	for r := range w.n {
		if r != except {
			out = append(out, r)
		}
	}
	slices.Sort(out)
	return out
}

func (c *Comm) begin(ctx context.Context, op Op, dt numerics.DType, red RedOp) (*call, func(*error)) {
	c.mu.Lock()
	c.seq++
	cl := &call{c: c, op: op, dt: dt, red: red, seq: c.seq, start: time.Now(), waiting: c.newAwaitSet()}
	var cancel context.CancelFunc
	if d, ok := ctx.Deadline(); ok && time.Until(d) < c.opts.Timeout {
		cl.ctx, cancel = context.WithCancel(ctx)
	} else {
		cl.ctx, cancel = context.WithTimeout(ctx, c.opts.Timeout)
	}
	return cl, func(err *error) {
		if *err != nil {
			*err = cl.giveUp(*err)
		}
		cancel()
		c.mu.Unlock()
	}
}

func (cl *call) where() string {
	return fmt.Sprintf("rank %d: %s #%d (comm %d, %s)", cl.c.ranks[cl.c.me], cl.op, cl.seq, cl.c.opts.ID, cl.c.t.Name())
}

// send ships payload to communicator rank peer with the call's header.
func (cl *call) send(peer int, op Op, aux uint32, payload []byte) error {
	return cl.sendOne(peer, op, aux, cl.seq, 0, payload)
}

// sendSum is send with the payload's checksum already known: a buffer that goes to every peer
// is checksummed once, not once per peer.
func (cl *call) sendSum(peer int, op Op, aux uint32, payload []byte, crc uint32) error {
	return cl.sendSeq(peer, op, aux, cl.seq, 0, payload, crc)
}

// sendSeq sends one frame: part is its place among the frames this call sends peer under op.
func (cl *call) sendSeq(peer int, op Op, aux uint32, seq uint64, part uint32, payload []byte, crc uint32) error {
	f := cl.frame(op, aux, seq, part, payload)
	f.CRC = crc
	if err := cl.c.t.Send(cl.ctx, cl.c.ranks[peer], f); err != nil {
		return cl.commErr(err, peer, "sending to")
	}
	return nil
}

// sendOne is sendSeq for a payload that goes to this one peer only: a transport that
// checksums while it copies (SummingSender) computes the CRC, so the bytes are read once;
// below any other (a hook or a fabric layer included, which see the header first) it is
// computed here.
func (cl *call) sendOne(peer int, op Op, aux uint32, seq uint64, part uint32, payload []byte) error {
	ss, ok := cl.c.t.(SummingSender)
	if !ok {
		return cl.sendSeq(peer, op, aux, seq, part, payload, Checksum(payload))
	}
	if err := ss.SendSummed(cl.ctx, cl.c.ranks[peer], cl.frame(op, aux, seq, part, payload)); err != nil {
		return cl.commErr(err, peer, "sending to")
	}
	return nil
}

func (cl *call) frame(op Op, aux uint32, seq uint64, part uint32, payload []byte) *Frame {
	return &Frame{Header: Header{Comm: cl.c.opts.ID, Seq: seq, Op: op, Red: cl.red, DType: cl.dt,
		Src: uint16(cl.c.ranks[cl.c.me]), Aux: aux, Count: uint64(len(payload) / cl.dt.Size()),
		Part: part}, Payload: payload}
}

// recv waits for the next frame from communicator rank peer and checks that it is the frame
// this call expects: anything else is E_DESYNC, so a wrong frame can never become data.
// wantCount < 0 accepts any count (the caller checks it against Aux).
func (cl *call) recv(peer int, op Op, wantCount int) (*Frame, error) {
	return cl.recvSeq(peer, op, cl.seq, 0, wantCount)
}

// recvSeq receives the frame at place part of the call seq's stream from peer under op, and
// checks every field of its header (Expect.Check), so the E_DESYNC names the field that is
// wrong and what the difference suggests happened.
func (cl *call) recvSeq(peer int, op Op, seq uint64, part uint32, wantCount int) (*Frame, error) {
	t0 := time.Now()
	done := cl.await(cl.c.ranks[peer])
	f, err := cl.c.t.Recv(cl.ctx, cl.c.opts.ID, cl.c.ranks[peer])
	done()
	if err != nil {
		return nil, cl.commErr(err, peer, "waiting for")
	}
	cl.waitedOn(peer, t0)
	h := f.Header
	if h.Op == OpAbort {
		return nil, cl.aborted(f)
	}
	want := Expect{Comm: cl.c.opts.ID, Src: uint16(cl.c.ranks[peer]), Seq: seq, Op: op, Red: cl.red, DType: cl.dt, Part: part, Count: wantCount}
	if fe := want.Check(f); fe != nil {
		return nil, DesyncError(cl.where(), cl.c.ranks[peer], fe)
	}
	return f, nil
}

// desync is the E_DESYNC for one field of a frame from communicator rank peer.
func (cl *call) desync(peer int, field, got, want, why string) error {
	return DesyncError(cl.where(), cl.c.ranks[peer], &FieldError{Field: field, Got: got, Want: want, Why: why})
}

func countStr(n int) string {
	if n < 0 {
		return "any"
	}
	return fmt.Sprint(n)
}

// commErr turns a transport or deadline error into a coded error naming the peer.
func (cl *call) commErr(err error, peer int, doing string) error {
	if errors.Is(err, context.DeadlineExceeded) {
		return errs.New(errs.TimeoutComm, "%s: %s rank %d: nothing within %s (rank %d is silent or stuck)",
			cl.where(), doing, cl.c.ranks[peer], time.Since(cl.start).Round(time.Millisecond), cl.c.ranks[peer])
	}
	if errors.Is(err, context.Canceled) {
		return errs.New(errs.TimeoutComm, "%s: %s rank %d: cancelled", cl.where(), doing, cl.c.ranks[peer])
	}
	return errs.Wrap(errs.TimeoutComm, err, "%s: %s rank %d", cl.where(), doing, cl.c.ranks[peer])
}

// each runs fn for every peer but this rank concurrently and returns the first error; the
// first failure cancels the others so no goroutine outlives the call.
func (cl *call) each(fn func(cl *call, peer int) error) error {
	var fns []func(*call) error
	for p := range cl.c.World() {
		if p != cl.c.me {
			fns = append(fns, func(cl *call) error { return fn(cl, p) })
		}
	}
	return cl.group(fns)
}
