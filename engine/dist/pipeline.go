package dist

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/failpoint"
)

// segmentBytes is the unit of the reduction pipeline: small enough that the reduction of one
// segment overlaps the transfer of the next, large enough that per-frame costs vanish.
const segmentBytes = 1 << 20

// segments splits a chunk of n elements into pipeline segments of at most per elements. An
// empty chunk still has one (empty) segment, so every pair exchanges at least one frame and a
// mismatched call is caught.
func segments(n, per int) int {
	if n == 0 {
		return 1
	}
	return (n + per - 1) / per
}

// pipelined is the reduce-scatter (and, when gather is set, the following all-gather) of
// parts over the communicator. Each owner's chunk moves in segments: as soon as every rank's
// contributions to segment k of this rank's chunk have arrived, the segment is reduced (in the
// mode's order, into mine) and sent on to every peer while later segments are still in
// flight. The arithmetic per element is the same as without segments, so the bits are too.
//
// mine is where this rank's reduced chunk goes; with gather, full is the whole receive buffer
// and mine is its slice for this rank. full may alias parts[0]: a peer sends its reduced
// segment k only after receiving this rank's segment k, so by then the transport is done with
// the bytes that the segment overwrites.
func (cl *call) pipelined(parts [][]byte, count int, mine, full []byte, opA, opB Op) error {
	n, me, size := cl.c.World(), cl.c.me, cl.dt.Size()
	per := max(1, segmentBytes/size)
	lo, hi := chunk(count, n, me)
	nseg := segments(hi-lo, per)
	seg := func(chunkLen, k int) (int, int) {
		a, b := k*per, min(chunkLen, (k+1)*per)
		if k > 0 && b-a < per && failpoint.Enabled(failpoint.DistRaggedTailDropped) {
			b = a // the partial last segment of a multi-segment chunk is never sent, reduced or gathered
		}
		return a, b
	}

	// got[k][q]: rank q's contributions to segment k of this rank's chunk.
	got := make([][][][]byte, nseg)
	for k := range got {
		got[k] = make([][][]byte, n)
		a, b := seg(hi-lo, k)
		for _, p := range parts {
			got[k][me] = append(got[k][me], p[(lo+a)*size:(lo+b)*size])
		}
	}
	var mu sync.Mutex
	frames := make([][]*Frame, nseg) // received frames of segment k, recycled once it is reduced
	arrived := make([]int, nseg)
	ready := make([]chan struct{}, nseg) // closed when segment k of mine is reduced
	sums := make([]uint32, nseg)         // its checksum, computed once for every peer
	for k := range ready {
		ready[k] = make(chan struct{})
	}
	complete := make(chan int, nseg) // segment k has every peer's contributions
	// With one peer a transport that checksums while it copies (SummingSender) sums the
	// reduced segment on its way out, instead of a pass of its own here.
	_, summing := cl.c.t.(SummingSender)
	sumOnSend := summing && n == 2

	// The all-gather phase's frames land straight in full where the transport can do that
	// (dist.Lander), and the first phase's are read in place (dist.Lender): the reducer adds
	// straight from the transport's memory and recycles each segment's frames once it is
	// reduced, never waiting on their senders in between. Both are posted before anything is
	// sent, so every frame is read after its post; a loan's size is that of this rank's own
	// contributions (a peer that sends another count arrives copied). Only the bottom
	// transport lands or lends; a layer above it (hooks, a fabric) must see each frame.
	ld, lands := cl.c.t.(Lander)
	le, lends := cl.c.t.(Lender)
	for p := 0; p < n; p++ {
		if p == me {
			continue
		}
		for k := range nseg {
			if lends {
				a, b := seg(hi-lo, k)
				defer le.Lend(cl.c.opts.ID, cl.c.ranks[p], cl.seq, uint32(k), len(parts)*(b-a)*size)()
			}
		}
		if lands && full != nil {
			plo, phi := chunk(count, n, p)
			for k := range segments(phi-plo, per) {
				a, b := seg(phi-plo, k)
				defer ld.Land(cl.c.opts.ID, cl.c.ranks[p], cl.seq, uint32(nseg+k), full[(plo+a)*size:(plo+b)*size])()
			}
		}
	}

	var fns []func(*call) error
	for p := 0; p < n; p++ {
		if p == me {
			continue
		}
		plo, phi := chunk(count, n, p)
		fns = append(fns, func(cl *call) error { // to p: its chunk's segments, then ours reduced
			for k := range segments(phi-plo, per) {
				a, b := seg(phi-plo, k)
				payload := gatherChunks(parts, (plo+a)*size, (plo+b)*size)
				if err := cl.sendOne(p, opA, uint32(len(parts)), cl.seq, uint32(k), payload); err != nil {
					return err
				}
			}
			if full == nil {
				return nil
			}
			for k := range nseg {
				select {
				case <-ready[k]:
				case <-cl.ctx.Done():
					return cl.commErr(cl.ctx.Err(), p, "sending to")
				}
				a, b := seg(hi-lo, k)
				// Parts count on across the phases, so a frame of the first phase arriving in
				// the second is a part this call already had, not another op.
				part := uint32(segments(phi-plo, per) + k)
				var err error
				if sumOnSend {
					err = cl.sendOne(p, opB, 0, cl.seq, part, mine[a*size:b*size])
				} else {
					err = cl.sendSeq(p, opB, 0, cl.seq, part, mine[a*size:b*size], sums[k])
				}
				if err != nil {
					return err
				}
			}
			return nil
		}, func(cl *call) error { // from p: its contributions to our segments, then its chunk
			for k := range nseg {
				f, err := cl.recvSeq(p, opA, cl.seq, uint32(k), -1)
				if err != nil {
					return err
				}
				a, b := seg(hi-lo, k)
				m, w := int(f.Aux), b-a
				if m < 1 || int(f.Count) != m*w {
					return cl.desync(p, "count", fmt.Sprintf("%d elements as %d contributions", f.Count, m), fmt.Sprintf("a multiple of the segment's %d elements", w),
						"the ranks called with different counts")
				}
				contrib := make([][]byte, m)
				for i := range contrib {
					contrib[i] = f.Payload[i*w*size : (i+1)*w*size]
				}
				mu.Lock()
				got[k][p] = contrib
				frames[k] = append(frames[k], f)
				arrived[k]++
				if arrived[k] == n-1 {
					complete <- k
				}
				mu.Unlock()
			}
			if full == nil {
				return nil
			}
			for k := range segments(phi-plo, per) {
				a, b := seg(phi-plo, k)
				f, err := cl.recvSeq(p, opB, cl.seq, uint32(nseg+k), b-a)
				if err != nil {
					return err
				}
				if dst := full[(plo+a)*size : (plo+b)*size]; !Landed(f, dst) {
					copy(dst, f.Payload)
				}
				cl.c.recycle(f)
			}
			return nil
		})
	}
	fns = append(fns, func(cl *call) error { // the reducer, in segment order
		done := make([]bool, nseg)
		next := 0
		for next < nseg {
			if n > 1 && !done[next] {
				select {
				case k := <-complete:
					done[k] = true
					continue
				case <-cl.ctx.Done():
					return cl.missing(got[next], &mu)
				}
			}
			mu.Lock()
			contribs := got[next]
			var deferred []*Frame // lent frames whose checksum is the reducer's (Frame.DeferSum)
			for _, f := range frames[next] {
				if f.Deferred() {
					deferred = append(deferred, f)
				}
			}
			mu.Unlock()
			ordered := make([][]byte, 0, n*len(parts))
			for i := 0; i < n; i++ {
				q := i
				if me == n-1 && failpoint.Enabled(failpoint.DistLastChunkReversed) {
					q = n - 1 - i // the last chunk's owner adds rank n-1 first
				}
				if cl.c.opts.Mode == Fast {
					q = (me + i) % n // a ring's order: it differs per chunk, which fast mode allows
				}
				ordered = append(ordered, contribs[q]...)
			}
			a, b := seg(hi-lo, next)
			if err := cl.reduceChecked(ordered, mine[a*size:b*size], deferred); err != nil {
				return err
			}
			if full != nil && !sumOnSend {
				sums[next] = Checksum(mine[a*size : b*size]) // while the segment is still in cache
			}
			close(ready[next])
			mu.Lock()
			cl.c.recycle(frames[next]...)
			frames[next] = nil
			mu.Unlock()
			next++
		}
		return nil
	})
	return cl.group(fns)
}

