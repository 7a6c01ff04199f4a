package profiling

import (
	"testing"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/backend"
	"github.com/tessera-qa/tessera-qa/harness"
)

const overheadGraph = `graph step {
  input %x: f32[64,128]
  input %w1: f32[128,128]
  input %b1: f32[128]
  input %w2: f32[128,64]
  %h = matmul(%x, %w1)
  %hb = add(%h, %b1)
  %a = gelu(%hb) {approx="tanh"}
  %l = matmul(%a, %w2)
  %p = softmax(%l) {axis=-1}
  output %p
}
`

// BenchmarkOverhead runs one CPU step with profiling off and on, interleaved in one loop, and
// reports the ratio of the summed times side by side (docs/profiling.md records it):
//
//	go test -run '^$' -bench Overhead -benchtime 200x ./profiling
func BenchmarkOverhead(b *testing.B) {
	g := mustGraph(b, overheadGraph)
	in, err := harness.RandomInputs(g, 1, nil)
	if err != nil {
		b.Fatal(err)
	}
	p := compile(b, g)
	be, _ := backend.Get("cpu")
	rec := &Recorder{}
	var off, on time.Duration
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		if _, err := be.Run(p, in); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if _, err := backend.RunProfiled(be, p, in, rec); err != nil {
			b.Fatal(err)
		}
		on += time.Since(t1)
		off += t1.Sub(t0)
		rec.Take()
	}
	b.ReportMetric(float64(off.Microseconds())/float64(b.N), "off-us/step")
	b.ReportMetric(float64(on.Microseconds())/float64(b.N), "on-us/step")
	b.ReportMetric(float64(on)/float64(off), "on/off")
}
