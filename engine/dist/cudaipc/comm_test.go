package cudaipc

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/dist"
	"github.com/tessera-qa/tessera-qa/engine/dist/internal/simgpu"
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

// The DeviceComm protocol on simulated devices (engine/dist/internal/simgpu): ranks are goroutines, the
// control plane is inproc, every collective's bits are compared with engine/dist's host
// communicator on the same inputs, and the simulated node reports any CUDA rule broken
// (a block freed while mapped, an event destroyed while held, a leak).

// collCase is one collective call.
type collCase struct {
	op       dist.Op
	red      dist.RedOp
	dt       numerics.DType
	count    int // NCCL-style count (see collectives.go)
	root     int
	inPlace  bool
	register bool // buffers from DeviceComm.Alloc (read in place) or plain device memory (staged)
}

func (cc collCase) String() string {
	s := fmt.Sprintf("%s/%s/count%d", cc.op, cc.dt, cc.count)
	if cc.red != dist.RedNone {
		s += "/" + cc.red.String()
	}
	if cc.op == dist.OpBroadcast {
		s += fmt.Sprintf("/root%d", cc.root)
	}
	if cc.inPlace {
		s += "/inplace"
	}
	if cc.register {
		s += "/alloc"
	} else {
		s += "/staged"
	}
	return s
}

// sizes returns the send and recv element counts on a world of n.
func (cc collCase) sizes(n int) (send, recv int) {
	switch cc.op {
	case dist.OpAllGather:
		return cc.count, n * cc.count
	case dist.OpReduceScatter:
		return n * cc.count, cc.count
	case dist.OpAllToAll:
		return n * cc.count, n * cc.count
	}
	return cc.count, cc.count
}

func randomBytes(rng *rand.Rand, dt numerics.DType, count int) []byte {
	size := dt.Size()
	b := make([]byte, count*size)
	for i := range count {
		var v uint64
		switch {
		case rng.IntN(10) == 0:
			v = rng.Uint64() // any bit pattern: NaN payloads, infinities, subnormals
		case dt.IsFloat():
			v = numerics.Encode(dt, rng.NormFloat64()*math.Pow(2, float64(rng.IntN(11)-5)))
		default:
			v = uint64(rng.IntN(2001) - 1000)
		}
		for k := range size {
			b[i*size+k] = byte(v >> (8 * k))
		}
	}
	return b
}

// hostRun is the same call on engine/dist's host communicator: the reference bits.
func hostRun(ctx context.Context, c *dist.Comm, cc collCase, send []byte, recvBytes int) ([]byte, error) {
	recv := make([]byte, recvBytes)
	var err error
	switch cc.op {
	case dist.OpAllReduce:
		err = c.AllReduce(ctx, cc.dt, send, recv, cc.red)
	case dist.OpReduceScatter:
		err = c.ReduceScatter(ctx, cc.dt, send, recv, cc.red)
	case dist.OpAllGather:
		err = c.AllGather(ctx, cc.dt, send, recv)
	case dist.OpBroadcast:
		err = c.Broadcast(ctx, cc.dt, send, recv, cc.root)
	case dist.OpAllToAll:
		err = c.AllToAll(ctx, cc.dt, send, recv)
	}
	return recv, err
}

