package stress

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"runtime/debug"
	"strconv"
	"sync"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/backend"
	cpubackend "github.com/tessera-qa/tessera-qa/engine/backend/cpu"
	"github.com/tessera-qa/tessera-qa/engine/backend/cuda"
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/harness"
)

// Pressure modes run beside the jobs (Options.Pressure).
//
// PressureOOM adds a memory hog: one more job (its own graph pool in the plan) that, round
// after round, takes the backend's memory through the engine until the engine refuses with
// E_OOM (backend.TakeUntilOOM: device memory through cuda.Raw after trimming the backend's
// cache; on the CPU, the CPU backend's budget through cpubackend.Alloc), runs one of its graphs while
// holding it, lets go, and runs the graph again. A round passes when the taking ended in a
// coded E_OOM, the graph under pressure passed or was refused with E_OOM (never a panic or
// another code), and the graph after the release gave its alone digest: that is one OOM
// recovery. The jobs keep running their graphs meanwhile: a job's graph refused with E_OOM
// while the hog holds the memory is counted (neighbour OOMs), not failed, but the job must
// pass a graph after its last E_OOM (it recovered), and a wrong digest is a mismatch as
// always. On the CPU the hog and the jobs share the budget only in goroutines mode (one
// process); in processes mode each process has its own budget and the neighbours feel
// nothing, which the report says. On a GPU every process shares the device's memory.
//
// PressureCache (hammer.go) runs N processes hammering one autotune cache.
const (
	PressureOOM   = "oom"
	PressureCache = "cache"
)

// Roles of worker processes beside the graph jobs (WorkerArgs.Role).
const (
	RoleHog    = "hog"
	RoleHammer = "hammer"
)

// Event kinds of the pressure modes.
const (
	KindOOM   = "oom"
	KindCache = "cache"
)

// DefaultCPUBudget is the CPU backend's budget under PressureOOM: far above what a job's
// graphs need at once (tens of KiB), small enough that the hog's hold and release stay inside
// the RSS monitor's allowance.
const DefaultCPUBudget = 32 << 20

// The hog's rhythm: it holds the memory for hogHold, then leaves it free for hogGap (longer
// than a monitor interval, so every window of samples has readings with the memory free and
// a hold cannot pass for a leak), and starts no round within hogTail of the soak's end, so
// the jobs run graphs after the last release.
const (
	hogHold  = 150 * time.Millisecond
	hogGap   = 350 * time.Millisecond
	hogTail  = 500 * time.Millisecond
	hogFloor = 4 << 10
)

// OOMRound is one round of the hog.
type OOMRound struct {
	Round   int    `json:"round"`
	Graph   int    `json:"graph"`
	Held    int64  `json:"held_bytes"`
	Blocks  int    `json:"blocks"`
	Refusal string `json:"refusal"` // the error that ended the taking (E_OOM ...)
	// Under and After are the hog's graph while holding and after the release: "pass" or the
	// error code of its result; their reasons when not "pass".
	Under       string `json:"under"`
	UnderReason string `json:"under_reason,omitempty"`
	After       string `json:"after"`
	AfterReason string `json:"after_reason,omitempty"`
	Release     string `json:"release,omitempty"` // an error freeing the memory
}

// OOMReport is the OOM pressure part of a Report.
type OOMReport struct {
	Rounds        int    `json:"rounds"`
	Recoveries    int    `json:"recoveries"` // rounds refused with E_OOM whose graph then gave its alone digest
	UnderOOM      int    `json:"under_oom"`  // hog graphs refused with E_OOM while it held the memory
	NeighbourOOMs int    `json:"neighbour_ooms"`
	HeldMaxBytes  int64  `json:"held_max_bytes"`
	CPUBudget     int64  `json:"cpu_budget_bytes,omitempty"`
	Note          string `json:"note,omitempty"`
}

// pressureLog is what the pressure modes reported, kept by the collector (under its lock).
type pressureLog struct {
	mode    string
	rounds  []OOMRound
	ooms    int
	pending map[int]bool // job -> an E_OOM not yet followed by a passing graph
	ops     []CacheOp
	cache   *cacheRun // the runner's side of PressureCache
	note    string
}

