package cudaipc

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/backend/cuda"
	"github.com/tessera-qa/tessera-qa/engine/dist"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

// BenchOptions configure Bench.
type BenchOptions struct {
	// Sizes in bytes of the f32 buffer all-reduced (default DefaultBenchSizes).
	Sizes []int
	// Reps timed repetitions per size (default and minimum 20: the median of fewer is noise).
	Reps int
	// Warmup untimed repetitions per size (default 5).
	Warmup int
	// Seed of the inputs (every rank derives its own from it).
	Seed uint64
	// FlushBytes is the copy that evicts L2 before every timed run (default twice the L2
	// size, at least 64 MiB).
	FlushBytes int
}

// DefaultBenchSizes is 1 MiB to 256 MiB, doubling.
var DefaultBenchSizes = func() []int {
	var s []int
	for b := 1 << 20; b <= 256<<20; b *= 2 {
		s = append(s, b)
	}
	return s
}()

// BenchRow is one size, as measured by rank 0. Bandwidths are in GB/s (1e9 bytes/s).
type BenchRow struct {
	Op        string  `json:"op"`
	Transport string  `json:"transport"`
	Mode      string  `json:"mode"`
	DType     string  `json:"dtype"`
	World     int     `json:"world"`
	Bytes     int     `json:"bytes"`
	Count     int     `json:"count"`
	Reps      int     `json:"reps"`
	MedianMs  float64 `json:"median_ms"`
	AlgBW     float64 `json:"algbw_gbs"` // Bytes / time
	BusBW     float64 `json:"busbw_gbs"` // algbw * 2(n-1)/n, nccl-tests' definition for all_reduce
	CopyMs    float64 `json:"copy_ms"`   // cuMemcpyDtoDAsync of Bytes on this device, median
	CopyBW    float64 `json:"copy_gbs"`  // Bytes / copy time (each byte is read once and written once)
	BusOfCopy float64 `json:"busbw_over_copy"`
	Wrong     int     `json:"wrong"` // elements off the float64 answer in the check before timing
	Device    string  `json:"device"`
}

// Bench times all_reduce (sum, f32) of every size on dc with CUDA events: fresh non-zero
// random inputs, a correctness check against the float64 answer first, warm-up, then the
// median of Reps timed runs, each started together on every rank (a host barrier) with L2
// flushed (a copy of twice the L2 size) before it. Rank 0 then times a device-to-device copy
// of the same size in the same process, the ceiling a one-GPU collective is measured against.
// Every rank calls Bench; every rank returns rows, rank 0's are the measurement.
func Bench(ctx context.Context, dc *DeviceComm, opts BenchOptions) ([]BenchRow, error) {
	if len(opts.Sizes) == 0 {
		opts.Sizes = DefaultBenchSizes
	}
	opts.Reps = max(opts.Reps, 20)
	if opts.Warmup <= 0 {
		opts.Warmup = 5
	}
	dev := dc.Device()
	info := dev.Info()
	n := dc.World()
	start, end, err := timingEvents(dev)
	if err != nil {
		return nil, err
	}
	defer dev.DestroyEvent(start)
	defer dev.DestroyEvent(end)
	flushBytes := opts.FlushBytes
	if flushBytes <= 0 {
		flushBytes = max(2*info.L2Bytes, 64<<20)
	}
	flushA, err := dev.Alloc(flushBytes)
	if err != nil {
		return nil, err
	}
	defer dev.Free(flushA)
	flushB, err := dev.Alloc(flushBytes)
	if err != nil {
		return nil, err
	}
	defer dev.Free(flushB)

	var rows []BenchRow
	for _, size := range opts.Sizes {
		count := size / 4
		row := BenchRow{Op: "all_reduce", Transport: "cuda", Mode: dc.Mode().String(), DType: "f32", World: n,
			Bytes: count * 4, Count: count, Reps: opts.Reps, Device: info.String()}
		send, err := dc.Alloc(ctx, count*4)
		if err != nil {
			return nil, err
		}
		recv, err := dc.Alloc(ctx, count*4)
		if err != nil {
			return nil, err
		}
		if err := dev.Upload(ctx, send.Ptr, benchInput(opts.Seed, dc.Rank(), count)); err != nil {
			return nil, err
		}
		if row.Wrong, err = benchCheck(ctx, dc, send.Ptr, recv.Ptr, count, opts.Seed); err != nil {
			return nil, err
		}
		for range opts.Warmup {
			if err := dc.AllReduce(ctx, numerics.F32, send.Ptr, recv.Ptr, count, dist.Sum); err != nil {
				return nil, err
			}
		}
		if err := dc.Synchronize(ctx); err != nil {
			return nil, err
		}
		times := make([]float64, 0, opts.Reps)
		for range opts.Reps {
			// Flush, let the flush finish, then start together: no rank's timed run overlaps
			// another rank's flush on the shared GPU.
			if err := dev.CopyAsync(flushB, flushA, flushBytes); err != nil {
				return nil, err
			}
			if err := dc.Synchronize(ctx); err != nil {
				return nil, err
			}
			if err := dc.Barrier(ctx); err != nil {
				return nil, err
			}
			if err := dev.Record(start); err != nil {
				return nil, err
			}
			if err := dc.AllReduce(ctx, numerics.F32, send.Ptr, recv.Ptr, count, dist.Sum); err != nil {
				return nil, err
			}
			ms, err := elapsed(ctx, dev, start, end)
			if err != nil {
				return nil, err
			}
			times = append(times, ms)
		}
		row.MedianMs = median(times)
		sec := row.MedianMs / 1e3
		row.AlgBW = float64(row.Bytes) / sec / 1e9
		row.BusBW = row.AlgBW * 2 * float64(n-1) / float64(n)
		if n == 1 {
			row.BusBW = row.AlgBW
		}
		// The copy ceiling, timed by rank 0 alone while the others wait at the barrier.
		if err := dc.Synchronize(ctx); err != nil {
			return nil, err
		}
		if dc.Rank() == 0 {
			ctimes := make([]float64, 0, opts.Reps)
			for i := range opts.Warmup + opts.Reps {
				if err := dev.CopyAsync(flushB, flushA, flushBytes); err != nil {
					return nil, err
				}
				if err := dev.Record(start); err != nil {
					return nil, err
				}
				if err := dev.CopyAsync(recv.Ptr, send.Ptr, row.Bytes); err != nil {
					return nil, err
				}
				ms, err := elapsed(ctx, dev, start, end)
				if err != nil {
					return nil, err
				}
				if i >= opts.Warmup {
					ctimes = append(ctimes, ms)
				}
			}
			row.CopyMs = median(ctimes)
			row.CopyBW = float64(row.Bytes) / (row.CopyMs / 1e3) / 1e9
			row.BusOfCopy = row.BusBW / row.CopyBW
		}
		if err := dc.Barrier(ctx); err != nil {
			return nil, err
		}
		if err := dc.Free(ctx, recv); err != nil {
			return nil, err
		}
		if err := dc.Free(ctx, send); err != nil {
			return nil, err
		}
		rows = append(rows, row)
	}
	return rows, nil
}

