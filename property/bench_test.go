package property

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/tessera-qa/tessera-qa/harness"
)

// BenchmarkPropertyThroughput measures the speed target: random small graphs (at most
// 6 ops, 64K elements per tensor) per minute through generate (draw, build, golden model,
// noise-model filter) + compile + run + check on the CPU backend. "serial" is one graph at a
// time, as the Ginkgo suite runs them; "parallel" keeps GOMAXPROCS graphs in flight.
//
//	go test -run='^$' -bench=PropertyThroughput -benchtime=2000x -cpu 2 ./property
func BenchmarkPropertyThroughput(b *testing.B) {
	gen := Cases(SmallConfig())
	be := cpu(b)
	one := func(b *testing.B, seed int) {
		c := gen.Example(seed)
		if r := (harness.Runner{Backend: be}).Run(c.Harness(Suite, "bench", 0)); r.Verdict != harness.VerdictPass {
			b.Fatalf("graph %d: %s: %s\n%s", seed, r.Verdict, r.Reason, c.GoString())
		}
	}
	b.Run("serial", func(b *testing.B) {
		start := time.Now()
		for i := 0; b.Loop(); i++ {
			one(b, i)
		}
		b.ReportMetric(float64(b.N)/time.Since(start).Minutes(), "graphs/min")
	})
	b.Run("parallel", func(b *testing.B) {
		var next atomic.Int64
		start := time.Now()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				one(b, int(next.Add(1)))
			}
		})
		b.ReportMetric(float64(b.N)/time.Since(start).Minutes(), "graphs/min")
	})
}