// graph sees every graph event; it returns true for a neighbour's E_OOM under PressureOOM,
// which is allowed.
func (p *pressureLog) graph(e Event) bool {
	if p.mode != PressureOOM {
		return false
	}
	if e.Verdict == harness.VerdictPass {
		delete(p.pending, e.Job)
		return false
	}
	if e.Code == string(errs.OOM) {
		p.ooms++
		p.pending[e.Job] = true
		return true
	}
	return false
}

func (p *pressureLog) add(source string, e Event) {
	if e.OOM != nil {
		p.rounds = append(p.rounds, *e.OOM)
	}
	if e.Cache != nil {
		op := *e.Cache
		p.ops = append(p.ops, op)
	}
}

// checkPressure refuses options a pressure mode cannot run with.
func checkPressure(o Options) error {
	switch o.Pressure {
	case "", PressureOOM:
		return nil
	case PressureCache:
		if o.Mode != ModeProcesses {
			return errs.New(errs.Input, "stress: --pressure cache needs --mode processes (the cache's lock is between processes), not %s", o.Mode)
		}
		return nil
	}
	return errs.New(errs.Input, "stress: pressure %q (want %s or %s)", o.Pressure, PressureOOM, PressureCache)
}

// hogPools is how many graph pools the plan needs beyond the jobs': one for the hog.
func hogPools(o Options) int {
	if o.Pressure == PressureOOM {
		return 1
	}
	return 0
}

// startPressure starts what o.Pressure runs beside the jobs and returns the options the jobs
// run with (their processes' environment) and a stop that waits for it.
func startPressure(ctx context.Context, o Options, planPath string, plan *Plan, c *collector, until time.Time, replays, tmp string) (Options, func()) {
	c.mu.Lock()
	c.press.mode, c.press.pending = o.Pressure, map[int]bool{}
	c.mu.Unlock()
	switch o.Pressure {
	case PressureOOM:
		return startHog(ctx, o, planPath, plan, c, until, replays, tmp)
	case PressureCache:
		return startHammers(ctx, o, c, until, tmp)
	}
	return o, func() {}
}

func startHog(ctx context.Context, o Options, planPath string, plan *Plan, c *collector, until time.Time, replays, tmp string) (Options, func()) {
	budget := or(o.CPUBudget, DefaultCPUBudget)
	onCPU := o.Backend.Name() == "cpu"
	hog := o.Jobs // the extra pool of the plan
	ctx, cancel := context.WithDeadline(ctx, until.Add(workerGrace))
	var restore func()
	note := "cuda: the hog takes the device's memory, which every job shares"
	switch {
	case onCPU && o.Mode == ModeGoroutines:
		prev := cpubackend.SetMemLimit(budget)
		restore = func() { cpubackend.SetMemLimit(prev) }
		note = fmt.Sprintf("cpu: the hog and the jobs share this process's %d MiB budget", budget>>20)
	case onCPU:
		note = fmt.Sprintf("cpu: each process has its own %d MiB budget, so only the hog is pressed; the jobs show that a neighbour's E_OOM leaves them alone", budget>>20)
	}
	c.mu.Lock()
	c.press.note = note
	c.mu.Unlock()
	if onCPU && o.Mode == ModeProcesses {
		inner := o.Command
		o.Command = func(ctx context.Context, a string) *exec.Cmd {
			cmd := inner(ctx, a)
			if cmd.Env == nil {
				cmd.Env = os.Environ()
			}
			cmd.Env = append(cmd.Env, cpubackend.EnvMemLimit+"="+strconv.FormatInt(budget, 10))
			return cmd
		}
	}
	var wg sync.WaitGroup
	done := make(chan struct{})
	if o.Mode == ModeProcesses {
		startWorker(ctx, o, WorkerArgs{Plan: planPath, Job: hog, Role: RoleHog, Until: until, Replays: replays, TempDir: tmp, Interval: o.Interval},
			"hog", c, &wg)
	} else {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := RunHog(ctx, JobOptions{Plan: plan, Job: hog, Backend: o.Backend, Until: until, Replays: replays,
				Emit: func(e Event) { c.add("hog", e) }}); err != nil {
				c.mu.Lock()
				c.rep.Failures = append(c.rep.Failures, "hog: "+err.Error())
				c.mu.Unlock()
			}
		}()
	}
	go func() { wg.Wait(); close(done) }()
	return o, func() {
		// A hog graph that never returns must not hang the run (as runGoroutines does for jobs).
		select {
		case <-done:
		case <-time.After(time.Until(until.Add(workerGrace))):
			c.mu.Lock()
			c.rep.Failures = append(c.rep.Failures, fmt.Sprintf("%s: hog still running %s after the soak ended", errs.Timeout, workerGrace))
			c.mu.Unlock()
		}
		cancel()
		if restore != nil {
			restore()
		}
	}
}

