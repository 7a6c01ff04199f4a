package sharded

import (
	"bytes"
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/backend"
	"github.com/tessera-qa/tessera-qa/engine/compiler"
	"github.com/tessera-qa/tessera-qa/engine/dist"
	"github.com/tessera-qa/tessera-qa/engine/dist/run"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
)

// median runs f reps times and returns the median wall time in seconds.
func median(b *testing.B, reps int, f func() error) float64 {
	ts := make([]float64, reps)
	for i := range ts {
		t0 := time.Now()
		if err := f(); err != nil {
			b.Fatal(err)
		}
		ts[i] = time.Since(t0).Seconds()
	}
	sort.Float64s(ts)
	return ts[reps/2]
}

// BenchmarkPencilFFT2 times fft2 of one 1024x1024 complex f32 image on one device (the
// compiled program on the CPU backend) and by the pencil method on 1, 2 and 4 in-process ranks
// (row blocks in, column blocks out; the run, not the compile), side by side in one run, and
// reports each as a ratio to the one-device time. The bits are checked equal first:
// go test ./sharded -run NONE -bench PencilFFT2 -benchtime 1x
func BenchmarkPencilFFT2(b *testing.B) {
	const reps = 5
	be, err := backend.Get("cpu")
	if err != nil {
		b.Fatal(err)
	}
	base := Pencil{Ops: []string{"fft2"}, Shape: []int{1024, 1024, 2}, DType: numerics.F32, World: 1, Seed: 1}
	c, err := base.Case()
	if err != nil {
		b.Fatal(err)
	}
	one, err := compiler.Compile(c.Graph, compiler.Options{})
	if err != nil {
		b.Fatal(err)
	}
	want, err := be.Run(one, c.Inputs)
	if err != nil {
		b.Fatal(err)
	}
	type ranked struct {
		world  int
		dp     *compiler.DistProgram
		blocks []map[string]*tensor.Tensor
	}
	var worlds []ranked
	for _, w := range []int{1, 2, 4} {
		p := base
		p.World = w
		pc, err := p.Case()
		if err != nil {
			b.Fatal(err)
		}
		dp, err := pc.Compile()
		if err != nil {
			b.Fatal(err)
		}
		blocks, err := run.ShardInputs(dp.Plan, c.Inputs)
		if err != nil {
			b.Fatal(err)
		}
		outs, err := run.Inproc(context.Background(), dp, be, dist.Options{Timeout: time.Minute}, blocks)
		if err != nil {
			b.Fatal(err)
		}
		whole, err := run.AssembleOutputs(dp.Plan, outs)
		if err != nil {
			b.Fatal(err)
		}
		if !bytes.Equal(whole[0].Data, want[0].Data) {
			b.Fatalf("pencil on %d ranks: the bits differ from one device's", w)
		}
		worlds = append(worlds, ranked{w, dp, blocks})
	}
	for range b.N {
		t1 := median(b, reps, func() error { _, err := be.Run(one, c.Inputs); return err })
		b.ReportMetric(t1*1e3, "one-device-ms")
		for _, r := range worlds {
			t := median(b, reps, func() error {
				_, err := run.Inproc(context.Background(), r.dp, be, dist.Options{Timeout: time.Minute}, r.blocks)
				return err
			})
			b.ReportMetric(t*1e3, fmt.Sprintf("pencil%d-ms", r.world))
			b.ReportMetric(t/t1, fmt.Sprintf("pencil%d/one", r.world))
		}
	}
}
