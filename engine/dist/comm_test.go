package dist

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
)

// world runs fn on every rank of an in-process world (optionally wrapped) and returns each
// rank's error.
func world(t *testing.T, n int, opts Options, wrap func(Transport) Transport, fn func(c *Comm) error) []error {
	t.Helper()
	ts := NewInproc(n)
	errsOut := make([]error, n)
	var wg sync.WaitGroup
	for r := range ts {
		tr := ts[r]
		if wrap != nil {
			tr = wrap(tr)
		}
		wg.Add(1)
		go func(r int) {
			defer wg.Done()
			defer ts[r].Close()
			errsOut[r] = fn(NewComm(tr, opts))
		}(r)
	}
	wg.Wait()
	return errsOut
}

func noErr(t *testing.T, es []error) {
	t.Helper()
	for r, e := range es {
		if e != nil {
			t.Fatalf("rank %d: %v", r, e)
		}
	}
}

func randTensor(dt numerics.DType, count int, seed uint64) *tensor.Tensor {
	rng := rand.New(rand.NewPCG(seed, 99))
	v := make([]float64, count)
	for i := range v {
		if dt.IsInt() {
			v[i] = float64(rng.IntN(200) - 100)
		} else {
			v[i] = rng.NormFloat64()
		}
	}
	return tensor.FromFloat64(dt, []int{count}, v)
}

// sumRef is the float64 answer for rank inputs ins.
func sumRef(ins []*tensor.Tensor, op RedOp) []float64 {
	out := make([]float64, ins[0].Len())
	for i := range out {
		acc := ins[0].Float64(i)
		for _, t := range ins[1:] {
			v := t.Float64(i)
			switch op {
			case Sum, Avg:
				acc += v
			case Max:
				acc = math.Max(acc, v)
			case Min:
				acc = math.Min(acc, v)
			}
		}
		if op == Avg {
			acc /= float64(len(ins))
		}
		out[i] = acc
	}
	return out
}

func TestAllReduceMatchesReferenceAndRepeatsBits(t *testing.T) {
	dts := []numerics.DType{numerics.F64, numerics.F32, numerics.F16, numerics.BF16, numerics.F8E4M3, numerics.I32, numerics.I8}
	tol := map[numerics.DType]float64{numerics.F64: 1e-12, numerics.F32: 1e-5, numerics.F16: 2e-3, numerics.BF16: 2e-2, numerics.F8E4M3: 0.13}
	for _, n := range []int{1, 2, 3, 4, 8} {
		for _, dt := range dts {
			for _, op := range []RedOp{Sum, Max, Min, Avg} {
				for _, count := range []int{0, 1, 7, 1001} {
					for _, mode := range []Mode{Deterministic, Exact} {
						name := fmt.Sprintf("n%d/%s/%s/%d/%s", n, dt, op, count, mode)
						ins := make([]*tensor.Tensor, n)
						for r := range ins {
							ins[r] = randTensor(dt, count, uint64(r+1))
						}
						want := sumRef(ins, op)
						var digests [2][]string
						for run := range 2 {
							outs := make([]*tensor.Tensor, n)
							noErr(t, world(t, n, Options{Mode: mode}, nil, func(c *Comm) error {
								out := tensor.New(dt, []int{count})
								outs[c.Rank()] = out
								return c.AllReduce(context.Background(), dt, ins[c.Rank()].Data, out.Data, op)
							}))
							for r, o := range outs {
								digests[run] = append(digests[run], o.Digest())
								if o.Digest() != outs[0].Digest() {
									t.Fatalf("%s: rank %d's result differs from rank 0's", name, r)
								}
								for i := range want {
									got := o.Float64(i)
									if dt.IsInt() {
										if int64(got) != numerics.WrapInt(dt, int64(want[i])) && op != Avg {
											t.Fatalf("%s: [%d] = %v, want %v", name, i, got, want[i])
										}
										continue
									}
									if math.Abs(got-want[i]) > tol[dt]*(float64(n)+math.Abs(want[i])) {
										t.Fatalf("%s: rank %d [%d] = %v, want %v", name, r, i, got, want[i])
									}
								}
							}
						}
						if fmt.Sprint(digests[0]) != fmt.Sprint(digests[1]) {
							t.Fatalf("%s: two runs gave different bits", name)
						}
					}
				}
			}
		}
	}
}