// BenchRank is one rank of a benchmark job from start to end: the device (OpenLocal), the
// tcp transport from the environment (tcp.FromEnv: torchrun's
// variables as `tessera-qa launch` sets them), the communicator, Bench, and a clean close.
func BenchRank(ctx context.Context, opts BenchOptions) ([]BenchRow, error) {
	dc, err := Join(ctx, Options{Timeout: 2 * time.Minute})
	if err != nil {
		return nil, err
	}
	rows, err := Bench(ctx, dc, opts)
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if cerr := dc.Close(cctx); err == nil {
		err = cerr
	}
	return rows, err
}

func timingEvents(dev Device) (cuda.Event, cuda.Event, error) {
	start, err := dev.NewEvent(false)
	if err != nil {
		return 0, 0, err
	}
	end, err := dev.NewEvent(false)
	if err != nil {
		dev.DestroyEvent(start)
		return 0, 0, err
	}
	return start, end, nil
}

// elapsed records end, waits for it (bounded) and returns the time since start.
func elapsed(ctx context.Context, dev Device, start, end cuda.Event) (float64, error) {
	if err := dev.Record(end); err != nil {
		return 0, err
	}
	if err := dev.WaitDone(ctx, end, "timed work"); err != nil {
		return 0, err
	}
	return dev.Elapsed(start, end)
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s) == 0 {
		return math.NaN()
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// benchValue is rank r's element i: a non-zero value in [-1, 1) from a hash, so any rank can
// compute any other rank's inputs without holding them.
func benchValue(seed uint64, r, i int) float32 {
	x := seed ^ uint64(r)<<48 ^ uint64(i)
	x += 0x9E3779B97F4A7C15
	x = (x ^ x>>30) * 0xBF58476D1CE4E5B9
	x = (x ^ x>>27) * 0x94D049BB133111EB
	x ^= x >> 31
	v := float32(int32(x>>32)) / (1 << 31)
	if v == 0 {
		v = 0.5
	}
	return v
}

func benchInput(seed uint64, r, count int) []byte {
	b := make([]byte, 4*count)
	for i := range count {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(benchValue(seed, r, i)))
	}
	return b
}

// benchCheck runs one all_reduce and counts sampled elements off the float64 sum by more than
// the f32 budget for n addends (design.md §7's rtol 1.3e-6 per add, relative to the sum of
// magnitudes).
func benchCheck(ctx context.Context, dc *DeviceComm, send, recv uint64, count int, seed uint64) (int, error) {
	if err := dc.AllReduce(ctx, numerics.F32, send, recv, count, dist.Sum); err != nil {
		return 0, err
	}
	got := make([]byte, 4*count)
	if err := dc.Device().Download(ctx, got, recv); err != nil {
		return 0, err
	}
	n := dc.World()
	wrong := 0
	stride := max(1, count/4099)
	for i := 0; i < count; i += stride {
		var exp, mag float64
		for r := range n {
			v := float64(benchValue(seed, r, i))
			exp += v
			mag += math.Abs(v)
		}
		g := float64(math.Float32frombits(binary.LittleEndian.Uint32(got[4*i:])))
		if math.Abs(g-exp) > 1e-5+1.3e-6*float64(n)*mag || g != g {
			wrong++
		}
	}
	return wrong, nil
}

// String is one line of nccl-tests' style.
func (r BenchRow) String() string {
	return fmt.Sprintf("%12d %12d %5s %8.3f ms %8.2f GB/s algbw %8.2f GB/s busbw | copy %8.3f ms %8.2f GB/s | busbw/copy %.2f | #wrong %d",
		r.Bytes, r.Count, r.DType, r.MedianMs, r.AlgBW, r.BusBW, r.CopyMs, r.CopyBW, r.BusOfCopy, r.Wrong)
}