// deviceRun uploads send, runs the call on dc and downloads the result.
func deviceRun(ctx context.Context, dc *DeviceComm, cc collCase, send []byte, recvBytes int) ([]byte, error) {
	dev := dc.Device()
	n, me, size := dc.World(), dc.Rank(), cc.dt.Size()
	// One allocation holds both buffers when the call is in place.
	total := len(send) + recvBytes
	if cc.inPlace {
		total = max(len(send), recvBytes)
	}
	var base uint64
	var buf Buffer
	var err error
	if cc.register {
		buf, err = dc.Alloc(ctx, total)
		base = buf.Ptr
	} else {
		base, err = dev.Alloc(total)
	}
	if err != nil {
		return nil, err
	}
	sendP, recvP := base, base+uint64(len(send))
	if cc.inPlace {
		sendP, recvP = base, base
		switch cc.op {
		case dist.OpAllGather:
			sendP = recvP + uint64(me*cc.count*size)
		case dist.OpReduceScatter:
			recvP = sendP + uint64(me*cc.count*size)
		}
	}
	if err := dev.Upload(ctx, sendP, send); err != nil {
		return nil, err
	}
	switch cc.op {
	case dist.OpAllReduce:
		err = dc.AllReduce(ctx, cc.dt, sendP, recvP, cc.count, cc.red)
	case dist.OpReduceScatter:
		err = dc.ReduceScatter(ctx, cc.dt, sendP, recvP, cc.count, cc.red)
	case dist.OpAllGather:
		err = dc.AllGather(ctx, cc.dt, sendP, recvP, cc.count)
	case dist.OpBroadcast:
		err = dc.Broadcast(ctx, cc.dt, sendP, recvP, cc.count, cc.root)
	case dist.OpAllToAll:
		err = dc.AllToAll(ctx, cc.dt, sendP, recvP, cc.count)
	}
	if err != nil {
		return nil, err
	}
	out := make([]byte, recvBytes)
	if err := dev.Download(ctx, out, recvP); err != nil {
		return nil, err
	}
	if cc.register {
		err = dc.Free(ctx, buf)
	} else {
		err = dev.Free(base)
	}
	_ = n
	return out, err
}

// world runs fn on n simulated ranks with DeviceComms and checks the node afterwards.
func world(t *testing.T, n int, delay time.Duration, opts Options, fn func(dc *DeviceComm) error) []error {
	t.Helper()
	return worldOn(t, simgpu.NewNode(delay), n, opts, fn)
}

func worldOn(t *testing.T, w *simgpu.Node, n int, opts Options, fn func(dc *DeviceComm) error) []error {
	t.Helper()
	ts := dist.NewInproc(n)
	out := make([]error, n)
	var wg sync.WaitGroup
	devs := make([]*simgpu.Device, n)
	for r := range n {
		devs[r] = w.NewDevice(r, uint64(n))
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx := context.Background()
			dc, err := New(ctx, devs[r], ts[r], opts)
			if err != nil {
				out[r] = err
				return
			}
			out[r] = fn(dc)
			cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			if err := dc.Close(cctx); err != nil && out[r] == nil {
				out[r] = err
			}
		}()
	}
	wg.Wait()
	for _, d := range devs {
		d.Stop()
	}
	if v := w.Violations(); len(v) > 0 {
		t.Errorf("world of %d broke CUDA rules: %s", n, strings.Join(v, "; "))
	}
	if l := w.Live(); len(l) > 0 && allNil(out) {
		t.Errorf("world of %d leaked: %s", n, strings.Join(l, "; "))
	}
	return out
}

func allNil(es []error) bool {
	for _, e := range es {
		if e != nil {
			return false
		}
	}
	return true
}

func cases(n int, dts []numerics.DType, counts []int) []collCase {
	var cs []collCase
	for _, dt := range dts {
		for _, count := range counts {
			for _, reg := range []bool{true, false} {
				for _, ip := range []bool{false, true} {
					for _, red := range []dist.RedOp{dist.Sum, dist.Max, dist.Avg} {
						cs = append(cs, collCase{op: dist.OpAllReduce, red: red, dt: dt, count: count, inPlace: ip, register: reg})
					}
					cs = append(cs,
						collCase{op: dist.OpReduceScatter, red: dist.Sum, dt: dt, count: count, inPlace: ip, register: reg},
						collCase{op: dist.OpAllGather, dt: dt, count: count, inPlace: ip, register: reg},
						collCase{op: dist.OpBroadcast, dt: dt, count: count, root: n - 1, inPlace: ip, register: reg},
						collCase{op: dist.OpAllToAll, dt: dt, count: count, inPlace: ip, register: reg})
				}
			}
		}
	}
	return cs
}