// jitter delays every frame by a random amount so frames arrive in a different order.
func jitter(seed uint64) func(Transport) Transport {
	var mu sync.Mutex
	rng := rand.New(rand.NewPCG(seed, 1))
	return func(tr Transport) Transport {
		return Intercept(tr, func(ctx context.Context, to int, f *Frame) []*Frame {
			mu.Lock()
			d := time.Duration(rng.IntN(2000)) * time.Microsecond
			mu.Unlock()
			time.Sleep(d)
			return []*Frame{f}
		})
	}
}

func TestDeterministicBitsIgnoreArrivalOrder(t *testing.T) {
	const n, count = 4, 4099
	ins := make([]*tensor.Tensor, n)
	for r := range ins {
		ins[r] = randTensor(numerics.F32, count, uint64(10+r))
	}
	digest := func(wrap func(Transport) Transport) string {
		var d string
		noErr(t, world(t, n, Options{}, wrap, func(c *Comm) error {
			out := tensor.New(numerics.F32, []int{count})
			err := c.AllReduce(context.Background(), numerics.F32, ins[c.Rank()].Data, out.Data, Sum)
			if c.Rank() == 2 {
				d = out.Digest()
			}
			return err
		}))
		return d
	}
	base := digest(nil)
	for s := range 3 {
		if got := digest(jitter(uint64(s))); got != base {
			t.Fatalf("jitter seed %d changed the bits", s)
		}
	}
}

func TestExactBitsIndependentOfWorldSize(t *testing.T) {
	const contribs, count = 24, 513
	for _, dt := range []numerics.DType{numerics.F32, numerics.BF16, numerics.F64, numerics.F16} {
		all := make([][]byte, contribs)
		for k := range all {
			tt := randTensor(dt, count, uint64(100+k))
			// Wide exponent spread makes f32 addition order matter.
			for i := 0; i < count; i += 7 {
				tt.SetFloat64(i, tt.Float64(i)*math.Pow(2, float64((k*13+i)%40-20)))
			}
			all[k] = tt.Data
		}
		var ref string
		for _, n := range []int{1, 2, 3, 4, 8} {
			var d string
			noErr(t, world(t, n, Options{Mode: Exact}, nil, func(c *Comm) error {
				lo, hi := chunk(contribs, n, c.Rank())
				out := tensor.New(dt, []int{count})
				err := c.AllReduceMulti(context.Background(), dt, all[lo:hi], out.Data, Sum)
				if c.Rank() == n-1 {
					d = out.Digest()
				}
				return err
			}))
			if ref == "" {
				ref = d
			} else if d != ref {
				t.Fatalf("%s: exact all_reduce over %d ranks gave different bits than over 1", dt, n)
			}
		}
	}
}