// judgePressure adds the pressure modes' verdicts to the report; the caller holds c.mu.
func judgePressure(o Options, c *collector) {
	rep := c.rep
	rep.Pressure = o.Pressure
	switch o.Pressure {
	case PressureOOM:
		r := &OOMReport{Rounds: len(c.press.rounds), NeighbourOOMs: c.press.ooms, Note: c.press.note}
		if o.Backend.Name() == "cpu" {
			r.CPUBudget = or(o.CPUBudget, DefaultCPUBudget)
		}
		for _, rd := range c.press.rounds {
			r.HeldMaxBytes = max(r.HeldMaxBytes, rd.Held)
			for _, v := range []string{rd.Under, rd.After} {
				if v == string(errs.Nondeterministic) {
					rep.Mismatches++
				}
			}
			if rd.Under == string(errs.OOM) {
				r.UnderOOM++
			}
			switch {
			case rd.Refusal != string(errs.OOM):
				c.fail(fmt.Sprintf("hog round %d: the taking ended with %q, not a coded E_OOM", rd.Round, rd.Refusal), "")
			case rd.Under != "pass" && rd.Under != string(errs.OOM):
				c.fail(fmt.Sprintf("hog round %d: graph %d under pressure gave %s, want a pass or E_OOM: %s", rd.Round, rd.Graph, rd.Under, rd.UnderReason), "")
			case rd.After != "pass":
				c.fail(fmt.Sprintf("hog round %d: graph %d after the release gave %s (no recovery): %s", rd.Round, rd.Graph, rd.After, rd.AfterReason), "")
			case rd.Release != "":
				c.fail(fmt.Sprintf("hog round %d: releasing the memory: %s", rd.Round, rd.Release), "")
			default:
				r.Recoveries++
			}
		}
		if r.Rounds == 0 {
			c.fail("hog: no round ran (the soak must last well over a second)", "")
		}
		for j := range o.Jobs {
			if c.press.pending[j] {
				c.fail(fmt.Sprintf("job %d: no passing graph after its last E_OOM (it did not recover)", j), "")
			}
		}
		rep.OOM = r
	case PressureCache:
		rep.Cache = judgeCacheRun(c)
	}
}

// hogMemory is the memory the hog takes, through the engine.
type hogMemory interface {
	alloc(n int64) (free func() error, err error)
	trim() error  // gives back what the backend caches, so that its next run must allocate
	settle()      // after a release
	first() int64 // the first block's size
}

func memoryOf(b backend.Backend) (hogMemory, error) {
	switch bb := b.(type) {
	case *cuda.Backend:
		raw, err := cuda.OpenRaw(-1) // the registered backend's device
		if err != nil {
			return nil, err
		}
		return cudaMemory{bb, raw}, nil
	case *cpubackend.Backend:
		if cpubackend.MemLimit() == 0 {
			return nil, errs.New(errs.Input, "stress hog: the cpu backend has no memory budget to fill (set %s or cpubackend.SetMemLimit)", cpubackend.EnvMemLimit)
		}
		return cpuMemory{}, nil
	}
	return nil, errs.New(errs.Unsupported, "stress hog: no memory to take on the %s backend", b.Name())
}

type cpuMemory struct{}

func (cpuMemory) alloc(n int64) (func() error, error) {
	b, err := cpubackend.Alloc(int(n))
	if err != nil {
		return nil, err
	}
	return func() error { b.Free(); return nil }, nil
}
func (cpuMemory) trim() error { return nil }

