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
	off := func() {
		if _, err := be.Run(p, in); err != nil {
			b.Fatal(err)
		}
	}
	on := func() {
		if _, err := backend.RunProfiled(be, p, in, rec); err != nil {
			b.Fatal(err)
		}
		rec.Take()
	}
	timed := func(f func()) float64 {
		t0 := time.Now()
		f()
		return float64(time.Since(t0).Nanoseconds()) / 1e3
	}
	// The side that goes first alternates, and the medians of the two sides are compared, so
	// a burst of load from other processes hits both alike and an outlier moves neither.
	var offs, ons []float64
	for i := 0; i < b.N; i++ {
		if i%2 == 0 {
			offs, ons = append(offs, timed(off)), append(ons, timed(on))
		} else {
			ons, offs = append(ons, timed(on)), append(offs, timed(off))
		}
	}
	b.ReportMetric(median(offs), "off-us/step")
	b.ReportMetric(median(ons), "on-us/step")
	b.ReportMetric(median(ons)/median(offs), "on/off")
}
