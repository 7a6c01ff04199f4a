package dist

import (
	"context"
	"fmt"
	"slices"

	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/failpoint"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

// Every collective takes flat little-endian buffers of one dtype (tensor.Tensor.Data). A
// reduction is done by the member that owns a chunk, over the raw contributions of every
// rank, in the order the mode prescribes; transports never add.

// chunk returns the element range [lo, hi) that communicator rank j owns out of count.
func chunk(count, n, j int) (lo, hi int) { return j * count / n, (j + 1) * count / n }

func checkBuf(where string, dt numerics.DType, name string, b []byte) (int, error) {
	sz := dt.Size()
	if !dt.Valid() || sz == 0 {
		return 0, errs.New(errs.DType, "%s: invalid dtype %s", where, dt)
	}
	if len(b)%sz != 0 {
		return 0, errs.New(errs.Input, "%s: %s buffer of %d bytes is not a whole number of %s elements", where, name, len(b), dt)
	}
	return len(b) / sz, nil
}

// AllReduce reduces send over every rank into recv on every rank; recv may be send.
func (c *Comm) AllReduce(ctx context.Context, dt numerics.DType, send, recv []byte, op RedOp) error {
	return c.AllReduceMulti(ctx, dt, [][]byte{send}, recv, op)
}

// AllReduceEach reduces every buffer of bufs over every rank, in place, in one collective: the
// buffers travel laid end to end (a bucket), so a group of small tensors pays one collective's
// latency. Every rank must pass buffers of the same sizes in the same order. The reduction works
// element by element, so each buffer gets the bits its own AllReduce would give it.
func (c *Comm) AllReduceEach(ctx context.Context, dt numerics.DType, bufs [][]byte, op RedOp) error {
	if len(bufs) == 1 {
		return c.AllReduce(ctx, dt, bufs[0], bufs[0], op)
	}
	n := 0
	for _, b := range bufs {
		n += len(b)
	}
	joined := make([]byte, 0, n)
	for _, b := range bufs {
		joined = append(joined, b...)
	}
	if err := c.AllReduce(ctx, dt, joined, joined, op); err != nil {
		return err
	}
	order := bufs
	if failpoint.Enabled(failpoint.DistBucketSlicesReversed) {
		order = slices.Clone(bufs)
		slices.Reverse(order)
	}
	for _, b := range order {
		joined = joined[copy(b, joined):]
	}
	return nil
}

// AllReduceMulti is AllReduce where this rank contributes several buffers (in order). The
// global order of contributions is rank 0's, then rank 1's, ...; exact mode's bits depend only
// on the multiset of contributions, so the same data split over 1 or 8 ranks gives the same
// bits. Avg divides by the total number of contributions. recv may be parts[0].
func (c *Comm) AllReduceMulti(ctx context.Context, dt numerics.DType, parts [][]byte, recv []byte, op RedOp) (err error) {
	cl, done := c.begin(ctx, OpAllReduce, dt, op)
	defer done(&err)
	count, err := cl.checkParts(parts, recv)
	if err != nil {
		return err
	}
	lo, hi := chunk(count, c.World(), c.me)
	size := dt.Size()
	return cl.pipelined(parts, count, recv[lo*size:hi*size], recv, OpReduce, OpAllReduce)
}

func (cl *call) checkParts(parts [][]byte, recv []byte) (int, error) {
	if len(parts) == 0 {
		return 0, errs.New(errs.Input, "%s: no contributions", cl.where())
	}
	if !cl.red.valid() {
		return 0, errs.New(errs.Input, "%s: reduction %s is not one of sum, max, min, avg", cl.where(), cl.red)
	}
	count, err := checkBuf(cl.where(), cl.dt, "receive", recv)
	if err != nil {
		return 0, err
	}
	if cl.dt == numerics.Bool {
		return 0, errs.New(errs.DType, "%s: cannot reduce bool", cl.where())
	}
	for i, p := range parts {
		if len(p) != len(recv) {
			return 0, errs.New(errs.Input, "%s: contribution %d has %d bytes, the receive buffer %d", cl.where(), i, len(p), len(recv))
		}
	}
	if len(parts) > 1<<16 {
		return 0, errs.New(errs.Input, "%s: %d contributions on one rank exceed 65536", cl.where(), len(parts))
	}
	return count, nil
}

func (r RedOp) valid() bool { return r >= Sum && r < redLimit }

// gatherChunks returns the [lo, hi) byte range of every part, back to back; with one part it
// is a view, not a copy.
func gatherChunks(parts [][]byte, lo, hi int) []byte {
	if len(parts) == 1 {
		return parts[0][lo:hi]
	}
	out := make([]byte, 0, len(parts)*(hi-lo))
	for _, p := range parts {
		out = append(out, p[lo:hi]...)
	}
	return out
}

// ReduceScatter reduces send (World() chunks of len(recv) bytes) over every rank and leaves
// chunk r of the result in rank r's recv.
func (c *Comm) ReduceScatter(ctx context.Context, dt numerics.DType, send, recv []byte, op RedOp) (err error) {
	cl, done := c.begin(ctx, OpReduceScatter, dt, op)
	defer done(&err)
	per, err := cl.checkParts([][]byte{recv}, recv)
	if err != nil {
		return err
	}
	if len(send) != len(recv)*c.World() {
		return errs.New(errs.Input, "%s: send buffer of %d bytes, want world %d x receive %d", cl.where(), len(send), c.World(), len(recv))
	}
	// With count = n*per, chunk(count, n, j) is exactly rank j's receive buffer.
	n := c.World()
	// In place (recv is send's chunk for this rank) is fine: the reduction is elementwise.
	return cl.pipelined([][]byte{send}, per*n, recv, nil, OpReduceScatter, OpReduceScatter)
}

// AllGather concatenates every rank's send buffer, in rank order, into recv on every rank.
func (c *Comm) AllGather(ctx context.Context, dt numerics.DType, send, recv []byte) (err error) {
	cl, done := c.begin(ctx, OpAllGather, dt, RedNone)
	defer done(&err)
	count, err := checkBuf(cl.where(), dt, "send", send)
	if err != nil {
		return err
	}
	n, b := c.World(), len(send)
	if len(recv) != n*b {
		return errs.New(errs.Input, "%s: receive buffer of %d bytes, want world %d x send %d", cl.where(), len(recv), n, b)
	}
	// Send first from the caller's buffer, then place it: recv may overlap send in place.
	crc := Checksum(send)
	err = cl.each(func(cl *call, p int) error { return cl.sendSum(p, OpAllGather, 0, send, crc) })
	if err != nil {
		return err
	}
	copy(recv[c.me*b:(c.me+1)*b], send)
	return cl.each(func(cl *call, p int) error {
		f, err := cl.recv(p, OpAllGather, count)
		if err != nil {
			return err
		}
		copy(recv[p*b:(p+1)*b], f.Payload)
		c.recycle(f)
		return nil
	})
}

// Broadcast copies root's send buffer into recv on every rank (send is read only on root).
func (c *Comm) Broadcast(ctx context.Context, dt numerics.DType, send, recv []byte, root int) (err error) {
	cl, done := c.begin(ctx, OpBroadcast, dt, RedNone)
	defer done(&err)
	count, err := checkBuf(cl.where(), dt, "receive", recv)
	if err != nil {
		return err
	}
	if root < 0 || root >= c.World() {
		return errs.New(errs.Input, "%s: root %d outside world %d", cl.where(), root, c.World())
	}
	if c.me == root {
		if len(send) != len(recv) {
			return errs.New(errs.Input, "%s: root's send buffer has %d bytes, receive %d", cl.where(), len(send), len(recv))
		}
		crc := Checksum(send)
		if err := cl.each(func(cl *call, p int) error { return cl.sendSum(p, OpBroadcast, uint32(root), send, crc) }); err != nil {
			return err
		}
		copy(recv, send)
		return nil
	}
	f, err := cl.recv(root, OpBroadcast, count)
	if err != nil {
		return err
	}
	if int(f.Aux) != root {
		return cl.desync(root, "aux", fmt.Sprintf("root %d", f.Aux), fmt.Sprintf("root %d", root), "the ranks called broadcast with different roots")
	}
	copy(recv, f.Payload)
	c.recycle(f)
	return nil
}

// AllToAll sends chunk j of send to rank j and places rank q's chunk j=r at chunk q of recv.
func (c *Comm) AllToAll(ctx context.Context, dt numerics.DType, send, recv []byte) (err error) {
	cl, done := c.begin(ctx, OpAllToAll, dt, RedNone)
	defer done(&err)
	count, err := checkBuf(cl.where(), dt, "send", send)
	if err != nil {
		return err
	}
	n := c.World()
	if count%n != 0 || len(recv) != len(send) {
		return errs.New(errs.Input, "%s: send of %d elements must split evenly over %d ranks and equal the receive buffer (%d bytes vs %d)", cl.where(), count, n, len(send), len(recv))
	}
	b := len(send) / n
	if err := cl.each(func(cl *call, p int) error { return cl.send(p, OpAllToAll, 0, send[p*b:(p+1)*b]) }); err != nil {
		return err
	}
	// slot is where the chunk from rank q lands: q itself (the planted fault swaps ranks 0 and 1).
	slot := func(q int) int {
		if failpoint.Enabled(failpoint.DistAllToAllChunksSwapped) && n > 1 && q < 2 {
			return 1 - q
		}
		return q
	}
	at := slot(c.me)
	copy(recv[at*b:(at+1)*b], send[c.me*b:(c.me+1)*b])
	return cl.each(func(cl *call, p int) error {
		f, err := cl.recv(p, OpAllToAll, count/n)
		if err != nil {
			return err
		}
		at := slot(p)
		copy(recv[at*b:(at+1)*b], f.Payload)
		c.recycle(f)
		return nil
	})
}

// Barrier returns once every member has entered it.
func (c *Comm) Barrier(ctx context.Context) (err error) {
	cl, done := c.begin(ctx, OpBarrier, numerics.I8, RedNone)
	defer done(&err)
	if err := cl.each(func(cl *call, p int) error { return cl.send(p, OpBarrier, 0, nil) }); err != nil {
		return err
	}
	return cl.each(func(cl *call, p int) error { _, err := cl.recv(p, OpBarrier, 0); return err })
}

// Send delivers buf to communicator rank peer (pipeline stages). Point-to-point messages do not
// advance the collective sequence; each pair keeps its own, so a lost or repeated message is
// E_DESYNC at the receiver.
func (c *Comm) Send(ctx context.Context, dt numerics.DType, buf []byte, peer int) error {
	if _, err := checkBuf("send", dt, "send", buf); err != nil {
		return err
	}
	if peer < 0 || peer >= c.World() || peer == c.me {
		return errs.New(errs.Input, "rank %d: send to peer %d (world %d)", c.ranks[c.me], peer, c.World())
	}
	cctx, cancel := context.WithTimeout(ctx, c.opts.Timeout)
	defer cancel()
	cl := &call{c: c, ctx: cctx, op: OpSend, dt: dt, seq: c.nextP2P(c.p2pSend, peer), waiting: c.newAwaitSet()}
	return cl.sendOne(peer, OpSend, 0, cl.seq, 0, buf)
}

// Recv receives into buf the next message from communicator rank peer.
func (c *Comm) Recv(ctx context.Context, dt numerics.DType, buf []byte, peer int) error {
	count, err := checkBuf("recv", dt, "receive", buf)
	if err != nil {
		return err
	}
	if peer < 0 || peer >= c.World() || peer == c.me {
		return errs.New(errs.Input, "rank %d: receive from peer %d (world %d)", c.ranks[c.me], peer, c.World())
	}
	cctx, cancel := context.WithTimeout(ctx, c.opts.Timeout)
	defer cancel()
	cl := &call{c: c, ctx: cctx, op: OpSend, dt: dt, seq: c.nextP2P(c.p2pRecv, peer), waiting: c.newAwaitSet()}
	f, err := cl.recvSeq(peer, OpSend, cl.seq, 0, count)
	if err != nil {
		return err
	}
	copy(buf, f.Payload)
	c.recycle(f)
	return nil
}

// nextP2P advances one pair's point-to-point counter. Only the counter is locked: a pipeline
// stage may send and receive at the same time without waiting on collectives.
func (c *Comm) nextP2P(ctr []uint64, peer int) uint64 {
	c.p2pMu.Lock()
	defer c.p2pMu.Unlock()
	ctr[peer]++
	return ctr[peer]
}