// settle returns the freed heap to the OS, so that the RSS monitor sees the release.
func (cpuMemory) settle()      { debug.FreeOSMemory() }
func (cpuMemory) first() int64 { return max(cpubackend.MemLimit()/4, hogFloor) }

type cudaMemory struct {
	b   *cuda.Backend
	raw *cuda.Raw
}

func (m cudaMemory) alloc(n int64) (func() error, error) {
	p, err := m.raw.Alloc(int(n))
	if err != nil {
		return nil, err
	}
	return func() error { return m.raw.Free(p) }, nil
}
func (m cudaMemory) trim() error { return m.b.Trim() }
func (cudaMemory) settle()       {}
func (cudaMemory) first() int64  { return 1 << 30 }

// RunHog is the memory hog's loop (see PressureOOM): rounds until opt.Until less the tail,
// each emitted as a KindOOM event; with a Sampler it samples like RunJob.
func RunHog(ctx context.Context, opt JobOptions) error {
	if opt.Job < 0 || opt.Job >= len(opt.Plan.Jobs) {
		return errs.New(errs.Input, "stress hog: job %d not in plan (%d pools)", opt.Job, len(opt.Plan.Jobs))
	}
	mem, err := memoryOf(opt.Backend)
	if err != nil {
		return err
	}
	pool := opt.Plan.Jobs[opt.Job]
	cases := make([]harness.Case, len(pool))
	for i, g := range pool {
		if cases[i], _, err = BuildCase(g.Seed, caseName(opt.Job, i), g.Digest); err != nil {
			return err
		}
	}
	rn := harness.Runner{Backend: opt.Backend, ArtifactsDir: opt.Replays}
	t0 := time.Now()
	sample := func(phase string) {
		if opt.Sampler != nil {
			s := opt.Sampler.Read(since(t0), phase)
			opt.Emit(Event{Kind: "sample", Job: opt.Job, Sample: &s})
		}
	}
	// wait passes d, sampling every Interval: held and free memory both show in the series.
	wait := func(d time.Duration) {
		end := time.Now().Add(d)
		for time.Now().Before(end) && ctx.Err() == nil {
			step := time.Until(end)
			if opt.Sampler != nil && opt.Interval > 0 {
				step = min(step, opt.Interval)
			}
			time.Sleep(step)
			if opt.Sampler != nil && time.Now().Before(end) {
				sample("during")
			}
		}
	}
	for _, c := range cases { // warm-up: kernels compiled and loaded before the first hold
		rn.Run(c)
	}
	sample("before")
	for round := 0; ctx.Err() == nil && time.Until(opt.Until) > hogHold+hogGap+hogTail; round++ {
		k := round % len(cases)
		rd := OOMRound{Round: round, Graph: k}
		if err := mem.trim(); err != nil {
			rd.Refusal = "trim: " + err.Error()
		}
		held := time.Now()
		h, err := backend.TakeUntilOOM(ctx, mem.alloc, mem.first(), hogFloor)
		rd.Held, rd.Blocks = h.Bytes, h.Blocks
		switch {
		case rd.Refusal != "":
		case err != nil:
			rd.Refusal = err.Error()
		default:
			rd.Refusal = string(errs.CodeOf(h.Refusal))
		}
		rd.Under, rd.UnderReason = outcome(rn.Run(cases[k]))
		sample("during")
		wait(time.Until(held.Add(hogHold)))
		if err := h.Release(); err != nil {
			rd.Release = err.Error()
		}
		mem.settle()
		rd.After, rd.AfterReason = outcome(rn.Run(cases[k]))
		opt.Emit(Event{Kind: KindOOM, Job: opt.Job, Graph: k, OOM: &rd})
		sample("during")
		wait(hogGap)
	}
	sample("after")
	return nil
}

// outcome is "pass" or the result's error code (its verdict when it has none), and its reason.
func outcome(r harness.Result) (string, string) {
	switch {
	case r.Verdict == harness.VerdictPass:
		return "pass", ""
	case r.ErrorCode != "":
		return r.ErrorCode, r.Reason
	}
	return r.Verdict, r.Reason
}