// reducePiece is the unit in which reduceChecked checksums and adds: it fits in L1 beside the
// other contributions' pieces, and is a whole number of vector steps of every dtype.
const reducePiece = 16 << 10

// reduceChecked is reduce(ins -> out) that also checks the checksums the transport left to it
// (deferred: frames read in place, Frame.DeferSum). A lent payload that is one contribution is
// checksummed a piece at a time right before that piece is added, so the add reads it from L1
// instead of reading the transport's memory a second time; one that holds several
// contributions is checksummed whole first. The reduction is element-wise, so the pieces give
// the bits of one whole call. A mismatch is that frame's E_DESYNC, before the segment is sent
// on: out then holds what any failed call leaves in its buffer, nothing the call returns.
func (cl *call) reduceChecked(ins [][]byte, out []byte, deferred []*Frame) error {
	red := func(ins [][]byte, out []byte) error {
		if err := reduce(cl.c.opts.Mode, cl.dt, cl.red, ins, out); err != nil {
			return errs.Wrap(errs.Internal, err, "%s", cl.where())
		}
		return nil
	}
	var piecewise []*Frame
	for _, f := range deferred {
		if len(f.Payload) == len(out) {
			piecewise = append(piecewise, f)
		} else if fe := f.CheckSum(Checksum(f.Payload)); fe != nil {
			return DesyncError(cl.where(), int(f.Src), fe)
		}
	}
	if len(piecewise) == 0 {
		return red(ins, out)
	}
	sums := make([]uint32, len(piecewise))
	sub := make([][]byte, len(ins))
	for off := 0; off < len(out); off += reducePiece {
		end := min(len(out), off+reducePiece)
		for j, f := range piecewise {
			sums[j] = UpdateChecksum(sums[j], f.Payload[off:end])
		}
		for i, in := range ins {
			sub[i] = in[off:end]
		}
		if err := red(sub, out[off:end]); err != nil {
			return err
		}
	}
	for j, f := range piecewise {
		if fe := f.CheckSum(sums[j]); fe != nil {
			return DesyncError(cl.where(), int(f.Src), fe)
		}
	}
	return nil
}

