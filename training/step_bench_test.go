package training

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/compiler"
	"github.com/tessera-qa/tessera-qa/engine/dist"
	"github.com/tessera-qa/tessera-qa/engine/dist/dtensor"
	"github.com/tessera-qa/tessera-qa/engine/dist/rdzv"
	"github.com/tessera-qa/tessera-qa/engine/dist/run"
	"github.com/tessera-qa/tessera-qa/engine/dist/tcp"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
)

// BenchmarkGradientAverage times one data-parallel step's averaging (the loss and every
// gradient of the model) over 4 tcp ranks on loopback, one all_reduce per tensor against one
// per bucket, side by side in each iteration, and reports the ratio.
func BenchmarkGradientAverage(b *testing.B) {
	for _, model := range []string{"mlp", "transformer-block"} {
		b.Run(model+"-tcp-4ranks", func(b *testing.B) {
			const world = 4
			m, err := Build(model, numerics.F32, DefaultDims(model), 8)
			if err != nil {
				b.Fatal(err)
			}
			comms := tcpComms(b, world)
			var alone, bucketed time.Duration
			for range b.N {
				alone += timeAverage(b, comms, m, 1)
				bucketed += timeAverage(b, comms, m, compiler.BucketBytes)
			}
			b.ReportMetric(float64(alone.Microseconds())/float64(b.N), "per-tensor-us/op")
			b.ReportMetric(float64(bucketed.Microseconds())/float64(b.N), "bucketed-us/op")
			b.ReportMetric(float64(alone)/float64(bucketed), "speedup")
			b.ReportMetric(float64(len(m.Params)+1), "tensors")
		})
	}
}

func timeAverage(b *testing.B, comms []*dist.Comm, m *Model, capBytes int) time.Duration {
	ts := make([][]*tensor.Tensor, len(comms))
	for r := range comms {
		params := m.Init(uint64(r) + 1)
		ts[r] = append([]*tensor.Tensor{tensor.New(numerics.F32, nil)}, gradList(m, params)...)
	}
	var wg sync.WaitGroup
	start := time.Now()
	for r, c := range comms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := averageBuckets(context.Background(), c, 10*time.Second, ts[r], capBytes); err != nil {
				b.Error(err)
			}
		}()
	}
	wg.Wait()
	return time.Since(start)
}

// BenchmarkMeshStepBucket times the transformer block's tensor-parallel step (forward, loss,
// gradient) on dp=2,tp=2 over 4 tcp ranks on loopback, with its dp gradient sums in one bucket
// at the end and with the same all_reduces run one by one, side by side in each iteration.
func BenchmarkMeshStepBucket(b *testing.B) {
	m, bucketed := compileTPStep(b, "dp=2,tp=2")
	alone := unbucketed(bucketed)
	be, inputs := tpInputs(b, m, bucketed, 1)
	ms := bucketed.Graph.Mesh
	comms := tcpComms(b, ms.World())
	groups := make([]*dtensor.Groups, len(comms))
	for r, c := range comms {
		var err error
		if groups[r], err = dtensor.NewGroups(ms, c); err != nil {
			b.Fatal(err)
		}
	}
	step := func(p *compiler.DistProgram) time.Duration {
		var wg sync.WaitGroup
		start := time.Now()
		for r := range groups {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := run.Rank(context.Background(), p, be, groups[r], inputs[r]); err != nil {
					b.Error(err)
				}
			}()
		}
		wg.Wait()
		return time.Since(start)
	}
	var tb, ta time.Duration
	for range b.N {
		ta += step(alone)
		tb += step(bucketed)
	}
	b.ReportMetric(float64(ta.Microseconds())/float64(b.N), "per-tensor-us/op")
	b.ReportMetric(float64(tb.Microseconds())/float64(b.N), "bucketed-us/op")
	b.ReportMetric(float64(ta)/float64(tb), "speedup")
}

// tcpComms connects world goroutine ranks over loopback through a rendezvous store on a port
// the OS picks.
func tcpComms(b *testing.B, world int) []*dist.Comm {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	srv, err := rdzv.Serve(ctx, "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { srv.Close() })
	comms := make([]*dist.Comm, world)
	errsOut := make([]error, world)
	var wg sync.WaitGroup
	for r := range world {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, err := rdzv.Dial(ctx, srv.Addr())
			if err != nil {
				errsOut[r] = err
				return
			}
			b.Cleanup(func() { st.Close() })
			t, err := tcp.Connect(ctx, tcp.Config{Rank: r, World: world, Store: st, JobID: "gradient-average", ListenHost: "127.0.0.1", Timeout: 15 * time.Second})
			if err != nil {
				errsOut[r] = err
				return
			}
			b.Cleanup(func() { t.Close() })
			comms[r] = dist.NewComm(t, dist.Options{Mode: dist.Deterministic, Timeout: 10 * time.Second})
		}()
	}
	wg.Wait()
	for r, err := range errsOut {
		if err != nil {
			b.Fatalf("rank %d: %v", r, err)
		}
	}
	return comms
}
