//go:build unix

package shm

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/dist"
	"github.com/tessera-qa/tessera-qa/engine/dist/rdzv"
	"github.com/tessera-qa/tessera-qa/engine/dist/tcp"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

// BenchmarkStream moves frames both ways between two ranks at once over shm and over tcp, with
// nothing else to do: what the transports themselves cost, apart from the communicator's
// checksums and reduction.
func BenchmarkStream(b *testing.B) {
	for _, size := range []int{64 << 10, 1 << 20} {
		b.Run("shm/"+byteSize(size), func(b *testing.B) {
			ts := connectAll(b, 2, nil)
			stream(b, []dist.Transport{ts[0], ts[1]}, size)
		})
		b.Run("tcp/"+byteSize(size), func(b *testing.B) {
			stream(b, tcpPair(b), size)
		})
	}
}

func byteSize(n int) string {
	if n >= 1<<20 {
		return fmt.Sprintf("%dMiB", n>>20)
	}
	return fmt.Sprintf("%dKiB", n>>10)
}

func tcpPair(b *testing.B) []dist.Transport {
	srv, err := rdzv.Serve(context.Background(), "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { srv.Close() })
	out := make([]dist.Transport, 2)
	errsOut := make([]error, 2)
	var wg sync.WaitGroup
	for r := range 2 {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		st, err := rdzv.Dial(ctx, srv.Addr())
		cancel()
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { st.Close() })
		wg.Add(1)
		go func() {
			defer wg.Done()
			var t *tcp.Transport
			t, errsOut[r] = tcp.Connect(context.Background(), tcp.Config{Rank: r, World: 2, Store: st, JobID: "stream", ListenHost: "127.0.0.1", Timeout: 10 * time.Second})
			if t != nil {
				out[r] = t
			}
		}()
	}
	wg.Wait()
	for _, err := range errsOut {
		if err != nil {
			b.Fatal(err)
		}
	}
	b.Cleanup(func() {
		out[0].Close()
		out[1].Close()
	})
	return out
}

func stream(b *testing.B, ts []dist.Transport, size int) {
	p := make([]byte, size)
	f := &dist.Frame{Header: dist.Header{Op: dist.OpSend, DType: numerics.I8, Count: uint64(size), CRC: dist.Checksum(p)}, Payload: p}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b.SetBytes(int64(2 * size))
	b.ResetTimer()
	var wg sync.WaitGroup
	for r := range 2 {
		wg.Add(2)
		go func() {
			defer wg.Done()
			g := *f
			g.Src = uint16(r)
			for i := range b.N {
				g.Seq = uint64(i)
				if err := ts[r].Send(ctx, 1-r, &g); err != nil {
					b.Error(err)
					return
				}
			}
		}()
		go func() {
			defer wg.Done()
			for range b.N {
				got, err := ts[r].Recv(ctx, 0, 1-r)
				if err != nil {
					b.Error(err)
					return
				}
				if rc, ok := ts[r].(dist.Recycler); ok {
					rc.Recycle(got)
				}
			}
		}()
	}
	wg.Wait()
}
