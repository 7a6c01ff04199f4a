package cudaipc

import (
	"context"
	"encoding/binary"

	"github.com/tessera-qa/tessera-qa/engine/backend/cuda"
	"github.com/tessera-qa/tessera-qa/engine/dist"
	"github.com/tessera-qa/tessera-qa/engine/dist/devreduce"
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

// Counts follow NCCL: AllReduce and Broadcast move count elements; AllGather's count is each
// rank's contribution (recv holds World()*count); ReduceScatter's count is each rank's result
// (send holds World()*count); AllToAll's count is the block per peer (send and recv hold
// World()*count). Pointers are device addresses on this rank's device; an Alloc'ed buffer is
// read by peers in place, any other pointer is staged through the scratch allocation.
//
// In place: AllReduce and Broadcast with send == recv, AllGather with send == recv +
// rank*count elements, ReduceScatter with recv == send + rank*count elements. Any other
// overlap (AllToAll in place included) is staged, so it is correct too, at one more copy.
//
// Every call enqueues the work on the device's stream and returns; Synchronize waits.

// ref tells a peer where to read: one of this rank's allocations, an offset and the bytes
// available from there (a peer checks its reads against them).
type ref struct {
	id, size, off uint64
	handle        cuda.IPCMemHandle
}

const refBytes = 3*8 + 64

// desc is a collective's first message: the call's arguments (every peer checks them against
// its own) and where this rank's data lies.
type desc struct {
	op       dist.Op
	dt       numerics.DType
	red      dist.RedOp
	root     uint32
	count    uint64
	src, res ref
}

const descBytes = 4 + 4 + 8 + 2*refBytes

func (d desc) marshal() []byte {
	b := make([]byte, 0, descBytes)
	b = append(b, byte(d.op), byte(d.dt), byte(d.red), 0)
	b = binary.LittleEndian.AppendUint32(b, d.root)
	b = binary.LittleEndian.AppendUint64(b, d.count)
	for _, r := range []ref{d.src, d.res} {
		b = binary.LittleEndian.AppendUint64(b, r.id)
		b = binary.LittleEndian.AppendUint64(b, r.size)
		b = binary.LittleEndian.AppendUint64(b, r.off)
		b = append(b, r.handle.Reserved[:]...)
	}
	return b
}

func unmarshalDesc(b []byte) (desc, bool) {
	var d desc
	if len(b) != descBytes {
		return d, false
	}
	d.op, d.dt, d.red = dist.Op(b[0]), numerics.DType(b[1]), dist.RedOp(b[2])
	d.root = binary.LittleEndian.Uint32(b[4:])
	d.count = binary.LittleEndian.Uint64(b[8:])
	at := 16
	for _, r := range []*ref{&d.src, &d.res} {
		r.id = binary.LittleEndian.Uint64(b[at:])
		r.size = binary.LittleEndian.Uint64(b[at+8:])
		r.off = binary.LittleEndian.Uint64(b[at+16:])
		copy(r.handle.Reserved[:], b[at+24:at+24+64])
		at += refBytes
	}
	return d, true
}

// chunk is the element range [lo, hi) that rank j owns out of count (engine/dist's split).
func chunk(count, n, j int) (lo, hi int) { return j * count / n, (j + 1) * count / n }

func overlap(a uint64, an int, b uint64, bn int) bool {
	return an > 0 && bn > 0 && a < b+uint64(bn) && b < a+uint64(an)
}

// exported returns the ref peers use to read [p, p+n) of this rank, and the address this rank
// itself reads it at: the buffer in place when it is Alloc'ed and stage is false, else a
// staging copy at scratch offset 0.
func (cl *call) exported(p uint64, n int, stage bool) (ref, uint64, error) {
	c := cl.c
	if n == 0 || (c.world == 1 && !stage) {
		return ref{}, p, nil
	}
	if b := c.find(p, n); b != nil && !stage {
		return ref{id: b.id, size: uint64(b.size), off: p - b.ptr, handle: b.handle}, p, nil
	}
	if n > 0 {
		if err := c.dev.CopyAsync(c.scratch.ptr, p, n); err != nil {
			return ref{}, 0, err
		}
	}
	s := c.scratch
	return ref{id: s.id, size: uint64(s.size), handle: s.handle}, s.ptr, nil
}

// peer returns the address here of n bytes at r.off+extra in rank p's allocation, mapping
// the allocation on first use.
func (cl *call) peer(p int, r ref, extra, n int) (uint64, error) {
	c := cl.c
	if n == 0 {
		return 0, nil
	}
	if r.id == 0 || r.off+uint64(extra)+uint64(n) > r.size {
		return 0, errs.New(errs.Desync, "%s: rank %d offers %d bytes at offset %d of its %d-byte buffer %d, this rank needs %d at +%d",
			cl.where(), p, r.size-min(r.off, r.size), r.off, r.size, r.id, n, extra)
	}
	key := peerBuf{p, r.id}
	m, ok := c.mapped[key]
	if !ok {
		addr, err := c.dev.ImportMem(r.handle)
		if err != nil {
			return 0, errs.New(errs.CommInit, "%s: cannot map rank %d's buffer %d through CUDA IPC: %v", cl.where(), p, r.id, err)
		}
		m = mapping{addr: addr, size: r.size}
		c.mapped[key] = m
	}
	return m.addr + r.off + uint64(extra), nil
}

// agree sends d with the first fence and checks every peer called the same collective.
func (cl *call) agree(d desc) ([]desc, error) {
	got, err := cl.fence(1, d.marshal())
	if err != nil {
		return nil, err
	}
	out := make([]desc, len(got))
	for p, b := range got {
		pd, ok := unmarshalDesc(b)
		if !ok {
			return nil, cl.fail(errs.New(errs.Desync, "%s: rank %d sent a %d-byte descriptor", cl.where(), p, len(b)))
		}
		if pd.op != d.op || pd.dt != d.dt || pd.red != d.red || pd.root != d.root || pd.count != d.count {
			return nil, cl.fail(errs.New(errs.Desync, "%s: rank %d called %s %s count=%d red=%s root=%d, this rank %s %s count=%d red=%s root=%d",
				cl.where(), p, pd.op, pd.dt, pd.count, pd.red, pd.root, d.op, d.dt, d.count, d.red, d.root))
		}
		out[p] = pd
	}
	return out, nil
}

func (cl *call) checkArgs(dt numerics.DType, count int) error {
	if !dt.Valid() || dt.Size() == 0 {
		return errs.New(errs.DType, "%s: invalid dtype %s", cl.where(), dt)
	}
	if count < 0 {
		return errs.New(errs.Input, "%s: negative count %d", cl.where(), count)
	}
	return nil
}

func (cl *call) checkReduce(dt numerics.DType, op dist.RedOp) error {
	if cl.c.opts.Mode == dist.Exact {
		return errs.New(errs.Unsupported, "%s: exact mode is not implemented on the device (use engine/dist's host communicator)", cl.where())
	}
	return devreduce.Check(dt, op, cl.c.world)
}

// reduce launches the devreduce kernel: out[i] = op over ins[0][i] .. ins[n-1][i].
func (cl *call) reduce(dt numerics.DType, op dist.RedOp, out uint64, count int, ins []uint64) error {
	if count == 0 {
		return nil
	}
	k, err := devreduce.Generate(dt, op, len(ins))
	if err != nil {
		return err
	}
	args, err := k.Args(out, count, ins)
	if err != nil {
		return err
	}
	return cl.c.dev.Launch(k.PTX, k.Entry, devreduce.Grid(count, cl.c.sms), devreduce.Threads, args)
}

// run executes a collective's body, making any failure sticky.
func (c *DeviceComm) run(ctx context.Context, op dist.Op, body func(cl *call) error) error {
	cl, done, err := c.begin(ctx, op)
	if err != nil {
		return err
	}
	defer done()
	if err := body(cl); err != nil {
		// An argument error found before any frame went out leaves the communicator usable
		// (the peers time out waiting for this rank, naming it, as on the host transports).
		if !cl.talked {
			return err
		}
		return cl.fail(err)
	}
	return nil
}

// AllReduce reduces count elements of send over every rank into recv on every rank, adding
// in rank order (devreduce): rank r reduces its chunk from every rank's send, then every rank
// copies every chunk from its owner.
func (c *DeviceComm) AllReduce(ctx context.Context, dt numerics.DType, send, recv uint64, count int, op dist.RedOp) error {
	return c.run(ctx, dist.OpAllReduce, func(cl *call) error {
		if err := cl.checkArgs(dt, count); err != nil {
			return err
		}
		if err := cl.checkReduce(dt, op); err != nil {
			return err
		}
		n, me, size := c.world, c.rank, dt.Size()
		bytes := count * size
		lo, hi := chunk(count, n, me)
		maxChunk := (count + n - 1) / n
		stage := send != recv && overlap(send, bytes, recv, bytes)
		if err := cl.ensureScratch(bytes+maxChunk*size, stage); err != nil {
			return err
		}
		src, srcAddr, err := cl.exported(send, bytes, stage)
		if err != nil {
			return err
		}
		// Peers read this rank's reduced chunk: from recv when it is Alloc'ed, else from the
		// scratch after the staged input.
		res, resAddr := ref{}, recv+uint64(lo*size)
		if n > 1 && hi > lo {
			if b := c.find(recv, bytes); b != nil {
				res = ref{id: b.id, size: uint64(b.size), off: recv + uint64(lo*size) - b.ptr, handle: b.handle}
			} else {
				s := c.scratch
				res = ref{id: s.id, size: uint64(s.size), off: uint64(bytes), handle: s.handle}
				resAddr = s.ptr + uint64(bytes)
			}
		}
		descs, err := cl.agree(desc{op: dist.OpAllReduce, dt: dt, red: op, count: uint64(count), src: src, res: res})
		if err != nil {
			return err
		}
		ins := make([]uint64, n)
		for q := range n {
			if q == me {
				ins[q] = srcAddr + uint64(lo*size)
				continue
			}
			if ins[q], err = cl.peer(q, descs[q].src, lo*size, (hi-lo)*size); err != nil {
				return err
			}
		}
		if err := cl.reduce(dt, op, resAddr, hi-lo, ins); err != nil {
			return err
		}
		if mine := recv + uint64(lo*size); resAddr != mine && hi > lo {
			if err := c.dev.CopyAsync(mine, resAddr, (hi-lo)*size); err != nil {
				return err
			}
		}
		if _, err := cl.fence(2, nil); err != nil {
			return err
		}
		for q := range n {
			plo, phi := chunk(count, n, q)
			if q == me || phi == plo {
				continue
			}
			from, err := cl.peer(q, descs[q].res, 0, (phi-plo)*size)
			if err != nil {
				return err
			}
			if err := c.dev.CopyAsync(recv+uint64(plo*size), from, (phi-plo)*size); err != nil {
				return err
			}
		}
		_, err = cl.fence(3, nil)
		return err
	})
}

// ReduceScatter reduces World()*count elements of send over every rank and leaves block r of
// the result in rank r's recv (count elements).
func (c *DeviceComm) ReduceScatter(ctx context.Context, dt numerics.DType, send, recv uint64, count int, op dist.RedOp) error {
	return c.run(ctx, dist.OpReduceScatter, func(cl *call) error {
		if err := cl.checkArgs(dt, count); err != nil {
			return err
		}
		if err := cl.checkReduce(dt, op); err != nil {
			return err
		}
		n, me, size := c.world, c.rank, dt.Size()
		b := count * size
		stage := recv != send+uint64(me*b) && overlap(send, n*b, recv, b)
		if err := cl.ensureScratch(n*b, stage); err != nil {
			return err
		}
		src, srcAddr, err := cl.exported(send, n*b, stage)
		if err != nil {
			return err
		}
		descs, err := cl.agree(desc{op: dist.OpReduceScatter, dt: dt, red: op, count: uint64(count), src: src})
		if err != nil {
			return err
		}
		ins := make([]uint64, n)
		for q := range n {
			if q == me {
				ins[q] = srcAddr + uint64(me*b)
				continue
			}
			if ins[q], err = cl.peer(q, descs[q].src, me*b, b); err != nil {
				return err
			}
		}
		if err := cl.reduce(dt, op, recv, count, ins); err != nil {
			return err
		}
		_, err = cl.fence(2, nil)
		return err
	})
}

// AllGather places rank q's count elements of send at block q of recv on every rank.
func (c *DeviceComm) AllGather(ctx context.Context, dt numerics.DType, send, recv uint64, count int) error {
	return c.run(ctx, dist.OpAllGather, func(cl *call) error {
		if err := cl.checkArgs(dt, count); err != nil {
			return err
		}
		n, me, b := c.world, c.rank, count*dt.Size()
		stage := send != recv+uint64(me*b) && overlap(send, b, recv, n*b)
		if err := cl.ensureScratch(b, stage); err != nil {
			return err
		}
		src, srcAddr, err := cl.exported(send, b, stage)
		if err != nil {
			return err
		}
		descs, err := cl.agree(desc{op: dist.OpAllGather, dt: dt, count: uint64(count), src: src})
		if err != nil {
			return err
		}
		for q := range n {
			dst := recv + uint64(q*b)
			from := srcAddr
			if q != me {
				if from, err = cl.peer(q, descs[q].src, 0, b); err != nil {
					return err
				}
			}
			if from != dst {
				if err := c.dev.CopyAsync(dst, from, b); err != nil {
					return err
				}
			}
		}
		_, err = cl.fence(2, nil)
		return err
	})
}

// Broadcast copies root's count elements of send into recv on every rank (send is read on
// root only).
func (c *DeviceComm) Broadcast(ctx context.Context, dt numerics.DType, send, recv uint64, count, root int) error {
	return c.run(ctx, dist.OpBroadcast, func(cl *call) error {
		if err := cl.checkArgs(dt, count); err != nil {
			return err
		}
		if root < 0 || root >= c.world {
			return errs.New(errs.Input, "%s: root %d outside world %d", cl.where(), root, c.world)
		}
		me, b := c.rank, count*dt.Size()
		stage := me == root && send != recv && overlap(send, b, recv, b)
		if err := cl.ensureScratch(b, stage); err != nil {
			return err
		}
		var src ref
		srcAddr := send
		if me == root {
			var err error
			if src, srcAddr, err = cl.exported(send, b, stage); err != nil {
				return err
			}
		}
		descs, err := cl.agree(desc{op: dist.OpBroadcast, dt: dt, count: uint64(count), root: uint32(root), src: src})
		if err != nil {
			return err
		}
		from := srcAddr
		if me != root && b > 0 {
			if from, err = cl.peer(root, descs[root].src, 0, b); err != nil {
				return err
			}
		}
		if from != recv && b > 0 {
			if err := c.dev.CopyAsync(recv, from, b); err != nil {
				return err
			}
		}
		_, err = cl.fence(2, nil)
		return err
	})
}

// AllToAll sends block j (count elements) of send to rank j, which places it at block r of
// its recv (r the sender).
func (c *DeviceComm) AllToAll(ctx context.Context, dt numerics.DType, send, recv uint64, count int) error {
	return c.run(ctx, dist.OpAllToAll, func(cl *call) error {
		if err := cl.checkArgs(dt, count); err != nil {
			return err
		}
		n, me, b := c.world, c.rank, count*dt.Size()
		stage := overlap(send, n*b, recv, n*b)
		if err := cl.ensureScratch(n*b, stage); err != nil {
			return err
		}
		src, srcAddr, err := cl.exported(send, n*b, stage)
		if err != nil {
			return err
		}
		descs, err := cl.agree(desc{op: dist.OpAllToAll, dt: dt, count: uint64(count), src: src})
		if err != nil {
			return err
		}
		for q := range n {
			from := srcAddr + uint64(me*b)
			if q != me {
				if from, err = cl.peer(q, descs[q].src, me*b, b); err != nil {
					return err
				}
			}
			if b > 0 {
				if err := c.dev.CopyAsync(recv+uint64(q*b), from, b); err != nil {
					return err
				}
			}
		}
		_, err = cl.fence(2, nil)
		return err
	})
}