func TestCollectivesMoveTheRightBytes(t *testing.T) {
	for _, n := range []int{1, 2, 3, 5} {
		const per = 6
		dt := numerics.I32
		noErr(t, world(t, n, Options{}, nil, func(c *Comm) error {
			ctx := context.Background()
			r := c.Rank()
			mine := tensor.New(dt, []int{per})
			for i := range per {
				mine.SetFloat64(i, float64(100*r+i))
			}
			// all_gather: rank order.
			g := tensor.New(dt, []int{n * per})
			if err := c.AllGather(ctx, dt, mine.Data, g.Data); err != nil {
				return err
			}
			for i := range n * per {
				if g.Float64(i) != float64(100*(i/per)+i%per) {
					return fmt.Errorf("all_gather[%d] = %v", i, g.Float64(i))
				}
			}
			// broadcast from the last rank.
			b := tensor.New(dt, []int{per})
			if err := c.Broadcast(ctx, dt, mine.Data, b.Data, n-1); err != nil {
				return err
			}
			if b.Float64(1) != float64(100*(n-1)+1) {
				return fmt.Errorf("broadcast gave %v", b.Float64(1))
			}
			// all_to_all: chunk j of rank q lands at chunk q of rank j.
			a := tensor.New(dt, []int{n * 2})
			for i := range n * 2 {
				a.SetFloat64(i, float64(1000*r+i))
			}
			a2 := tensor.New(dt, []int{n * 2})
			if err := c.AllToAll(ctx, dt, a.Data, a2.Data); err != nil {
				return err
			}
			for q := range n {
				if a2.Float64(2*q) != float64(1000*q+2*r) {
					return fmt.Errorf("all_to_all chunk %d = %v", q, a2.Float64(2*q))
				}
			}
			// reduce_scatter: rank r gets chunk r of the sum.
			s := tensor.New(dt, []int{n * per})
			for i := range n * per {
				s.SetFloat64(i, float64(i+r))
			}
			rs := tensor.New(dt, []int{per})
			if err := c.ReduceScatter(ctx, dt, s.Data, rs.Data, Sum); err != nil {
				return err
			}
			for i := range per {
				want := float64(n*(r*per+i) + n*(n-1)/2)
				if rs.Float64(i) != want {
					return fmt.Errorf("reduce_scatter[%d] = %v, want %v", i, rs.Float64(i), want)
				}
			}
			// in-place all_reduce.
			ip := mine.Clone()
			if err := c.AllReduce(ctx, dt, ip.Data, ip.Data, Sum); err != nil {
				return err
			}
			if ip.Float64(0) != float64(100*n*(n-1)/2) {
				return fmt.Errorf("in-place all_reduce = %v", ip.Float64(0))
			}
			// send/recv around a ring.
			if n > 1 {
				got := tensor.New(dt, []int{per})
				errc := make(chan error, 1)
				go func() { errc <- c.Send(ctx, dt, mine.Data, (r+1)%n) }()
				if err := c.Recv(ctx, dt, got.Data, (r+n-1)%n); err != nil {
					return err
				}
				if err := <-errc; err != nil {
					return err
				}
				if got.Float64(0) != float64(100*((r+n-1)%n)) {
					return fmt.Errorf("recv got %v", got.Float64(0))
				}
			}
			return c.Barrier(ctx)
		}))
	}
}

func codeOf(es []error) map[errs.Code][]int {
	m := map[errs.Code][]int{}
	for r, e := range es {
		if e != nil {
			m[errs.CodeOf(e)] = append(m[errs.CodeOf(e)], r)
		}
	}
	return m
}

func TestMismatchedCallsAreDesyncNotData(t *testing.T) {
	opts := Options{Timeout: 2 * time.Second}
	start := time.Now()
	es := world(t, 3, opts, nil, func(c *Comm) error {
		count := 10
		if c.Rank() == 1 {
			count = 11
		}
		b := make([]byte, 4*count)
		return c.AllReduce(context.Background(), numerics.F32, b, b, Sum)
	})
	// The rank that sees the mismatch tells the others, so every rank fails with E_DESYNC,
	// none with "rank X is gone" when the first one leaves.
	if got := codeOf(es); len(got[errs.Desync]) != 3 {
		t.Fatalf("count mismatch: want E_DESYNC on every rank, got %v", es)
	}
	es = world(t, 2, opts, nil, func(c *Comm) error {
		b := make([]byte, 16)
		if c.Rank() == 0 {
			return c.AllGather(context.Background(), numerics.F32, b[:8], b)
		}
		return c.AllReduce(context.Background(), numerics.F32, b, b, Sum)
	})
	if got := codeOf(es); len(got[errs.Desync]) == 0 {
		t.Fatalf("op mismatch: want E_DESYNC, got %v", es)
	}
	if time.Since(start) > 5*time.Second {
		t.Fatalf("desync took %s to surface", time.Since(start))
	}
}

