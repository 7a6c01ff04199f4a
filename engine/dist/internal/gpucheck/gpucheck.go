// Package gpucheck is the correctness and determinism matrix the device transports' GPU tests
// run (engine/dist/cudaipc, engine/dist/nccl): every collective for f32, bf16, f64 and int32
// at counts 0, 1, 1023 and 1<<20, each result checked (a) against the float64 answer, (b) bit
// for bit against engine/dist's inproc host communicator on the same inputs (so the digests
// are equal across transports), (c) over three runs that must give identical digests.
//
// Inputs are a hash of (seed, case, rank, element), so every rank computes every other rank's
// inputs (for the references) without exchanging them.
package gpucheck

import (
	"context"
	"fmt"
	"math"
	"sync"

	"github.com/tessera-qa/tessera-qa/engine/dist"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
)

// Case is one collective call. Count follows NCCL (see cudaipc's collectives).
type Case struct {
	Op       dist.Op
	Red      dist.RedOp
	DType    numerics.DType
	Count    int
	Root     int
	Staged   bool // the transport's buffers are plain device memory (cudaipc stages them)
	Specials bool // inputs are arbitrary bit patterns (NaN payloads, infinities, subnormals)
	ID       int  // the case's index: part of the input hash
}

func (c Case) String() string {
	s := fmt.Sprintf("%s/%s/count=%d", c.Op, c.DType, c.Count)
	if c.Red != dist.RedNone {
		s += "/" + c.Red.String()
	}
	if c.Op == dist.OpBroadcast {
		s += fmt.Sprintf("/root=%d", c.Root)
	}
	if c.Staged {
		s += "/staged"
	}
	if c.Specials {
		s += "/specials"
	}
	return s
}

// Dtypes and Counts are the matrix's axes.
var (
	Dtypes = []numerics.DType{numerics.F32, numerics.BF16, numerics.F64, numerics.I32}
	Counts = []int{0, 1, 1023, 1 << 20}
)

// Matrix is every case for a world of n.
func Matrix(n int) []Case {
	var cs []Case
	for _, dt := range Dtypes {
		for _, count := range Counts {
			cs = append(cs,
				Case{Op: dist.OpAllReduce, Red: dist.Sum, DType: dt, Count: count},
				Case{Op: dist.OpAllReduce, Red: dist.Max, DType: dt, Count: count},
				Case{Op: dist.OpAllReduce, Red: dist.Avg, DType: dt, Count: count},
				Case{Op: dist.OpReduceScatter, Red: dist.Sum, DType: dt, Count: count},
				Case{Op: dist.OpAllGather, DType: dt, Count: count},
				Case{Op: dist.OpBroadcast, DType: dt, Count: count, Root: n - 1},
				Case{Op: dist.OpAllToAll, DType: dt, Count: count},
			)
			if count == 1023 {
				cs = append(cs,
					Case{Op: dist.OpAllReduce, Red: dist.Sum, DType: dt, Count: count, Staged: true},
					Case{Op: dist.OpAllReduce, Red: dist.Sum, DType: dt, Count: count, Specials: true},
					Case{Op: dist.OpAllReduce, Red: dist.Min, DType: dt, Count: count, Specials: true})
			}
		}
	}
	for i := range cs {
		cs[i].ID = i
	}
	return cs
}

// Sizes returns the send and receive element counts on a world of n.
func (c Case) Sizes(n int) (send, recv int) {
	switch c.Op {
	case dist.OpAllGather:
		return c.Count, n * c.Count
	case dist.OpReduceScatter:
		return n * c.Count, c.Count
	case dist.OpAllToAll:
		return n * c.Count, n * c.Count
	}
	return c.Count, c.Count
}

func mix(x uint64) uint64 {
	x += 0x9E3779B97F4A7C15
	x = (x ^ x>>30) * 0xBF58476D1CE4E5B9
	x = (x ^ x>>27) * 0x94D049BB133111EB
	return x ^ x>>31
}

// Input is rank r's send buffer on a world of n.
func (c Case) Input(seed uint64, r, n int) []byte {
	sn, _ := c.Sizes(n)
	size := c.DType.Size()
	b := make([]byte, sn*size)
	for i := range sn {
		h := mix(seed ^ uint64(c.ID)<<40 ^ uint64(r)<<56 ^ uint64(i))
		var v uint64
		switch {
		case c.Specials:
			v = h
		case c.DType.IsFloat():
			// Non-zero values in (-4, 4) with varied exponents: sums round.
			f := float64(int64(h>>11)-(1<<52)) / (1 << 52) * math.Ldexp(1, int(h%5)-2)
			if f == 0 {
				f = 0.25
			}
			v = numerics.Encode(c.DType, f)
		default:
			v = uint64(int64(h%2001) - 1000)
		}
		for k := range size {
			b[i*size+k] = byte(v >> (8 * k))
		}
	}
	return b
}

