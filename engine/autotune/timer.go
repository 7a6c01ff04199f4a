package autotune

import (
	"math"
	"slices"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/compiler"
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
)

// Timer measures a compiled program. The GPU implementation is the CUDA backend's (CUDA
// events around the kernel's launches, warm-up and L2 flush included); the CPU one is
// WallTimer; tests use fakes.
type Timer interface {
	// Clock says what measures, for reports: "cuda events", "cpu wall-clock timer".
	Clock() string
	// Time runs p on inputs and returns reps durations in milliseconds of kernel
	// p.Kernels[kernel]. A timer that cannot isolate one kernel may time the whole program:
	// the candidates of one kernel differ only in that kernel's schedule, so the ranking holds.
	Time(p *compiler.Program, kernel int, inputs map[string]*tensor.Tensor, reps int) ([]float64, error)
}

// Runner executes a program; every backend.Backend is one.
type Runner interface {
	Run(p *compiler.Program, inputs map[string]*tensor.Tensor) ([]*tensor.Tensor, error)
}

// WallTimer times whole-program runs of a Runner with the Go monotonic clock, after Warmup
// untimed runs. It is what the CPU backend offers; its numbers include every kernel of the
// program and the backend's input checks.
type WallTimer struct {
	Name   string // the runner's name, for Clock: "cpu"
	Runner Runner
	Warmup int
}

// Clock is "NAME wall-clock timer".
func (w WallTimer) Clock() string { return w.Name + " wall-clock timer" }

// Time ignores kernel: it can only time the whole program.
func (w WallTimer) Time(p *compiler.Program, _ int, inputs map[string]*tensor.Tensor, reps int) ([]float64, error) {
	if w.Runner == nil {
		return nil, errs.New(errs.Input, "%s: no runner", w.Clock())
	}
	for range w.Warmup {
		if _, err := w.Runner.Run(p, inputs); err != nil {
			return nil, err
		}
	}
	out := make([]float64, 0, reps)
	for range reps {
		t0 := time.Now()
		if _, err := w.Runner.Run(p, inputs); err != nil {
			return nil, err
		}
		out = append(out, float64(time.Since(t0).Nanoseconds())/1e6)
	}
	return out, nil
}

// median of times that a Timer returned; it rejects what no clock can produce, so that a
// broken timer cannot make a config look infinitely fast.
func median(times []float64, reps int) (float64, error) {
	if len(times) != reps {
		return 0, errs.New(errs.Internal, "timer returned %d times for %d reps", len(times), reps)
	}
	for i, t := range times {
		if math.IsNaN(t) || math.IsInf(t, 0) || t < 0 {
			return 0, errs.New(errs.Internal, "timer returned time %g ms at rep %d", t, i)
		}
	}
	s := slices.Clone(times)
	slices.Sort(s)
	if n := len(s); n%2 == 0 {
		return (s[n/2-1] + s[n/2]) / 2, nil
	}
	return s[len(s)/2], nil
}