// group runs fns concurrently. The first failure cancels the rest, so no goroutine outlives the
// call; of the errors they return, the most telling wins: a peer's own reason (an abort frame),
// then a mismatch, then anything else, and a bare cancellation last.
func (cl *call) group(fns []func(*call) error) error {
	if len(fns) == 0 {
		return nil
	}
	ctx, cancel := context.WithCancel(cl.ctx)
	defer cancel()
	inner := *cl
	inner.ctx = ctx
	var wg sync.WaitGroup
	var mu sync.Mutex
	var best error
	for _, fn := range fns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := fn(&inner); err != nil {
				mu.Lock()
				if best == nil || rank(err) < rank(best) {
					best = err
				}
				mu.Unlock()
				cancel()
			}
		}()
	}
	wg.Wait()
	if best == context.Canceled || best == context.DeadlineExceeded {
		return errs.New(errs.TimeoutComm, "%s: %v", cl.where(), best)
	}
	return best
}

// rank orders errors by how much they say about the cause (lower says more). Of the timeouts,
// the reducer's list of contributions that never came names the silent rank itself; a wait for
// a peer's reduced segment may only see that peer blocked on the silent one.
func rank(err error) int {
	var ab abortErr
	switch {
	case errors.As(err, &ab):
		return 0
	case errs.CodeOf(err) == errs.Desync:
		return 1
	case errors.As(err, new(silentErr)):
		return 2
	case errors.Is(err, context.Canceled), strings.Contains(err.Error(), "cancelled"):
		return 4
	}
	return 3
}

// silentErr is missing's E_TIMEOUT_COMM: it names the ranks whose contributions never came.
type silentErr struct{ error }

func (e silentErr) Unwrap() error { return e.error }

// missing names the ranks whose contributions to a segment never came.
func (cl *call) missing(seg [][][]byte, mu *sync.Mutex) error {
	mu.Lock()
	defer mu.Unlock()
	var silent []int
	for q, c := range seg {
		if c == nil {
			silent = append(silent, cl.c.ranks[q])
		}
	}
	if len(silent) == 0 || cl.ctx.Err() != context.DeadlineExceeded {
		return errs.New(errs.TimeoutComm, "%s: cancelled", cl.where())
	}
	return silentErr{errs.New(errs.TimeoutComm, "%s: no contribution from rank(s) %v within %s (rank %d is silent or stuck)",
		cl.where(), silent, time.Since(cl.start).Round(time.Millisecond), silent[0])}
}