func TestSilentOrGonePeerIsTimeoutNamingIt(t *testing.T) {
	start := time.Now()
	es := world(t, 3, Options{Timeout: 300 * time.Millisecond}, nil, func(c *Comm) error {
		if c.Rank() == 2 {
			time.Sleep(time.Second) // silent, then leaves
			return nil
		}
		b := make([]byte, 64)
		return c.AllReduce(context.Background(), numerics.F32, b, b, Sum)
	})
	// Both live ranks fail with E_TIMEOUT_COMM, and the silent rank 2 is named: by the first
	// to time out on it, or, when rank 1's deadline on rank 0 (blocked on rank 2) fires first,
	// by rank 0 relaying that blame with what it was itself waiting for.
	named := false
	for _, r := range []int{0, 1} {
		if errs.CodeOf(es[r]) != errs.TimeoutComm {
			t.Fatalf("rank %d: want E_TIMEOUT_COMM, got %v", r, es[r])
		}
		named = named || contains(es[r].Error(), "rank 2 is silent") || contains(es[r].Error(), "waiting for rank(s) [2]")
	}
	if !named {
		t.Fatalf("no rank named the silent rank 2: %v", es)
	}
	if time.Since(start) > 3*time.Second {
		t.Fatalf("took %s", time.Since(start))
	}
	// A peer that closes its endpoint is reported at once, long before the deadline.
	start = time.Now()
	es = world(t, 2, Options{Timeout: 30 * time.Second}, nil, func(c *Comm) error {
		if c.Rank() == 1 {
			return c.Transport().Close()
		}
		b := make([]byte, 64)
		return c.AllReduce(context.Background(), numerics.F32, b, b, Sum)
	})
	if errs.CodeOf(es[0]) != errs.TimeoutComm || !contains(es[0].Error(), "rank 1") || time.Since(start) > 5*time.Second {
		t.Fatalf("closed peer: %v after %s", es[0], time.Since(start))
	}
}

func TestCorruptedPayloadNeverBecomesData(t *testing.T) {
	flip := func(tr Transport) Transport {
		if tr.Rank() != 1 {
			return tr
		}
		return Intercept(tr, func(ctx context.Context, to int, f *Frame) []*Frame {
			if len(f.Payload) == 0 {
				return []*Frame{f}
			}
			g := &Frame{Header: f.Header, Payload: append([]byte(nil), f.Payload...)}
			g.Payload[len(g.Payload)/2] ^= 0x10
			return []*Frame{g}
		})
	}
	out := make([][]byte, 3)
	es := world(t, 3, Options{Timeout: 2 * time.Second}, flip, func(c *Comm) error {
		b := randTensor(numerics.F32, 100, uint64(c.Rank())).Data
		out[c.Rank()] = b
		return c.AllReduce(context.Background(), numerics.F32, b, b, Sum)
	})
	// Whoever sees the damaged frame first fails with E_DESYNC; the others then lose it and
	// fail too. No rank may finish with a result.
	checksum := false
	for r, e := range es {
		if e == nil {
			t.Fatalf("rank %d finished an all_reduce that carried a corrupted frame", r)
		}
		checksum = checksum || (errs.CodeOf(e) == errs.Desync && DesyncField(e) == "crc")
	}
	if !checksum {
		t.Fatalf("no rank reported the checksum: %v", es)
	}
}

func TestFrameHeaderRoundTripsAndRejectsDamage(t *testing.T) {
	h := Header{Comm: 7, Seq: 1 << 40, Op: OpAllGather, Red: RedNone, DType: numerics.BF16, Src: 3, Aux: 9, Count: 12345, CRC: 0xdeadbeef}
	b := make([]byte, HeaderSize)
	h.MarshalHeader(b)
	got, err := UnmarshalHeader(b)
	if err != nil || got != h {
		t.Fatalf("round trip: %+v %v", got, err)
	}
	for i := range HeaderSize {
		c := append([]byte(nil), b...)
		c[i] ^= 1
		if _, err := UnmarshalHeader(c); err == nil {
			t.Fatalf("flipping byte %d went unnoticed", i)
		} else if errs.CodeOf(err) != errs.Desync {
			t.Fatalf("byte %d: %v", i, err)
		}
	}
}