// Host is engine/dist's answer for rank me: an inproc world of n ranks runs the call on ins.
func Host(ctx context.Context, c Case, ins [][]byte, me int) ([]byte, error) {
	n := len(ins)
	_, rn := c.Sizes(n)
	ts := dist.NewInproc(n)
	outs := make([][]byte, n)
	errsOut := make([]error, n)
	var wg sync.WaitGroup
	for r := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cm := dist.NewComm(ts[r], dist.Options{})
			recv := make([]byte, rn*c.DType.Size())
			var err error
			switch c.Op {
			case dist.OpAllReduce:
				err = cm.AllReduce(ctx, c.DType, ins[r], recv, c.Red)
			case dist.OpReduceScatter:
				err = cm.ReduceScatter(ctx, c.DType, ins[r], recv, c.Red)
			case dist.OpAllGather:
				err = cm.AllGather(ctx, c.DType, ins[r], recv)
			case dist.OpBroadcast:
				err = cm.Broadcast(ctx, c.DType, ins[r], recv, c.Root)
			case dist.OpAllToAll:
				err = cm.AllToAll(ctx, c.DType, ins[r], recv)
			}
			outs[r], errsOut[r] = recv, err
		}()
	}
	wg.Wait()
	for r, err := range errsOut {
		if err != nil {
			return nil, fmt.Errorf("host rank %d: %w", r, err)
		}
	}
	return outs[me], nil
}

// Wrong counts rank me's elements off the float64 answer: reductions within the budget of
// their arithmetic (one rounding to the dtype plus n-1 accumulator roundings relative to the
// sum of magnitudes), data movement exactly. Specials cases are checked bitwise only (0).
func Wrong(c Case, ins [][]byte, me int, got []byte) int {
	if c.Specials {
		return 0
	}
	n := len(ins)
	dt, size := c.DType, c.DType.Size()
	dec := func(b []byte, i int) float64 {
		var v uint64
		for k := range size {
			v |= uint64(b[i*size+k]) << (8 * k)
		}
		return numerics.Decode(dt, v)
	}
	_, rn := c.Sizes(n)
	wrong := 0
	for j := range rn {
		var exp, mag float64
		switch c.Op {
		case dist.OpAllReduce, dist.OpReduceScatter:
			i := j
			if c.Op == dist.OpReduceScatter {
				i = me*c.Count + j
			}
			switch c.Red {
			case dist.Max:
				exp = math.Inf(-1)
				for _, in := range ins {
					exp = math.Max(exp, dec(in, i))
				}
			default:
				for _, in := range ins {
					v := dec(in, i)
					exp += v
					mag += math.Abs(v)
				}
				if c.Red == dist.Avg {
					exp /= float64(n)
					mag /= float64(n)
					if dt.IsInt() {
						exp = math.Trunc(exp)
					}
				}
			}
		case dist.OpAllGather:
			exp = dec(ins[j/c.Count], j%c.Count)
		case dist.OpBroadcast:
			exp = dec(ins[c.Root], j)
		case dist.OpAllToAll:
			q := j / c.Count
			exp = dec(ins[q], me*c.Count+j%c.Count)
		}
		g := dec(got, j)
		if !(math.Abs(g-exp) <= budget(dt, n)*mag+relRound(dt)*math.Abs(exp)) || g != g {
			wrong++
		}
	}
	return wrong
}

// budget is the accumulator's relative rounding per add; relRound the final rounding's.
func budget(dt numerics.DType, n int) float64 {
	switch {
	case dt == numerics.F64:
		return float64(n) * 0x1p-53
	case dt.IsFloat():
		return float64(n) * 0x1p-24
	}
	return 0
}

func relRound(dt numerics.DType) float64 {
	switch dt {
	case numerics.F64:
		return 0x1p-53
	case numerics.F32:
		return 0x1p-24
	case numerics.F16:
		return 0x1p-11
	case numerics.BF16:
		return 0x1p-8
	}
	return 0
}

// Device runs one call on the transport under test: upload send, run, wait, download recv.
type Device func(ctx context.Context, c Case, send []byte, recvBytes int) ([]byte, error)

// Result is one case on one rank.
type Result struct {
	Case          Case
	Digest        string // of the device result (tensor.Digest)
	HostDigest    string
	HostEqual     bool
	RunsIdentical bool
	Wrong         int
}

// OK reports whether every check passed.
func (r Result) OK() bool { return r.HostEqual && r.RunsIdentical && r.Wrong == 0 }

func (r Result) String() string {
	return fmt.Sprintf("CASE %s digest=%.16s host=%.16s host_equal=%v runs_identical=%v wrong=%d",
		r.Case, r.Digest, r.HostDigest, r.HostEqual, r.RunsIdentical, r.Wrong)
}

// Run checks one case on rank me of n: runs device runs, compares them, the host and float64.
func Run(ctx context.Context, c Case, seed uint64, n, me, runs int, dev Device) (Result, error) {
	ins := make([][]byte, n)
	for r := range n {
		ins[r] = c.Input(seed, r, n)
	}
	want, err := Host(ctx, c, ins, me)
	if err != nil {
		return Result{}, err
	}
	_, rn := c.Sizes(n)
	digest := func(b []byte) string {
		return (&tensor.Tensor{DType: c.DType, Shape: []int{rn}, Data: b}).Digest()
	}
	res := Result{Case: c, HostDigest: digest(want), RunsIdentical: true}
	for k := range runs {
		got, err := dev(ctx, c, ins[me], len(want))
		if err != nil {
			return Result{}, fmt.Errorf("%s run %d: %w", c, k, err)
		}
		d := digest(got)
		if k == 0 {
			res.Digest = d
			res.HostEqual = d == res.HostDigest
			res.Wrong = Wrong(c, ins, me, got)
		} else if d != res.Digest {
			res.RunsIdentical = false
		}
	}
	return res, nil
}