// runCases runs every case on simulated devices and on the host communicator with the same
// inputs and compares the bits on every rank.
func runCases(t *testing.T, n int, cs []collCase, delay time.Duration) {
	t.Helper()
	hosts := dist.NewInproc(n)
	hostComms := make([]*dist.Comm, n)
	for r := range n {
		hostComms[r] = dist.NewComm(hosts[r], dist.Options{})
	}
	var mu sync.Mutex
	failures := 0
	errsOut := world(t, n, delay, Options{}, func(dc *DeviceComm) error {
		ctx := context.Background()
		me := dc.Rank()
		rng := rand.New(rand.NewPCG(uint64(me), 77))
		for _, cc := range cs {
			sendN, recvN := cc.sizes(n)
			send := randomBytes(rng, cc.dt, sendN)
			want, err := hostRun(ctx, hostComms[me], cc, send, recvN*cc.dt.Size())
			if err != nil {
				return fmt.Errorf("host %s: %w", cc, err)
			}
			got, err := deviceRun(ctx, dc, cc, send, recvN*cc.dt.Size())
			if err != nil {
				return fmt.Errorf("device %s: %w", cc, err)
			}
			if !bytes.Equal(got, want) {
				mu.Lock()
				failures++
				if failures <= 10 {
					t.Errorf("world %d rank %d %s: device bits differ from the host's at byte %d", n, me, cc, firstDiff(got, want))
				}
				mu.Unlock()
			}
		}
		return nil
	})
	for r, err := range errsOut {
		if err != nil {
			t.Errorf("world %d rank %d: %v", n, r, err)
		}
	}
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

func TestCollectivesMatchHostBits(t *testing.T) {
	for _, n := range []int{1, 2, 3, 4} {
		t.Run(fmt.Sprintf("world%d", n), func(t *testing.T) {
			runCases(t, n, cases(n, []numerics.DType{numerics.F32, numerics.BF16, numerics.F64, numerics.I32}, []int{0, 1, 7, 130}), 0)
		})
	}
}

func TestCollectivesOtherDtypes(t *testing.T) {
	runCases(t, 3, cases(3, []numerics.DType{numerics.F16, numerics.I8, numerics.F8E4M3, numerics.F8E5M2}, []int{5, 64}), 0)
}

// Random delays on every simulated stream reorder the ranks' device work: a fence missing
// anywhere shows as wrong bits (or, under -race, a data race between two ranks' streams).
func TestCollectivesUnderStreamDelays(t *testing.T) {
	if testing.Short() {
		t.Skip("slow: random delays on every stream")
	}
	runCases(t, 3, cases(3, []numerics.DType{numerics.F32}, []int{1, 33}), 300*time.Microsecond)
}

// Many collectives back to back without a Synchronize in between: the host runs ahead of
// the devices and every event slot is reused many times, with the driver capturing an
// event's record when the wait is enqueued (as documented) or when it runs (the weaker
// reading).
func TestBackToBackWithoutSync(t *testing.T) {
	for _, late := range []bool{false, true} {
		t.Run(fmt.Sprintf("late-capture=%v", late), func(t *testing.T) {
			node := simgpu.NewNode(200 * time.Microsecond)
			node.LateCapture = late
			backToBack(t, node)
		})
	}
}

func backToBack(t *testing.T, node *simgpu.Node) {
	const n, reps, count = 3, 40, 50
	errsOut := worldOn(t, node, n, Options{}, func(dc *DeviceComm) error {
		ctx := context.Background()
		dev := dc.Device()
		a, err := dc.Alloc(ctx, 4*count)
		if err != nil {
			return err
		}
		ones := make([]byte, 4*count)
		for i := range count {
			copy(ones[4*i:], []byte{0, 0, 0x80, 0x3f}) // 1.0f
		}
		if err := dev.Upload(ctx, a.Ptr, ones); err != nil {
			return err
		}
		// x <- x summed over 3 ranks, 40 times, in place: 3^40 overflows f32 only past 3^80.
		for range reps {
			if err := dc.AllReduce(ctx, numerics.F32, a.Ptr, a.Ptr, count, dist.Sum); err != nil {
				return err
			}
		}
		if err := dc.Synchronize(ctx); err != nil {
			return err
		}
		got := make([]byte, 4*count)
		if err := dev.Download(ctx, got, a.Ptr); err != nil {
			return err
		}
		want := float32(math.Pow(3, reps))
		for i := range count {
			if v := math.Float32frombits(uint32(got[4*i]) | uint32(got[4*i+1])<<8 | uint32(got[4*i+2])<<16 | uint32(got[4*i+3])<<24); v != want {
				return fmt.Errorf("element %d: %g after %d in-place all_reduces, want %g", i, v, reps, want)
			}
		}
		return dc.Free(ctx, a)
	})
	for r, err := range errsOut {
		if err != nil {
			t.Errorf("rank %d: %v", r, err)
		}
	}
}

func TestMismatchedCallsAreDesync(t *testing.T) {
	errsOut := world(t, 3, 0, Options{Timeout: 5 * time.Second}, func(dc *DeviceComm) error {
		ctx := context.Background()
		count := 16
		if dc.Rank() == 2 {
			count = 17
		}
		b, err := dc.Alloc(ctx, 4*32)
		if err != nil {
			return err
		}
		err = dc.AllReduce(ctx, numerics.F32, b.Ptr, b.Ptr, count, dist.Sum)
		// The communicator refuses further work with the same error.
		if again := dc.AllGather(ctx, numerics.F32, b.Ptr, b.Ptr, 1); again == nil {
			return fmt.Errorf("a failed communicator accepted another collective")
		}
		return err
	})
	for r, err := range errsOut {
		if errs.CodeOf(err) != errs.Desync || !strings.Contains(err.Error(), "count=17") {
			t.Errorf("rank %d: %v, want E_DESYNC naming count=17", r, err)
		}
	}
}

func TestSilentRankIsTimeoutNamingIt(t *testing.T) {
	start := time.Now()
	errsOut := world(t, 3, 0, Options{Timeout: 300 * time.Millisecond}, func(dc *DeviceComm) error {
		if dc.Rank() == 1 {
			time.Sleep(time.Second) // silent past the others' timeout, then closes
			return nil
		}
		b, err := dc.Alloc(context.Background(), 64)
		if err != nil {
			return err
		}
		return dc.AllGather(context.Background(), numerics.F32, b.Ptr, b.Ptr, 4)
	})
	if time.Since(start) > 20*time.Second {
		t.Errorf("took %s", time.Since(start))
	}
	for _, r := range []int{0, 2} {
		if err := errsOut[r]; errs.CodeOf(err) != errs.TimeoutComm || !strings.Contains(err.Error(), "rank 1") {
			t.Errorf("rank %d: %v, want E_TIMEOUT_COMM naming rank 1", r, err)
		}
	}
}

func TestBadArgumentsKeepTheCommunicatorUsable(t *testing.T) {
	errsOut := world(t, 2, 0, Options{}, func(dc *DeviceComm) error {
		ctx := context.Background()
		b, err := dc.Alloc(ctx, 64)
		if err != nil {
			return err
		}
		if err := dc.AllReduce(ctx, numerics.Bool, b.Ptr, b.Ptr, 4, dist.Sum); errs.CodeOf(err) != errs.DType {
			return fmt.Errorf("bool all_reduce: %v, want E_DTYPE", err)
		}
		if err := dc.Broadcast(ctx, numerics.F32, b.Ptr, b.Ptr, 4, 7); errs.CodeOf(err) != errs.Input {
			return fmt.Errorf("root 7: %v, want E_INPUT", err)
		}
		if err := dc.Free(ctx, Buffer{Ptr: b.Ptr + 4, Bytes: 4}); errs.CodeOf(err) != errs.Input {
			return fmt.Errorf("free of an inner pointer: %v, want E_INPUT", err)
		}
		if err := dc.AllReduce(ctx, numerics.F32, b.Ptr, b.Ptr, 4, dist.Sum); err != nil {
			return err
		}
		return dc.Free(ctx, b)
	})
	for r, err := range errsOut {
		if err != nil {
			t.Errorf("rank %d: %v", r, err)
		}
	}
}

func TestExactModeIsUnsupported(t *testing.T) {
	errsOut := world(t, 2, 0, Options{Mode: dist.Exact}, func(dc *DeviceComm) error {
		b, err := dc.Alloc(context.Background(), 16)
		if err != nil {
			return err
		}
		if err := dc.AllReduce(context.Background(), numerics.F32, b.Ptr, b.Ptr, 4, dist.Sum); errs.CodeOf(err) != errs.Unsupported {
			return fmt.Errorf("exact all_reduce: %v, want E_UNSUPPORTED", err)
		}
		// Data-only collectives have no arithmetic: they work in every mode.
		if err := dc.AllGather(context.Background(), numerics.F32, b.Ptr, b.Ptr, 2); err != nil {
			return err
		}
		return dc.Free(context.Background(), b)
	})
	for r, err := range errsOut {
		if err != nil {
			t.Errorf("rank %d: %v", r, err)
		}
	}
}

func TestDescriptorRoundTrip(t *testing.T) {
	d := desc{op: dist.OpAllReduce, dt: numerics.BF16, red: dist.Avg, root: 3, count: 1 << 40,
		src: ref{id: 7, size: 1 << 30, off: 96}, res: ref{id: 9, size: 4096, off: 8}}
	for i := range d.src.handle.Reserved {
		d.src.handle.Reserved[i] = byte(i)
		d.res.handle.Reserved[i] = byte(255 - i)
	}
	b := d.marshal()
	if len(b) != descBytes {
		t.Fatalf("%d bytes, want %d", len(b), descBytes)
	}
	got, ok := unmarshalDesc(b)
	if !ok || got != d {
		t.Fatalf("round trip: %+v, want %+v", got, d)
	}
	if _, ok := unmarshalDesc(b[:descBytes-1]); ok {
		t.Error("a short descriptor decoded")
	}
}

// A caller may overwrite its buffers as soon as a collective returns (and its stream reaches
// the write): the closing fence makes this rank's later work wait for the peers' reads.
func TestBuffersReusableRightAfterReturn(t *testing.T) {
	const n, reps, count = 3, 25, 40
	errsOut := world(t, n, 300*time.Microsecond, Options{}, func(dc *DeviceComm) error {
		ctx := context.Background()
		dev := dc.Device()
		a, err := dc.Alloc(ctx, 4*count)
		if err != nil {
			return err
		}
		vals := make([]byte, 4*count)
		got := make([]byte, 4*count)
		for k := range reps {
			v := math.Float32bits(float32(k*10 + dc.Rank()))
			for i := range count {
				vals[4*i], vals[4*i+1], vals[4*i+2], vals[4*i+3] = byte(v), byte(v>>8), byte(v>>16), byte(v>>24)
			}
			if err := dev.Upload(ctx, a.Ptr, vals); err != nil {
				return err
			}
			if err := dc.AllReduce(ctx, numerics.F32, a.Ptr, a.Ptr, count, dist.Sum); err != nil {
				return err
			}
			if err := dev.Download(ctx, got, a.Ptr); err != nil {
				return err
			}
			want := float32(k*10*n + n*(n-1)/2)
			for i := range count {
				if v := math.Float32frombits(uint32(got[4*i]) | uint32(got[4*i+1])<<8 | uint32(got[4*i+2])<<16 | uint32(got[4*i+3])<<24); v != want {
					return fmt.Errorf("rep %d element %d: %g, want %g", k, i, v, want)
				}
			}
		}
		return dc.Free(ctx, a)
	})
	for r, err := range errsOut {
		if err != nil {
			t.Errorf("rank %d: %v", r, err)
		}
	}
}

var _ Device = (*simgpu.Device)(nil)

// The benchmark's protocol end to end on simulated devices (their clock reads 0: only the
// plumbing and the correctness check are tested here).
func TestBenchRunsOnSimulatedDevices(t *testing.T) {
	var rows0 []BenchRow
	out := world(t, 3, 0, Options{}, func(dc *DeviceComm) error {
		rows, err := Bench(context.Background(), dc, BenchOptions{Sizes: []int{4096, 12288}, Reps: 20, Warmup: 1, FlushBytes: 1024})
		if dc.Rank() == 0 {
			rows0 = rows
		}
		return err
	})
	for r, err := range out {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	if len(rows0) != 2 || rows0[1].Count != 3072 || rows0[0].World != 3 || rows0[0].Reps != 20 {
		t.Fatalf("rows %+v", rows0)
	}
	for _, r := range rows0 {
		if r.Wrong != 0 {
			t.Errorf("%d bytes: %d wrong", r.Bytes, r.Wrong)
		}
	}
}
