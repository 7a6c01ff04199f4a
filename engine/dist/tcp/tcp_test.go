package tcp

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/dist"
	"github.com/tessera-qa/tessera-qa/engine/dist/rdzv"
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

// noLeak fails t if goroutines started during the test outlive it (after every cleanup
// registered later has run).
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

// world is n ranks as goroutines over loopback, meeting through a real TCP store.
type world struct {
	srv    *rdzv.Server
	stores []rdzv.Store
	ts     []*Transport
}

func storeFor(t testing.TB) *rdzv.Server {
	t.Helper()
	srv, err := rdzv.Serve(context.Background(), "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return srv
}

func dialStore(t testing.TB, addr string) rdzv.Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := rdzv.Dial(ctx, addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func jobName(t testing.TB) string { return strings.ReplaceAll(t.Name(), "/", "-") }

func connectAll(t testing.TB, n int, mod func(*Config)) []*Transport {
	t.Helper()
	srv := storeFor(t)
	ts := make([]*Transport, n)
	errsOut := make([]error, n)
	var wg sync.WaitGroup
	for r := range n {
		cfg := Config{Rank: r, World: n, Store: dialStore(t, srv.Addr()), JobID: jobName(t), ListenHost: "127.0.0.1", Timeout: 10 * time.Second}
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

// payload is the deterministic content of frame seq from src to dst on comm.
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
	return nil
}

// sizes draws frame sizes from 0 to 8 MiB: mostly small, some large, the edges always.
func sizes(seed uint64, k int) []int {
	r := rand.New(rand.NewPCG(seed, 7))
	out := []int{0, 8 << 20, 1, dist.HeaderSize}
	for len(out) < k {
		switch r.IntN(4) {
		case 0:
			out = append(out, r.IntN(64))
		case 1:
			out = append(out, r.IntN(64<<10))
		case 2:
			out = append(out, r.IntN(1<<20))
		default:
			out = append(out, r.IntN(8<<20+1))
		}
	}
	r.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

// Four ranks, every pair, both directions, two communicators interleaved, frames of 0 bytes
// to 8 MiB: every frame arrives whole, checksummed, in per-(communicator, sender) order.
func TestFramesBetweenFourRanks(t *testing.T) {
	noLeak(t)
	const n, perComm = 4, 10
	ts := connectAll(t, n, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	errc := make(chan error, 1000)
	for src := range n {
		for dst := range n {
			// Sender: comm 0 and comm 1 frames interleaved on one connection.
			wg.Add(1)
			go func() {
				defer wg.Done()
				sz := [2][]int{sizes(uint64(src*16+dst), perComm), sizes(uint64(src*16+dst+1000), perComm)}
				for i := range perComm {
					for comm := range uint32(2) {
						if err := ts[src].Send(ctx, dst, frame(src, dst, comm, uint64(i), sz[comm][i])); err != nil {
							errc <- err
							return
						}
					}
				}
			}()
			// Receivers, one per communicator.
			for comm := range uint32(2) {
				wg.Add(1)
				go func() {
					defer wg.Done()
					sz := sizes(uint64(src*16+dst)+uint64(comm)*1000, perComm)
					for i := range perComm {
						f, err := ts[dst].Recv(ctx, comm, src)
						if err == nil {
							err = checkFrame(f, src, dst, comm, uint64(i), sz[i])
						}
						if err != nil {
							errc <- err
							return
						}
					}
				}()
			}
		}
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Error(err)
	}
	if s := ts[0].Stats(); s.BytesSent == 0 || s.BytesReceived == 0 {
		t.Errorf("stats %+v", s)
	}
}

// Frames of one communicator do not wait for another's: all of comm 1 is received before
// anything of comm 0, which was sent first.
func TestCommunicatorsDoNotBlockEachOther(t *testing.T) {
	noLeak(t)
	ts := connectAll(t, 2, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i := range 50 {
		if err := ts[1].Send(ctx, 0, frame(1, 0, 7, uint64(i), 1000)); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 50 {
		if err := ts[1].Send(ctx, 0, frame(1, 0, 9, uint64(i), 3)); err != nil {
			t.Fatal(err)
		}
	}
	for comm, count := range map[uint32]int{9: 3, 7: 1000} {
		for i := range 50 {
			f, err := ts[0].Recv(ctx, comm, 1)
			if err == nil {
				err = checkFrame(f, 1, 0, comm, uint64(i), count)
			}
			if err != nil {
				t.Fatal(err)
			}
		}
	}
}

func TestSendToItselfAndBadSends(t *testing.T) {
	noLeak(t)
	ts := connectAll(t, 2, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	f := frame(1, 1, 3, 0, 100)
	if err := ts[1].Send(ctx, 1, f); err != nil {
		t.Fatal(err)
	}
	f.Payload[0]++ // the caller may reuse its buffer at once
	g, err := ts[1].Recv(ctx, 3, 1)
	if err != nil || checkFrame(g, 1, 1, 3, 0, 100) != nil {
		t.Fatalf("self frame: %v %v", err, checkFrame(g, 1, 1, 3, 0, 100))
	}
	bad := frame(1, 0, 0, 0, 10)
	bad.Payload = bad.Payload[:9]
	for _, c := range []struct {
		to   int
		f    *dist.Frame
		code errs.Code
	}{{2, frame(1, 0, 0, 0, 1), errs.Input}, {-1, frame(1, 0, 0, 0, 1), errs.Input}, {0, nil, errs.Input}, {0, bad, errs.Input},
		{0, &dist.Frame{Header: dist.Header{Op: dist.OpSend, DType: 99}}, errs.Input}} {
		if err := ts[1].Send(ctx, c.to, c.f); errs.CodeOf(err) != c.code {
			t.Errorf("send to %d: %v, want %s", c.to, err, c.code)
		}
	}
	if _, err := ts[1].Recv(ctx, 0, 5); errs.CodeOf(err) != errs.Input {
		t.Errorf("recv from rank 5: %v", err)
	}
	// The connection still works after the refused sends.
	if err := ts[1].Send(ctx, 0, frame(1, 0, 0, 0, 5)); err != nil {
		t.Fatal(err)
	}
	if g, err := ts[0].Recv(ctx, 0, 1); err != nil || checkFrame(g, 1, 0, 0, 0, 5) != nil {
		t.Fatalf("after bad sends: %v", err)
	}
	// A receive that runs out of time says so, and names the peer.
	short, cancel2 := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel2()
	if _, err := ts[0].Recv(short, 0, 1); errs.CodeOf(err) != errs.TimeoutComm || !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "rank 1") {
		t.Errorf("recv past its deadline: %v", err)
	}
}

// A peer that goes away (closes its transport, as a dying process's kernel would) fails
// pending and later calls for it at once with E_TIMEOUT_COMM naming it; what it sent before
// is still delivered first; the other peers are unaffected.
func TestPeerDeathIsPromptAndNamed(t *testing.T) {
	noLeak(t)
	ts := connectAll(t, 3, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := ts[2].Send(ctx, 0, frame(2, 0, 0, 0, 4096)); err != nil {
		t.Fatal(err)
	}
	pending := make(chan error, 1)
	go func() {
		if _, err := ts[1].Recv(ctx, 5, 2); err != nil {
			pending <- err
			return
		}
		pending <- nil
	}()
	time.Sleep(50 * time.Millisecond)
	killed := time.Now()
	ts[2].Close()
	select {
	case err := <-pending:
		if errs.CodeOf(err) != errs.TimeoutComm || !strings.Contains(err.Error(), "rank 2") || !strings.Contains(err.Error(), "gone") {
			t.Errorf("pending recv: %v", err)
		}
		if d := time.Since(killed); d > time.Second {
			t.Errorf("pending recv failed %s after the peer died", d)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("pending recv still waiting 5 s after the peer died")
	}
	// Rank 0 first gets the frame sent before the death, then the error.
	f, err := ts[0].Recv(ctx, 0, 2)
	if err != nil || checkFrame(f, 2, 0, 0, 0, 4096) != nil {
		t.Fatalf("frame sent before death: %v", err)
	}
	start := time.Now()
	if _, err := ts[0].Recv(ctx, 0, 2); errs.CodeOf(err) != errs.TimeoutComm || !strings.Contains(err.Error(), "rank 2") {
		t.Errorf("recv after death: %v", err)
	}
	if err := ts[0].Send(ctx, 2, frame(0, 2, 0, 0, 10)); errs.CodeOf(err) != errs.TimeoutComm || !strings.Contains(err.Error(), "rank 2") {
		t.Errorf("send after death: %v", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("calls after death took %s", d)
	}
	// Ranks 0 and 1 still talk.
	if err := ts[0].Send(ctx, 1, frame(0, 1, 0, 0, 10)); err != nil {
		t.Fatal(err)
	}
	if f, err := ts[1].Recv(ctx, 0, 0); err != nil || checkFrame(f, 0, 1, 0, 0, 10) != nil {
		t.Fatalf("survivors: %v", err)
	}
	// The dead rank's own endpoint refuses calls.
	if _, err := ts[2].Recv(ctx, 0, 0); errs.CodeOf(err) != errs.TimeoutComm || !strings.Contains(err.Error(), "closed") {
		t.Errorf("recv on a closed transport: %v", err)
	}
}

// A rank that never comes: the others fail with E_COMM_INIT naming it within the timeout.
func TestConnectMissingRank(t *testing.T) {
	noLeak(t)
	srv := storeFor(t)
	const timeout = time.Second
	var wg sync.WaitGroup
	for r := range 3 {
		if r == 1 {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			start := time.Now()
			tr, err := Connect(context.Background(), Config{Rank: r, World: 4, Store: dialStore(t, srv.Addr()), JobID: jobName(t), ListenHost: "127.0.0.1", Timeout: timeout})
			if err == nil {
				tr.Close()
				t.Errorf("rank %d connected without ranks 1 and 3", r)
				return
			}
			if errs.CodeOf(err) != errs.CommInit || !strings.Contains(err.Error(), "1,3 of 4") || !strings.Contains(err.Error(), "never published") {
				t.Errorf("rank %d: %v", r, err)
			}
			if d := time.Since(start); d < timeout-50*time.Millisecond || d > timeout+3*time.Second {
				t.Errorf("rank %d failed after %s", r, d)
			}
		}()
	}
	wg.Wait()
}

// A peer of another world size is refused at the handshake: the dialer fails at once with
// the reason, the acceptor at its deadline, also with the reason.
func TestMismatchedPeerIsRefused(t *testing.T) {
	noLeak(t)
	srv := storeFor(t)
	type result struct {
		err  error
		took time.Duration
	}
	res := make([]result, 2)
	var wg sync.WaitGroup
	for r, w := range []int{2, 3} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			start := time.Now()
			tr, err := Connect(context.Background(), Config{Rank: r, World: w, Store: dialStore(t, srv.Addr()), JobID: jobName(t), ListenHost: "127.0.0.1", Timeout: 1500 * time.Millisecond})
			if tr != nil {
				tr.Close()
			}
			res[r] = result{err, time.Since(start)}
		}()
	}
	wg.Wait()
	if e := res[1].err; errs.CodeOf(e) != errs.CommInit || !strings.Contains(e.Error(), "rank 0 at") || !strings.Contains(e.Error(), "refused the connection: its world size is 3, this rank's 2") {
		t.Errorf("dialer: %v", e)
	}
	if res[1].took > time.Second {
		t.Errorf("dialer took %s to learn it was refused", res[1].took)
	}
	if e := res[0].err; errs.CodeOf(e) != errs.CommInit || !strings.Contains(e.Error(), "its world size is 3") {
		t.Errorf("acceptor: %v", e)
	}
}

// Stray connections to a rank's listener during setup (another protocol, another job) are
// dropped or refused without disturbing the real peers.
func TestStrayConnectionsAreRefused(t *testing.T) {
	noLeak(t)
	srv := storeFor(t)
	job := jobName(t)
	st := dialStore(t, srv.Addr())
	done := make(chan *Transport, 1)
	go func() {
		tr, err := Connect(context.Background(), Config{Rank: 0, World: 2, Store: dialStore(t, srv.Addr()), JobID: job, ListenHost: "127.0.0.1", Timeout: 10 * time.Second})
		if err != nil {
			t.Error(err)
		}
		done <- tr
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	addr, err := st.Get(ctx, "tessera/"+job+"/tcp/1/addr/0")
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("tcp", string(addr))
	if err != nil {
		t.Fatal(err)
	}
	c.Write([]byte("GET / HTTP/1.0\r\n\r\n........................"))
	c.SetReadDeadline(time.Now().Add(2 * time.Second))
	if n, _ := c.Read(make([]byte, 10)); n != 0 {
		t.Errorf("a stray got %d bytes of answer", n)
	}
	c.Close()
	c, err = net.Dial("tcp", string(addr))
	if err != nil {
		t.Fatal(err)
	}
	c.Write(hello{job: "other-job", world: 2, from: 1, to: 0, generation: 1}.marshal())
	_, reason, err := readAnswer(c)
	c.Close()
	if err != nil || !strings.Contains(reason, `it belongs to job "other-job"`) {
		t.Errorf("other job's peer: reason %q err %v", reason, err)
	}
	tr1, err := Connect(ctx, Config{Rank: 1, World: 2, Store: dialStore(t, srv.Addr()), JobID: job, ListenHost: "127.0.0.1", Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer tr1.Close()
	tr0 := <-done
	if tr0 == nil {
		return
	}
	defer tr0.Close()
	if err := tr1.Send(ctx, 0, frame(1, 0, 0, 0, 10)); err != nil {
		t.Fatal(err)
	}
	if f, err := tr0.Recv(ctx, 0, 1); err != nil || checkFrame(f, 1, 0, 0, 0, 10) != nil {
		t.Fatalf("after strays: %v", err)
	}
}

// A second Connect in the same job (a new generation) meets the second Connects of the
// others, not leftovers of the first.
func TestReconnectInTheSameJob(t *testing.T) {
	noLeak(t)
	srv := storeFor(t)
	stores := []rdzv.Store{dialStore(t, srv.Addr()), dialStore(t, srv.Addr()), dialStore(t, srv.Addr())}
	for round := range 2 {
		ts := make([]*Transport, 3)
		var wg sync.WaitGroup
		for r := range 3 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var err error
				ts[r], err = Connect(context.Background(), Config{Rank: r, World: 3, Store: stores[r], JobID: jobName(t), ListenHost: "127.0.0.1", Timeout: 10 * time.Second})
				if err != nil {
					t.Errorf("round %d rank %d: %v", round, r, err)
				}
			}()
		}
		wg.Wait()
		if t.Failed() {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if err := ts[2].Send(ctx, 0, frame(2, 0, 0, uint64(round), 7)); err != nil {
			t.Fatal(err)
		}
		if f, err := ts[0].Recv(ctx, 0, 2); err != nil || checkFrame(f, 2, 0, 0, uint64(round), 7) != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		cancel()
		for _, tr := range ts {
			tr.Close()
		}
	}
}

// Close with a Recv pending, a Send blocked on a peer that does not read, and a peer still
// sending: everything returns, nothing is left running.
func TestCloseUnblocksEverything(t *testing.T) {
	noLeak(t)
	ts := connectAll(t, 2, func(c *Config) { c.QueueBytes = 1 << 20; c.QueueFrames = 4 })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	results := make(chan error, 3)
	wg.Add(2)
	go func() { defer wg.Done(); _, err := ts[0].Recv(ctx, 42, 1); results <- err }()
	go func() {
		defer wg.Done()
		// Rank 1 receives nothing: its queue fills, TCP pushes back, this Send blocks.
		for i := 0; ; i++ {
			if err := ts[0].Send(ctx, 1, frame(0, 1, 0, uint64(i), 1<<20)); err != nil {
				results <- err
				return
			}
		}
	}()
	time.Sleep(300 * time.Millisecond)
	start := time.Now()
	ts[0].Close()
	wg.Wait()
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("close took %s", d)
	}
	close(results)
	for err := range results {
		if errs.CodeOf(err) != errs.TimeoutComm {
			t.Errorf("call pending at close: %v", err)
		}
	}
	ts[1].Close()
}

// With the communicator on top: an all-reduce over four tcp ranks gives the same bits as over
// inproc.
func TestAllReduceMatchesInproc(t *testing.T) {
	noLeak(t)
	const n, count = 4, 100003
	inputs := make([][]byte, n)
	for r := range inputs {
		inputs[r] = make([]byte, 4*count)
		rng := rand.New(rand.NewPCG(uint64(r), 1))
		for i := range count {
			binary.LittleEndian.PutUint32(inputs[r][4*i:], mathFloat32bits(float32(rng.NormFloat64())))
		}
	}
	run := func(trs []dist.Transport) [][]byte {
		out := make([][]byte, n)
		var wg sync.WaitGroup
		for r, tr := range trs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c := dist.NewComm(tr, dist.Options{Timeout: 20 * time.Second})
				out[r] = make([]byte, 4*count)
				if err := c.AllReduce(context.Background(), numerics.F32, inputs[r], out[r], dist.Sum); err != nil {
					t.Errorf("%s rank %d: %v", tr.Name(), r, err)
				}
			}()
		}
		wg.Wait()
		return out
	}
	ts := connectAll(t, n, nil)
	trs := make([]dist.Transport, n)
	for i, tr := range ts {
		trs[i] = tr
	}
	got := run(trs)
	want := run(dist.NewInproc(n))
	for r := range n {
		if !bytes.Equal(got[r], want[r]) {
			t.Errorf("rank %d: tcp and inproc all-reduce differ", r)
		}
	}
}

func BenchmarkLoopbackThroughput(b *testing.B) {
	for _, size := range []int{64 << 10, 1 << 20, 8 << 20} {
		b.Run(fmt.Sprintf("%dKiB", size>>10), func(b *testing.B) {
			ts := connectAll(b, 2, nil)
			ctx := context.Background()
			f := frame(1, 0, 0, 0, size)
			b.SetBytes(int64(size))
			b.ResetTimer()
			done := make(chan error, 1)
			go func() {
				for range b.N {
					if _, err := ts[0].Recv(ctx, 0, 1); err != nil {
						done <- err
						return
					}
				}
				done <- nil
			}()
			for range b.N {
				if err := ts[1].Send(ctx, 0, f); err != nil {
					b.Fatal(err)
				}
			}
			if err := <-done; err != nil {
				b.Fatal(err)
			}
		})
	}
}

// BenchmarkLoopbackRawTCP is the ceiling for BenchmarkLoopbackThroughput: one loopback TCP
// connection, the same sizes, no framing, a reused receive buffer.
func BenchmarkLoopbackRawTCP(b *testing.B) {
	for _, size := range []int{64 << 10, 1 << 20, 8 << 20} {
		b.Run(fmt.Sprintf("%dKiB", size>>10), func(b *testing.B) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			defer ln.Close()
			accepted := make(chan net.Conn, 1)
			go func() { c, _ := ln.Accept(); accepted <- c }()
			w, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				b.Fatal(err)
			}
			defer w.Close()
			r := <-accepted
			defer r.Close()
			tune(w)
			tune(r)
			buf, in := make([]byte, size), make([]byte, size)
			b.SetBytes(int64(size))
			b.ResetTimer()
			done := make(chan error, 1)
			go func() {
				for range b.N {
					if _, err := io.ReadFull(r, in); err != nil {
						done <- err
						return
					}
				}
				done <- nil
			}()
			for range b.N {
				if _, err := w.Write(buf); err != nil {
					b.Fatal(err)
				}
			}
			if err := <-done; err != nil {
				b.Fatal(err)
			}
		})
	}
}
