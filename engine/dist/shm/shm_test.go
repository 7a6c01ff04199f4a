//go:build unix

package shm

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/dist"
	"github.com/tessera-qa/tessera-qa/engine/dist/rdzv"
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

// noLeak fails t if goroutines started during the test outlive it.
func noLeak(t testing.TB) {
	t.Helper()
	before := runtime.NumGoroutine()
	t.Cleanup(func() {
		deadline := time.Now().Add(5 * time.Second)
		for runtime.NumGoroutine() > before {
			if time.Now().After(deadline) {
				buf := make([]byte, 1<<20)
				t.Errorf("%d goroutines before, %d after:\n%s", before, runtime.NumGoroutine(), buf[:runtime.Stack(buf, true)])
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	})
}

// connectAll is n ranks as goroutines meeting through a real TCP store, their rings in dir
// (a fresh temporary directory when ""), checked empty once the world is closed.
func connectAll(t testing.TB, n int, mod func(*Config)) []*Transport {
	t.Helper()
	srv, err := rdzv.Serve(context.Background(), "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	t.Cleanup(func() { srv.Close() })
	ts := make([]*Transport, n)
	errsOut := make([]error, n)
	var wg sync.WaitGroup
	for r := range n {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		st, err := rdzv.Dial(ctx, srv.Addr())
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		cfg := Config{Rank: r, World: n, Store: st, JobID: strings.ReplaceAll(t.Name(), "/", "-"), Dir: dir, Timeout: 10 * time.Second}
		if mod != nil {
			mod(&cfg)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			ts[r], errsOut[r] = Connect(context.Background(), cfg)
		}()
	}
	wg.Wait()
	for r, err := range errsOut {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	t.Cleanup(func() {
		for _, tr := range ts {
			tr.Close()
		}
	})
	return ts
}

func payload(src, dst int, comm uint32, seq uint64, n int) []byte {
	b := make([]byte, n)
	r := rand.New(rand.NewPCG(uint64(src)<<40|uint64(dst)<<32|uint64(comm), seq))
	for i := 0; i+8 <= n; i += 8 {
		binary.LittleEndian.PutUint64(b[i:], r.Uint64())
	}
	for i := n &^ 7; i < n; i++ {
		b[i] = byte(r.Uint32())
	}
	return b
}

func frame(src, dst int, comm uint32, seq uint64, n int) *dist.Frame {
	p := payload(src, dst, comm, seq, n)
	return &dist.Frame{Header: dist.Header{Comm: comm, Seq: seq, Op: dist.OpSend, DType: numerics.I8, Src: uint16(src),
		Count: uint64(n), CRC: dist.Checksum(p)}, Payload: p}
}

func checkFrame(f *dist.Frame, src, dst int, comm uint32, seq uint64, n int) error {
	if f.Comm != comm || f.Seq != seq || int(f.Src) != src || f.Count != uint64(n) || len(f.Payload) != n {
		return fmt.Errorf("rank %d from %d comm %d: got [%s] %d bytes, want seq %d count %d", dst, src, comm, f.Header, len(f.Payload), seq, n)
	}
	if dist.Checksum(f.Payload) != f.CRC || !bytes.Equal(f.Payload, payload(src, dst, comm, seq, n)) {
		return fmt.Errorf("rank %d from %d comm %d seq %d: payload differs", dst, src, comm, seq)
	}
	// The checksum the reader computed while copying is the one the communicator's check uses.
	want := dist.Expect{Comm: comm, Src: uint16(src), Seq: seq, Op: dist.OpSend, DType: numerics.I8, Count: n}
	if fe := want.Check(f); fe != nil {
		return fmt.Errorf("rank %d from %d comm %d seq %d: %v", dst, src, comm, seq, fe)
	}
	return nil
}

// sizes: the edges (empty, one byte, a header's length, several rings' worth) and random ones.
func sizes(seed uint64, k, ring int) []int {
	r := rand.New(rand.NewPCG(seed, 7))
	out := []int{0, 1, dist.HeaderSize, 3*ring + 5, ring - dist.HeaderSize, ring}
	for len(out) < k {
		if r.IntN(3) == 0 {
			out = append(out, r.IntN(4*ring))
		} else {
			out = append(out, r.IntN(512))
		}
	}
	return out
}

// exchange sends every rank's frames to every other rank on each comm, all at once, and
// checks that each (comm, sender) stream arrives whole and in order.
func exchange(t *testing.T, ts []*Transport, comms []uint32, k int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	fail := make(chan error, 1)
	report := func(err error) {
		select {
		case fail <- err:
		default:
		}
		cancel()
	}
	for src := range ts {
		for dst := range ts {
			for _, comm := range comms {
				sz := sizes(uint64(src*100+dst*10)+uint64(comm), k, ts[src].RingBytes())
				wg.Add(2)
				go func() {
					defer wg.Done()
					for seq, n := range sz {
						f := frame(src, dst, comm, uint64(seq), n)
						send := ts[src].Send
						if seq%2 == 1 { // every other frame through the summing path, its CRC left to the ring
							f.CRC, send = 0, ts[src].SendSummed
						}
						if err := send(ctx, dst, f); err != nil {
							report(err)
							return
						}
					}
				}()
				go func() {
					defer wg.Done()
					for seq, n := range sz {
						f, err := ts[dst].Recv(ctx, comm, src)
						if err == nil {
							err = checkFrame(f, src, dst, comm, uint64(seq), n)
						}
						if err != nil {
							report(err)
							return
						}
						ts[dst].Recycle(f)
					}
				}()
			}
		}
	}
	wg.Wait()
	select {
	case err := <-fail:
		t.Fatal(err)
	default:
	}
}

func TestRoundTripLargerThanRing(t *testing.T) {
	noLeak(t)
	ts := connectAll(t, 2, func(c *Config) { c.RingBytes = 16 << 10 })
	if got := ts[0].RingBytes(); got != 16<<10 {
		t.Fatalf("ring of %d bytes, asked for %d", got, 16<<10)
	}
	exchange(t, ts, []uint32{0}, 40)
}

func TestManyCommsInterleaved(t *testing.T) {
	noLeak(t)
	ts := connectAll(t, 3, func(c *Config) { c.RingBytes = 8 << 10 })
	exchange(t, ts, []uint32{0, 1, 7, 1 << 30}, 24)
}

func TestNothingLeftInDir(t *testing.T) {
	noLeak(t)
	var dir string
	ts := connectAll(t, 3, func(c *Config) { dir, c.RingBytes = c.Dir, 64<<10 })
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Fatalf("%d files left in %s once the mesh is up: %v", len(ents), dir, ents[0].Name())
	}
	exchange(t, ts, []uint32{3}, 8)
	for _, tr := range ts {
		tr.Close()
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Fatalf("%d files left in %s after Close", len(ents), dir)
	}
}

// The default directory (/dev/shm here) holds no file of this process after a world has
// met and closed.
func TestNothingLeftInDefaultDir(t *testing.T) {
	noLeak(t)
	dir := DefaultDir()
	mine := func() []string {
		m, _ := filepath.Glob(filepath.Join(dir, fmt.Sprintf("%s%d-*", filePrefix, os.Getpid())))
		return m
	}
	ts := connectAll(t, 2, func(c *Config) { c.Dir, c.RingBytes = dir, 64<<10 })
	if m := mine(); len(m) != 0 {
		t.Fatalf("left in %s once the mesh is up: %v", dir, m)
	}
	exchange(t, ts, []uint32{0}, 4)
	for _, tr := range ts {
		tr.Close()
	}
	if m := mine(); len(m) != 0 {
		t.Fatalf("left in %s after Close: %v", dir, m)
	}
}

func wantTimeoutComm(t *testing.T, err error, peer int) {
	t.Helper()
	if errs.CodeOf(err) != errs.TimeoutComm {
		t.Fatalf("got %v, want E_TIMEOUT_COMM", err)
	}
	if !strings.Contains(err.Error(), fmt.Sprintf("rank %d", peer)) {
		t.Fatalf("%v does not name rank %d", err, peer)
	}
}

func TestRecvDeadlineIsCoded(t *testing.T) {
	noLeak(t)
	ts := connectAll(t, 2, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := ts[0].Recv(ctx, 0, 1)
	wantTimeoutComm(t, err, 1)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("%v: not the deadline", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("a 50 ms deadline took %s", d)
	}
}

// A receiver that takes nothing: its queue holds one frame, the ring fills, and the sender's
// deadline ends its Send with a coded error naming the receiver; the stream stays usable when
// nothing of the frame went in.
func TestSendDeadlineOnFullRing(t *testing.T) {
	noLeak(t)
	ts := connectAll(t, 2, func(c *Config) { c.RingBytes, c.QueueFrames, c.QueueBytes = 4096, 1, 1 })
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	var err error
	for seq := range 16 {
		if err = ts[0].Send(ctx, 1, frame(0, 1, 0, uint64(seq), 3000)); err != nil {
			break
		}
	}
	wantTimeoutComm(t, err, 1)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("%v: not the deadline", err)
	}
}

func TestPeerClosedIsDetected(t *testing.T) {
	noLeak(t)
	ts := connectAll(t, 2, func(c *Config) { c.RingBytes = 4096 })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := ts[1].Send(ctx, 0, frame(1, 0, 0, 0, 100)); err != nil {
		t.Fatal(err)
	}
	ts[1].Close()
	// What was sent before is still delivered, then the peer is gone.
	f, err := ts[0].Recv(ctx, 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := checkFrame(f, 1, 0, 0, 0, 100); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = ts[0].Recv(ctx, 0, 1)
	wantTimeoutComm(t, err, 1)
	if !strings.Contains(err.Error(), "closed") {
		t.Fatalf("%v does not say the peer closed", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("the closed peer was noticed after %s", d)
	}
	// A frame larger than the ring cannot go in: Send fails the same way, before ctx ends.
	err = ts[0].Send(ctx, 1, frame(0, 1, 0, 0, 64<<10))
	wantTimeoutComm(t, err, 1)
	if ctx.Err() != nil {
		t.Fatal("the send waited for its deadline instead of seeing the closed peer")
	}
}

// A peer process that was killed sets no flag: the waiter finds it gone through its pid.
func TestPeerProcessGoneIsDetected(t *testing.T) {
	noLeak(t)
	ts := connectAll(t, 2, nil)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	// Rank 1 now claims to be that exited (and reaped) process.
	atomic.StoreUint32(ts[0].peers[1].in.prodPid, uint32(cmd.Process.Pid))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	start := time.Now()
	_, err := ts[0].Recv(ctx, 0, 1)
	wantTimeoutComm(t, err, 1)
	if !strings.Contains(err.Error(), "process is gone") {
		t.Fatalf("%v does not say the process is gone", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("the dead peer was noticed after %s", d)
	}
}

// A bit flipped in the ring (in the mapping, after the sender's copy and before the receiver
// reads it) is caught by the communicator as on tcp: E_DESYNC naming the crc field.
func TestFlippedBitInRingIsDesyncCRC(t *testing.T) {
	ts, errsOut := allReduceWithAFlip(t, 4<<10, 1, 100)
	err := errsOut[1] // rank 1 received the corrupted frame
	if errs.CodeOf(err) != errs.Desync || dist.DesyncField(err) != "crc" {
		t.Fatalf("rank 1: got %v, want E_DESYNC naming crc", err)
	}
	// The first phase's frame is read in place (dist.Lender): the checksum over the ring's
	// bytes is what caught the flip.
	if got := ts[1].Stats().Lent; got != 1 {
		t.Fatalf("rank 1 lent %d frames, want 1", got)
	}
}

// posted waits until p's receiver has posted a loan or landing: rank 0 sends only then, so its
// first frame is read after rank 1's post, not before it (a frame read before its post is copied).
func posted(p *peer, within time.Duration) bool {
	for end := time.Now().Add(within); time.Now().Before(end); time.Sleep(100 * time.Microsecond) {
		p.lmu.Lock()
		k := len(p.lands)
		p.lmu.Unlock()
		if k > 0 {
			return true
		}
	}
	return false
}

// allReduceWithAFlip runs a max all_reduce of parts buffers of n bytes per rank (int8) over a
// fresh two-rank world, with bit 4 of payload byte at of rank 0's first frame to rank 1
// flipped in the ring after the sender's copy, and returns the world and each rank's error.
// Rank 0 starts once rank 1 has posted its receives, so that frame is read in place.
func allReduceWithAFlip(t *testing.T, n, parts, at int) ([]*Transport, []error) {
	t.Helper()
	noLeak(t)
	ts := connectAll(t, 2, nil)
	target := ts[0].peers[1].out
	var flipped atomic.Bool
	pos0 := uint64(dist.HeaderSize + at)
	corruptHook = func(r *ring, pos, k uint64) {
		if r.data == nil || &r.data[0] != &target.data[0] || pos > pos0 || pos+k <= pos0 || flipped.Swap(true) {
			return
		}
		*r.at(pos0) ^= 0x10
	}
	t.Cleanup(func() { corruptHook = nil })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	errsOut := make([]error, 2)
	var wg sync.WaitGroup
	for r := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if r == 0 && !posted(ts[1].peers[0], 5*time.Second) {
				errsOut[r] = errors.New("rank 1 posted nothing for rank 0 within 5s")
				return
			}
			c := dist.NewComm(ts[r], dist.Options{Timeout: 5 * time.Second})
			bufs := make([][]byte, parts)
			for j := range bufs {
				bufs[j] = make([]byte, n)
				for i := range bufs[j] {
					bufs[j][i] = byte(i*7 + r + j)
				}
			}
			errsOut[r] = c.AllReduceMulti(ctx, numerics.I8, bufs, make([]byte, n), dist.Max)
		}()
	}
	wg.Wait()
	if !flipped.Load() {
		t.Fatal("the hook never saw the byte")
	}
	return ts, errsOut
}

func TestWorldOfOne(t *testing.T) {
	noLeak(t)
	tr, err := Connect(context.Background(), Config{Rank: 0, World: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := tr.Send(ctx, 0, frame(0, 0, 2, 0, 10)); err != nil {
		t.Fatal(err)
	}
	f, err := tr.Recv(ctx, 2, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := checkFrame(f, 0, 0, 2, 0, 10); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkAllReduce64MiB is tcp's benchmark of the same name over the rings: a 4-rank f32
// all_reduce with ranks as goroutines, for a side-by-side of the two transports' whole path
// (framing, checksums, copies, reduction) in one process.
func BenchmarkAllReduce64MiB(b *testing.B) { benchAllReduce(b, 4, 64<<20) }

// BenchmarkAllReduce16MiB is the 2-rank case that the collectives command compares with gloo.
func BenchmarkAllReduce16MiB(b *testing.B) { benchAllReduce(b, 2, 16<<20) }

func benchAllReduce(b *testing.B, n, size int) {
	ts := connectAll(b, n, nil)
	comms := make([]*dist.Comm, n)
	bufs := make([][]byte, n)
	for r := range n {
		comms[r] = dist.NewComm(ts[r], dist.Options{Timeout: time.Minute})
		bufs[r] = make([]byte, size)
		for i := 0; i < size; i += 4 {
			bufs[r][i+2] = byte(r + i)
			bufs[r][i+3] = 0x3f
		}
	}
	b.SetBytes(int64(size))
	b.ResetTimer()
	for range b.N {
		var wg sync.WaitGroup
		for r := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := comms[r].AllReduce(context.Background(), numerics.F32, bufs[r], bufs[r], dist.Sum); err != nil {
					b.Error(err)
				}
			}()
		}
		wg.Wait()
	}
}

// An all-gather frame lands straight in the caller's buffer (dist.Lander); a bit flipped in
// the ring under it must still be E_DESYNC naming crc, and the landing path must be the one
// taken (Stats.Landed), or this test would only repeat the one above. Rank 0's own result is
// checked against the element-wise max, computed here.
func TestFlippedBitInLandedFrameIsDesyncCRC(t *testing.T) {
	noLeak(t)
	for _, flip := range []bool{false, true} {
		ts := connectAll(t, 2, nil)
		target := ts[0].peers[1].out
		var flipped atomic.Bool
		const n = 4 << 10
		// rank 0 -> 1 sends its contribution to rank 1's half (n/2 bytes), then its reduced
		// half: the byte 100 into the second frame's payload.
		const at = dist.HeaderSize + n/2 + dist.HeaderSize + 100
		corruptHook = func(r *ring, pos, k uint64) {
			if !flip || r.data == nil || &r.data[0] != &target.data[0] || pos > at || pos+k <= at || flipped.Swap(true) {
				return
			}
			*r.at(at) ^= 0x10
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		errsOut := make([]error, 2)
		bufs := make([][]byte, 2)
		var wg sync.WaitGroup
		for r := range 2 {
			bufs[r] = make([]byte, n)
			for i := range bufs[r] {
				bufs[r][i] = byte(i*7 + r*13)
			}
		}
		want := make([]byte, n)
		for i := range want {
			want[i] = byte(max(int8(bufs[0][i]), int8(bufs[1][i])))
		}
		for r := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c := dist.NewComm(ts[r], dist.Options{Timeout: 5 * time.Second})
				errsOut[r] = c.AllReduce(ctx, numerics.I8, bufs[r], bufs[r], dist.Max)
			}()
		}
		wg.Wait()
		cancel()
		corruptHook = nil
		if st := ts[1].Stats(); st.Landed != 1 || st.Lent != 1 {
			t.Fatalf("flip=%v: rank 1 landed %d and lent %d frames, want 1 and 1", flip, st.Landed, st.Lent)
		}
		if !flip {
			for r := range 2 {
				if errsOut[r] != nil {
					t.Fatalf("rank %d: %v", r, errsOut[r])
				}
				if !bytes.Equal(bufs[r], want) {
					t.Fatalf("rank %d: result differs from the element-wise max", r)
				}
			}
			continue
		}
		if !flipped.Load() {
			t.Fatal("the hook never saw the frame")
		}
		if err := errsOut[1]; errs.CodeOf(err) != errs.Desync || dist.DesyncField(err) != "crc" {
			t.Fatalf("rank 1: got %v, want E_DESYNC naming crc", err)
		}
	}
}

// Below a layer (here a hook) the communicator does not land frames: the layer's type is not a
// Lander, so the plain receive and its copy run, and the result is still the element-wise sum.
func TestLayerAboveShmDoesNotLand(t *testing.T) {
	noLeak(t)
	ts := connectAll(t, 2, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	const n = 3000
	bufs, errsOut := make([][]byte, 2), make([]error, 2)
	var wg sync.WaitGroup
	for r := range 2 {
		bufs[r] = make([]byte, n)
		for i := range bufs[r] {
			bufs[r][i] = byte(i%50 + r)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			same := func(_ context.Context, _ int, f *dist.Frame) []*dist.Frame { return []*dist.Frame{f} }
			c := dist.NewComm(dist.Intercept(ts[r], same), dist.Options{Timeout: 5 * time.Second})
			errsOut[r] = c.AllReduce(ctx, numerics.I8, bufs[r], bufs[r], dist.Sum)
		}()
	}
	wg.Wait()
	for r := range 2 {
		if errsOut[r] != nil {
			t.Fatalf("rank %d: %v", r, errsOut[r])
		}
		if got := ts[r].Stats().Landed; got != 0 {
			t.Fatalf("rank %d landed %d frames under a hook, want 0", r, got)
		}
		for i, b := range bufs[r] {
			if want := byte(2*(i%50) + 1); b != want {
				t.Fatalf("rank %d: element %d = %d, want %d", r, i, b, want)
			}
		}
	}
}
