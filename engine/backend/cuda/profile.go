package cuda

import (
	"time"

	"github.com/tessera-qa/tessera-qa/engine/backend"
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/profile"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
)

var _ backend.Profiler = (*Backend)(nil)

// CUfunction_attribute values the profiler reads (cuda.h).
const (
	funcAttrMaxThreadsPerBlock = 0
	funcAttrSharedSizeBytes    = 1
)

// theoreticalOccupancy is the share of an SM's thread slots that blocksPerSM resident blocks
// of threads each fill, in percent: warps are allocated whole, so threads round up to 32.
// It is what the occupancy API predicts from registers and shared memory, not what ran
// (measured occupancy needs hardware counters, which only ncu reads).
func theoreticalOccupancy(blocksPerSM, threads, maxThreadsSM int) int64 {
	if blocksPerSM <= 0 || threads <= 0 || maxThreadsSM <= 0 {
		return 0
	}
	warps := (threads + 31) / 32
	return int64(min(100, 100*blocksPerSM*warps*32/maxThreadsSM))
}

// kernelAttrs are the driver's facts about kernel i at its launch shape.
func (e *execution) kernelAttrs(i int) map[string]int64 {
	a, k, s := e.o.a, e.fns[i], e.shapeOf(i)
	out := map[string]int64{"regs": int64(k.regs), "local_bytes": int64(k.localBytes), "dynamic_shared_bytes": int64(s.Shared)}
	var v int32
	if a.cuFuncGetAttribute(&v, funcAttrSharedSizeBytes, k.fn) == cudaSuccess {
		out["shared_bytes"] = int64(v)
	}
	if a.cuFuncGetAttribute(&v, funcAttrMaxThreadsPerBlock, k.fn) == cudaSuccess {
		out["max_threads"] = int64(v)
	}
	if a.cuOccupancyMaxActiveBlocksPerMultiprocessor != nil &&
		a.cuOccupancyMaxActiveBlocksPerMultiprocessor(&v, k.fn, int32(s.Threads), uint64(s.Shared)) == cudaSuccess {
		out["blocks_per_sm"] = int64(v)
		if occ := theoreticalOccupancy(int(v), s.Threads, e.o.info.MaxThreadsSM); occ > 0 {
			out["occupancy_pct"] = occ
		}
	}
	return out
}

// runProfiled uploads, runs every kernel between two CUDA events on the stream (waiting on
// the end event before the next launch, so each duration is the kernel's alone) and
// downloads, reporting all of it to sink. It runs on the owner thread.
func (e *execution) runProfiled(inputs map[string]*tensor.Tensor, sink profile.Sink) ([]*tensor.Tensor, error) {
	o, a := e.o, e.o.a
	var in int64
	for _, v := range e.p.Graph.Inputs {
		in += int64(len(inputs[v.Name].Data))
	}
	t0 := time.Now()
	if err := e.upload(inputs); err != nil {
		return nil, err
	}
	if err := o.sync("profiled upload"); err != nil {
		return nil, err
	}
	sink.Copy(profile.Copy{Dir: "h2d", Bytes: in, Start: t0, Dur: time.Since(t0)})
	var start, end uintptr
	if err := a.check(a.cuEventCreate(&start, 0), "%s: cuEventCreate", o.where()); err != nil {
		return nil, err
	}
	defer a.cuEventDestroy(start)
	if err := a.check(a.cuEventCreate(&end, 0), "%s: cuEventCreate", o.where()); err != nil {
		return nil, err
	}
	defer a.cuEventDestroy(end)
	for i, k := range e.p.Kernels {
		at := time.Now()
		if err := a.check(a.cuEventRecord(start, o.stream), "%s: cuEventRecord", o.where()); err != nil {
			return nil, err
		}
		if err := e.launchOne(i); err != nil {
			return nil, err
		}
		if err := a.check(a.cuEventRecord(end, o.stream), "%s: cuEventRecord", o.where()); err != nil {
			return nil, err
		}
		what := "kernel " + e.mods[i].Entry + " " + e.shapeOf(i).String()
		if err := a.check(a.cuEventSynchronize(end), "%s: %s: cuEventSynchronize", o.where(), what); err != nil {
			return nil, err
		}
		var ms float32
		if err := a.check(a.cuEventElapsedTime(&ms, start, end), "%s: cuEventElapsedTime", o.where()); err != nil {
			return nil, err
		}
		s := e.shapeOf(i)
		sink.Launch(profile.Launch{Kernel: k.Name, Index: i, Grid: s.Grid[:], Block: []int{s.Threads, 1, 1},
			Start: at, Dur: time.Duration(float64(ms) * 1e6), Stream: "stream", Attrs: e.kernelAttrs(i)})
	}
	t1 := time.Now()
	out, err := e.download()
	if err != nil {
		return nil, err
	}
	var n int64
	for _, t := range out {
		n += int64(len(t.Data))
	}
	sink.Copy(profile.Copy{Dir: "d2h", Bytes: n, Start: t1, Dur: time.Since(t1)})
	if len(out) != len(e.p.Outputs) {
		return nil, errs.New(errs.Internal, "cuda: profiled run returned %d outputs for %d", len(out), len(e.p.Outputs))
	}
	return out, nil
}
