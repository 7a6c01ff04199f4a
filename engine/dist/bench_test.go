package dist

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

// BenchmarkAllReduceModes times a 4-rank in-process all_reduce of f32 in deterministic and exact
// mode side by side in one run and reports exact's cost as a ratio (the bound: <= 2x).
func BenchmarkAllReduceModes(b *testing.B) {
	for _, mib := range []int{1, 16, 64} {
		b.Run(fmt.Sprintf("f32-%dMiB-4ranks", mib), func(b *testing.B) {
			count := mib << 20 / 4
			var det, ex time.Duration
			for i := 0; i < b.N; i++ {
				det += timeAllReduce(b, 4, count, Deterministic)
				ex += timeAllReduce(b, 4, count, Exact)
			}
			b.ReportMetric(float64(det.Microseconds())/float64(b.N), "det-us/op")
			b.ReportMetric(float64(ex.Microseconds())/float64(b.N), "exact-us/op")
			b.ReportMetric(float64(ex)/float64(det), "exact/det")
		})
	}
}

func timeAllReduce(b *testing.B, n, count int, mode Mode) time.Duration {
	ts := NewInproc(n)
	bufs := make([][]byte, n)
	for r := range bufs {
		bufs[r] = randTensor(numerics.F32, count, uint64(r)).Data
	}
	var wg sync.WaitGroup
	start := time.Now()
	for r := range ts {
		wg.Add(1)
		go func(r int) {
			defer wg.Done()
			c := NewComm(ts[r], Options{Mode: mode})
			if err := c.AllReduce(context.Background(), numerics.F32, bufs[r], bufs[r], Sum); err != nil {
				b.Error(err)
			}
		}(r)
	}
	wg.Wait()
	return time.Since(start)
}
