package stress

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/backend/cuda"
	"github.com/tessera-qa/tessera-qa/engine/failpoint"
)

// gpu returns the CUDA backend of device 0, or skips the test with the reason.
func gpu(t *testing.T) *cuda.Backend {
	t.Helper()
	b := cuda.New(0)
	if err := b.Available(); err != nil {
		t.Skipf("no GPU: %v", err)
	}
	return b
}

func runOn(t *testing.T, o Options) *Report {
	t.Helper()
	o.Seed, o.PerJob, o.Reps, o.Interval, o.OutDir = 1, 3, 2, 100*time.Millisecond, t.TempDir()
	rep, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	js, _ := json.MarshalIndent(rep, "", " ")
	t.Logf("%s", js)
	return rep
}

func monitor(rep *Report, name string) *Leak {
	for i, l := range rep.Monitors {
		if l.Monitor == name {
			return &rep.Monitors[i]
		}
	}
	return nil
}

// Jobs on lanes of their own (stream, thread, allocator) overlap on the GPU and still give
// the bits each graph gave alone on the shared stream.
func TestStreamsModeGivesTheAloneBits(t *testing.T) {
	b := gpu(t)
	rep := runOn(t, Options{Mode: ModeStreams, Jobs: 3, Backend: b, Duration: 6 * time.Second})
	if !rep.Pass || rep.Graphs == 0 || rep.Mismatches != 0 {
		t.Fatalf("streams mode: pass %v, graphs %d, mismatches %d, failures %v", rep.Pass, rep.Graphs, rep.Mismatches, rep.Failures)
	}
	if l := monitor(rep, MonAllocLive); l == nil || l.Samples == 0 {
		t.Fatalf("no allocator monitor over the lanes: %+v", rep.Monitors)
	}
}

func TestStreamsModeNeedsCUDA(t *testing.T) {
	_, err := Run(context.Background(), Options{Mode: ModeStreams, Jobs: 1, Backend: cpu(t), Duration: time.Second, OutDir: t.TempDir()})
	if err == nil {
		t.Fatal("streams mode ran on the CPU backend")
	}
}

// The planted device leak (a run's buffers never go back to the caching allocator) leaves
// every result right; the allocator's live bytes monitor must call it.
func TestEngineDeviceBufferLeakIsCaught(t *testing.T) {
	if !failpoint.Compiled {
		t.Skip("needs a failpoints build: go test -tags failpoints ./stress")
	}
	b := gpu(t)
	if err := failpoint.Activate(failpoint.CUDABuffersKeptPerRun); err != nil {
		t.Fatal(err)
	}
	defer failpoint.Activate() //nolint:errcheck // all off
	rep := runOn(t, Options{Mode: ModeGoroutines, Jobs: 2, Backend: b, Duration: 20 * time.Second})
	l := monitor(rep, MonAllocLive)
	if rep.Pass || rep.Mismatches != 0 || l == nil || !l.Leak {
		t.Fatalf("device buffers kept per run: pass %v, mismatches %d, allocator monitor %+v", rep.Pass, rep.Mismatches, l)
	}
	if err := b.Trim(); err != nil {
		t.Log(err)
	}
}
