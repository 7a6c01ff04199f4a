package tcp

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/dist"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

// BenchmarkAllReduce64MiB is a 4-rank f32 all_reduce over loopback TCP with ranks as
// goroutines: one profile shows the whole path (framing, checksums, copies, reduction).
func BenchmarkAllReduce64MiB(b *testing.B) {
	const n, bytes = 4, 64 << 20
	ts := connectAll(b, n, nil)
	comms := make([]*dist.Comm, n)
	bufs := make([][]byte, n)
	for r := range n {
		comms[r] = dist.NewComm(ts[r], dist.Options{Timeout: time.Minute})
		bufs[r] = make([]byte, bytes)
		for i := 0; i < bytes; i += 4 {
			bufs[r][i+2] = byte(r + i)
			bufs[r][i+3] = 0x3f
		}
	}
	b.SetBytes(bytes)
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
