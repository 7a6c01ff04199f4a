package dist

import (
	"context"
	"fmt"
	"math"
	"sync"
	"unsafe"

	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

// Hierarchical all_reduce: the route of a rack (fast links inside a node, a slower network
// between nodes) with the bits of the flat algorithm.
//
// The communicator's ranks form nodes of nodeSize consecutive ranks (node g holds ranks
// g*nodeSize .. g*nodeSize+nodeSize-1). Local rank l of every node owns chunk l of the buffer:
//
//  1. inside each node, every rank sends each local peer that peer's chunk of its buffer (the
//     raw contributions: a reduce-scatter that does not add yet);
//  2. across nodes, the owners of chunk l form a chain in node order: node 0's owner starts
//     the ordered sum with its node's contributions (ranks in order), sends the running sum
//     on to node 1's owner, which continues it with its own node's contributions, and so on;
//     the last node rounds the sum to the dtype and sends the result back down the chain
//     (both directions pipelined in segments);
//  3. inside each node, the owners all-gather their chunks.
//
// The running sum travels in the accumulator's own precision (f32 for f32 and the narrower
// floats, f64 for f64, int64 for ints) and is continued, never restarted, so every element
// sees exactly the additions of reduce's deterministic sum, in global rank order: the same
// bits as AllReduce, whatever the node size. Only the route differs: each rank sends
// (nodeSize-1)/nodeSize of the buffer over the fast links and a 1/nodeSize chunk (twice, as
// accumulators and results) over the network, where the flat algorithm sends nearly all of it
// over the network.
//
// Exact mode, max and min, one-rank nodes, one node and worlds nodeSize does not divide take
// the flat algorithm (UsesHier says which): exact mode's bits are the same on any route, so
// a chain would only add latency; max and min need no order.

// UsesHier reports whether AllReduceHier takes the hierarchical route for this communicator,
// reduction and node size (false: the flat AllReduce).
func (c *Comm) UsesHier(op RedOp, nodeSize int) bool {
	n := c.World()
	return nodeSize > 1 && nodeSize < n && n%nodeSize == 0 && c.opts.Mode != Exact && (op == Sum || op == Avg)
}

// AllReduceHier is AllReduce over nodes of nodeSize consecutive ranks (see above); recv may
// be send. Every rank must pass the same nodeSize.
func (c *Comm) AllReduceHier(ctx context.Context, dt numerics.DType, send, recv []byte, op RedOp, nodeSize int) (err error) {
	if !c.UsesHier(op, nodeSize) {
		return c.AllReduce(ctx, dt, send, recv, op)
	}
	cl, done := c.begin(ctx, OpAllReduce, dt, op)
	defer done(&err)
	count, err := cl.checkParts([][]byte{send}, recv)
	if err != nil {
		return err
	}
	return cl.hier(send, recv, count, nodeSize)
}

// The Aux field of the hierarchical route's frames says which step a frame belongs to (the
// receiver does not check it; a modeled fabric times each step's sends from what they wait
// for): the raw contributions inside a node, the running sum up the chain (0), the result
// down it, the gather inside the node.
const (
	hierAuxLocal  = 1
	hierAuxResult = 2
	hierAuxGather = 3
)

// HierSegmentBytes is the running sum's segment on the chain (the pipeline's unit).
const HierSegmentBytes = segmentBytes

// AccBytes is the bytes of one element of a chain's running sum for dt.
func AccBytes(dt numerics.DType) int { return accSize(dt) }

// accSize is the bytes of one element of a chain's running sum.
func accSize(dt numerics.DType) int {
	if dt == numerics.F64 || dt.IsInt() {
		return 8
	}
	return 4
}

func (cl *call) hier(send, recv []byte, count, L int) error {
	n, me, size := cl.c.World(), cl.c.me, cl.dt.Size()
	G, g, l := n/L, me/L, me%L
	base := g * L
	lo, hi := chunk(count, L, l)
	m := hi - lo
	as := accSize(cl.dt)
	per := max(1, segmentBytes/as)
	nseg := segments(m, per)
	seg := func(k int) (int, int) { return k * per, min(m, (k+1)*per) }

	// 1. Inside the node: the raw contributions to every local chunk.
	contribs := make([][]byte, L)
	contribs[l] = send[lo*size : hi*size]
	var frames []*Frame
	var fmu sync.Mutex
	var fns []func(*call) error
	for q := 0; q < L; q++ {
		if q == l {
			continue
		}
		qlo, qhi := chunk(count, L, q)
		fns = append(fns, func(cl *call) error {
			return cl.send(base+q, OpReduce, hierAuxLocal, send[qlo*size:qhi*size])
		}, func(cl *call) error {
			f, err := cl.recvSeq(base+q, OpReduce, cl.seq, 0, m)
			if err != nil {
				return err
			}
			fmu.Lock()
			contribs[q] = f.Payload
			frames = append(frames, f)
			fmu.Unlock()
			return nil
		})
	}
	if err := cl.group(fns); err != nil {
		return err
	}

	// 2. Across nodes: the running sum up the chain, the result back down.
	acc := make([]byte, m*as)
	mine := recv[lo*size : hi*size]
	prev, next := me-L, me+L
	up := func(cl *call) error {
		for k := range nseg {
			a, b := seg(k)
			part := acc[a*as : b*as]
			if g > 0 {
				f, err := cl.recvSeq(prev, OpReduce, cl.seq, uint32(1+k), -1)
				if err != nil {
					return err
				}
				if len(f.Payload) != len(part) {
					return cl.desync(prev, "count", fmt.Sprintf("%d bytes of running sum", len(f.Payload)), fmt.Sprintf("%d", len(part)), "the ranks called with different counts or node sizes")
				}
				copy(part, f.Payload)
				cl.c.recycle(f)
			}
			ins := make([][]byte, L)
			for q := range ins {
				ins[q] = contribs[q][a*size : b*size]
			}
			foldAcc(cl.dt, part, g > 0, ins)
			if g < G-1 {
				if err := cl.sendOne(next, OpReduce, 0, cl.seq, uint32(1+k), part); err != nil {
					return err
				}
				continue
			}
			finishAcc(cl.dt, cl.red, part, mine[a*size:b*size], n)
			if err := cl.sendOne(prev, OpAllReduce, hierAuxResult, cl.seq, uint32(1+nseg+k), mine[a*size:b*size]); err != nil {
				return err
			}
		}
		return nil
	}
	down := func(cl *call) error { // nodes below the last: the results, passed on down
		for k := range nseg {
			a, b := seg(k)
			f, err := cl.recvSeq(next, OpAllReduce, cl.seq, uint32(1+nseg+k), b-a)
			if err != nil {
				return err
			}
			// The result of segment k left the last node only after this node's running sum
			// of segment k did, so its contributions (which may alias recv) are consumed.
			copy(mine[a*size:b*size], f.Payload)
			cl.c.recycle(f)
			if g > 0 {
				if err := cl.sendSeq(prev, OpAllReduce, hierAuxResult, cl.seq, uint32(1+nseg+k), mine[a*size:b*size], f.CRC); err != nil {
					return err
				}
			}
		}
		return nil
	}
	chain := []func(*call) error{up}
	if g < G-1 {
		chain = append(chain, down)
	}
	if err := cl.group(chain); err != nil {
		return err
	}
	cl.c.recycle(frames...)

	// 3. Inside the node: every owner's chunk to every local peer.
	crc := Checksum(mine)
	fns = fns[:0]
	for q := 0; q < L; q++ {
		if q == l {
			continue
		}
		qlo, qhi := chunk(count, L, q)
		fns = append(fns, func(cl *call) error {
			return cl.sendSeq(base+q, OpAllReduce, hierAuxGather, cl.seq, 1, mine, crc)
		}, func(cl *call) error {
			f, err := cl.recvSeq(base+q, OpAllReduce, cl.seq, 1, qhi-qlo)
			if err != nil {
				return err
			}
			copy(recv[qlo*size:qhi*size], f.Payload)
			cl.c.recycle(f)
			return nil
		})
	}
	return cl.group(fns)
}

// foldAcc continues the ordered sum in acc (accSize bytes per element) with ins, in order,
// element by element, doing exactly the additions of reduce's sums. When started is false
// the sum starts with ins[0] (as reduce's does: a sum that started at zero would turn -0 into
// +0).
func foldAcc(dt numerics.DType, acc []byte, started bool, ins [][]byte) {
	sz := dt.Size()
	switch {
	case dt == numerics.F64:
		a := f64s(acc)
		v := f64ins(ins)
		for i := range a {
			j, s := 0, a[i]
			if !started {
				j, s = 1, v[0][i]
			}
			for ; j < len(v); j++ {
				s += v[j][i]
			}
			a[i] = s
		}
	case dt == numerics.F32:
		a := f32s(acc)
		v := f32ins(ins)
		for i := range a {
			j, s := 0, a[i]
			if !started {
				j, s = 1, v[0][i]
			}
			for ; j < len(v); j++ {
				s += v[j][i]
			}
			a[i] = s
		}
	case dt.IsFloat():
		a := f32s(acc)
		for i := range a {
			j, s := 0, a[i]
			if !started {
				j, s = 1, float32(numerics.Decode(dt, load(ins[0], i, sz)))
			}
			for ; j < len(ins); j++ {
				s += float32(numerics.Decode(dt, load(ins[j], i, sz)))
			}
			a[i] = s
		}
	default: // ints: an int64 sum, which reduce starts at zero
		a := i64s(acc)
		for i := range a {
			s := a[i]
			if !started {
				s = 0
			}
			for _, in := range ins {
				s += int64(numerics.Decode(dt, load(in, i, sz)))
			}
			a[i] = s
		}
	}
}

// finishAcc ends the sum in acc as reduce does: avg divides by the n contributions, a NaN
// becomes the dtype's canonical NaN, the value is rounded (or wrapped) to the dtype once.
func finishAcc(dt numerics.DType, op RedOp, acc, out []byte, n int) {
	sz := dt.Size()
	avg := op == Avg
	switch {
	case dt == numerics.F64:
		a, o := f64s(acc), f64s(out)
		for i := range a {
			s := a[i]
			if avg {
				s /= float64(n)
			}
			if s != s {
				s = math.NaN()
			}
			o[i] = s
		}
	case dt == numerics.F32:
		a, o := f32s(acc), f32s(out)
		nan := math.Float32frombits(uint32(numerics.Encode(numerics.F32, math.NaN())))
		for i := range a {
			s := a[i]
			if avg {
				s /= float32(n)
			}
			if s != s {
				s = nan
			}
			o[i] = s
		}
	case dt.IsFloat():
		a := f32s(acc)
		for i := range a {
			s := a[i]
			if avg {
				s /= float32(n)
			}
			store(out, i, sz, numerics.Encode(dt, float64(s)))
		}
	default:
		a := i64s(acc)
		for i := range a {
			s := a[i]
			if avg {
				s /= int64(n)
			}
			store(out, i, sz, uint64(numerics.WrapInt(dt, s)))
		}
	}
}

func i64s(b []byte) []int64 {
	if len(b) == 0 {
		return nil
	}
	return unsafe.Slice((*int64)(unsafe.Pointer(&b[0])), len(b)/8)
}
