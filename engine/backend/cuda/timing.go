package cuda

import (
	"fmt"

	"github.com/tessera-qa/tessera-qa/engine/compiler"
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
)

// TimeOptions control TimeWith.
type TimeOptions struct {
	// Kernel is the index of the kernel to time, or -1 for all kernels of the program.
	Kernel int
	// Reps is the number of timed repetitions (>= 1).
	Reps int
	// Warmup is the number of untimed whole-program runs first (0 means 1: the first run
	// loads modules and touches every buffer, which no rep should pay for).
	Warmup int
	// NoFlushL2 keeps the L2 cache warm between reps. By default a buffer of twice the L2
	// size is written before every rep, so each rep reads its inputs from HBM as a cold
	// call in a real model would.
	NoFlushL2 bool
}

// Clock says what measures Time's durations (autotune.Timer).
func (b *Backend) Clock() string { return "cuda events" }

// Time returns reps durations in milliseconds of kernel p.Kernels[kernel] (kernel -1: the
// whole program), measured with CUDA events, after one warm-up run, with L2 flushed before
// every rep. It implements autotune.Timer. Fresh inputs per rep are the caller's business:
// call Time once per input set.
func (b *Backend) Time(p *compiler.Program, kernel int, inputs map[string]*tensor.Tensor, reps int) ([]float64, error) {
	return b.TimeWith(p, inputs, TimeOptions{Kernel: kernel, Reps: reps})
}

// TimeWith is Time with every option. The warm-up runs the whole program, so every buffer
// holds what the program computes; a rep of one kernel then relaunches only that kernel on
// those buffers (the same work as in a full run: the kernel's inputs come from earlier
// kernels, which are not rerun).
func (b *Backend) TimeWith(p *compiler.Program, inputs map[string]*tensor.Tensor, opt TimeOptions) ([]float64, error) {
	mods, err := b.begin(p, inputs)
	if err != nil {
		return nil, err
	}
	if opt.Reps < 1 || opt.Kernel < -1 || opt.Kernel >= len(p.Kernels) || len(p.Kernels) == 0 {
		return nil, errs.New(errs.Input, "cuda: time kernel %d of %d for %d reps: bad request", opt.Kernel, len(p.Kernels), opt.Reps)
	}
	var times []float64
	err = b.o.do(func() error {
		e, err := b.o.prepare(p, mods)
		if err != nil {
			return err
		}
		defer e.release()
		if err := e.upload(inputs); err != nil {
			return err
		}
		for range max(opt.Warmup, 1) {
			if err := e.runAll(b.Sync); err != nil {
				return err
			}
		}
		times, err = e.time(opt)
		return err
	})
	return times, err
}

// time runs the timed reps. Owner thread only.
func (e *execution) time(opt TimeOptions) ([]float64, error) {
	o, a := e.o, e.o.a
	var flush uint64
	flushBytes := uint64(2 * max(o.info.L2Bytes, 1<<20))
	if !opt.NoFlushL2 {
		var err error
		if flush, err = o.mem.alloc(flushBytes); err != nil {
			return nil, errs.Wrap(errs.Internal, err, "%s: L2 flush buffer", o.where())
		}
		defer o.mem.release(flush)
	}
	var start, end uintptr
	if err := a.check(a.cuEventCreate(&start, 0), "%s: cuEventCreate", o.where()); err != nil {
		return nil, err
	}
	defer a.cuEventDestroy(start)
	if err := a.check(a.cuEventCreate(&end, 0), "%s: cuEventCreate", o.where()); err != nil {
		return nil, err
	}
	defer a.cuEventDestroy(end)

	first, last := opt.Kernel, opt.Kernel
	if opt.Kernel < 0 {
		first, last = 0, len(e.p.Kernels)-1
	}
	what := e.kernelList()
	if opt.Kernel >= 0 {
		what = fmt.Sprintf("kernel %s %s", e.mods[opt.Kernel].Entry, e.shapeOf(opt.Kernel))
	}
	times := make([]float64, 0, opt.Reps)
	for rep := range opt.Reps {
		if flush != 0 {
			// A legacy-stream memset: the owner's stream is a blocking one, so the kernels
			// below start after the flush has finished writing.
			if err := o.mem.m.memset(flush, byte(rep), flushBytes); err != nil {
				return nil, err
			}
		}
		if err := a.check(a.cuEventRecord(start, o.stream), "%s: cuEventRecord", o.where()); err != nil {
			return nil, err
		}
		for i := first; i <= last; i++ {
			if err := e.launchOne(i); err != nil {
				return nil, err
			}
		}
		if err := a.check(a.cuEventRecord(end, o.stream), "%s: cuEventRecord", o.where()); err != nil {
			return nil, err
		}
		if err := a.check(a.cuEventSynchronize(end), "%s: %s: cuEventSynchronize", o.where(), what); err != nil {
			return nil, err
		}
		var ms float32
		if err := a.check(a.cuEventElapsedTime(&ms, start, end), "%s: cuEventElapsedTime", o.where()); err != nil {
			return nil, err
		}
		times = append(times, float64(ms))
	}
	return times, nil
}