func FuzzUnmarshalHeader(f *testing.F) {
	b := make([]byte, HeaderSize)
	(&Header{Op: OpAllReduce, Red: Sum, DType: numerics.F32, Count: 4}).MarshalHeader(b)
	f.Add(b)
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := UnmarshalHeader(b)
		if err != nil {
			if errs.CodeOf(err) != errs.Desync {
				t.Fatalf("uncoded error %v", err)
			}
			return
		}
		if n, err := h.PayloadLen(); err != nil || n < 0 || n > MaxFrameBytes {
			t.Fatalf("accepted header with payload %d, %v", n, err)
		}
	})
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }

// A bucket reduces each buffer to the bits its own all_reduce gives it, for every reduction,
// in every mode, whatever the buffers' sizes (chunks and pipelined segments cut across them).
func TestAllReduceEachHasEveryBuffersOwnBits(t *testing.T) {
	sizes := []int{1, 7, 1000, 3, 70000}
	for _, mode := range []Mode{Deterministic, Exact} {
		for _, op := range []RedOp{Sum, Avg, Max} {
			const n = 3
			alone := make([][][]byte, n)
			joined := make([][][]byte, n)
			for r := range n {
				for i, size := range sizes {
					alone[r] = append(alone[r], randTensor(numerics.F32, size, uint64(10*r+i)).Data)
					joined[r] = append(joined[r], randTensor(numerics.F32, size, uint64(10*r+i)).Data)
				}
			}
			errsOut := world(t, n, Options{Mode: mode}, nil, func(c *Comm) error {
				r := c.Rank()
				for _, b := range alone[r] {
					if err := c.AllReduce(context.Background(), numerics.F32, b, b, op); err != nil {
						return err
					}
				}
				return c.AllReduceEach(context.Background(), numerics.F32, joined[r], op)
			})
			for r, err := range errsOut {
				if err != nil {
					t.Fatalf("%s %s rank %d: %v", mode, op, r, err)
				}
				for i := range sizes {
					if string(alone[r][i]) != string(joined[r][i]) {
						t.Fatalf("%s %s rank %d buffer %d (%d elements): bucketed bits differ", mode, op, r, i, sizes[i])
					}
				}
			}
		}
	}
}

// Waited counts the time a call spends blocked on a late peer: the punctual ranks wait about
// as long as the late one slept, the late one hardly at all.
func TestWaitedIsTheTimeBlockedOnLatePeers(t *testing.T) {
	const late = 80 * time.Millisecond
	waited := make([]time.Duration, 3)
	es := world(t, 3, Options{Timeout: 5 * time.Second}, nil, func(c *Comm) error {
		if c.Rank() == 2 {
			time.Sleep(late)
		}
		b := make([]byte, 64)
		err := c.AllReduce(context.Background(), numerics.F32, b, b, Sum)
		waited[c.Rank()] = c.Waited()
		return err
	})
	for r, err := range es {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	for _, r := range []int{0, 1} {
		if waited[r] < late/2 {
			t.Errorf("rank %d waited %s for a peer %s late", r, waited[r], late)
		}
	}
	if waited[2] > late/2 {
		t.Errorf("the late rank waited %s, as long as the ones waiting for it", waited[2])
	}
}

// WaitedOn names whom a rank waited on: the punctual ranks' waits on the late rank are about
// its sleep, their waits on each other far shorter. (all_gather: every block comes straight
// from its owner; an all_reduce's reduced chunks would be late from every owner, since each
// waits for the late contribution.)
func TestWaitedOnNamesTheLatePeer(t *testing.T) {
	const late = 80 * time.Millisecond
	on := make([][]time.Duration, 3)
	es := world(t, 3, Options{Timeout: 5 * time.Second}, nil, func(c *Comm) error {
		if c.Rank() == 2 {
			time.Sleep(late)
		}
		b := make([]byte, 64)
		err := c.AllGather(context.Background(), numerics.F32, b, make([]byte, 3*64))
		on[c.Rank()] = c.WaitedOn()
		return err
	})
	noErr(t, es)
	for _, r := range []int{0, 1} {
		other := 1 - r
		if on[r][2] < late/2 || on[r][other] > late/2 || on[r][r] != 0 {
			t.Errorf("rank %d waited %v (by peer) with rank 2 %s late: want about %s on rank 2, little on rank %d, none on itself", r, on[r], late, late, other)
		}
	}
}
