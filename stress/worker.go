package stress

import (
	"context"
	"sync"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/backend"
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/failpoint"
	"github.com/tessera-qa/tessera-qa/harness"
)

// Event is one line of a job's history: a graph run, or a monitor sample. Worker processes
// write them as JSON lines on stdout; goroutine jobs hand them to a function.
type Event struct {
	Kind  string  `json:"kind"` // "graph", "sample", KindOOM or KindCache
	Job   int     `json:"job"`
	Graph int     `json:"graph,omitempty"`
	MS    float64 `json:"ms,omitempty"`
	// Verdict is the harness verdict of a graph run; Code its error code (E_NONDETERMINISTIC
	// for a digest that differs from the alone run); Replay the manifest written for it.
	Verdict string  `json:"verdict,omitempty"`
	Code    string  `json:"code,omitempty"`
	Reason  string  `json:"reason,omitempty"`
	Replay  string  `json:"replay,omitempty"`
	Sample  *Sample `json:"sample,omitempty"`
	// OOM is a memory hog's round (KindOOM), Cache one operation on a hammered cache
	// (KindCache): pressure.go and hammer.go.
	OOM   *OOMRound `json:"oom,omitempty"`
	Cache *CacheOp  `json:"cache,omitempty"`
}

// Plant names a deliberate fault of the worker, to prove the monitors catch it.
const (
	PlantNone = ""
	// PlantLeak keeps 256 KiB (touched, so resident) per graph run for the life of the job,
	// at most plantRate and up to plantCap: the buffer-per-job leak the RSS monitor must catch.
	PlantLeak = "leak-per-graph"
)

// JobOptions is one job's loop.
type JobOptions struct {
	Plan     *Plan
	Job      int
	Backend  backend.Backend
	Until    time.Time // stop starting graphs at this time
	Replays  string    // where manifests of failing graphs go
	Sampler  *Sampler  // nil: this job does not sample (goroutines mode samples the process)
	Interval time.Duration
	Plant    string
	WarmAll  bool // run every pool of the plan first, judged (warmAll, hammer.go)
	Emit     func(Event)
	// ProfileDir, when set, receives the job's profile record (profile.go): the kernels of
	// its first ProfiledRuns graph runs.
	ProfileDir string
}

// leaked holds PlantLeak's buffers; plantCap bounds them so that a planted run cannot take
// the machine's memory, and plantRate spreads them over the soak: a CPU job runs thousands of
// graphs a second and would reach the cap in its first window, a step the leak rule rightly
// does not call a leak (Judge). A real leak per graph grows as long as the load lasts.
var (
	leakMu    sync.Mutex
	leaked    [][]byte
	leakStart time.Time
)

const (
	plantCap  = 192 << 20
	plantRate = 48 << 20 // bytes per second: the cap after 4 s
)

// RunJob runs job's pool round robin until opt.Until or ctx ends, each graph checked against
// its alone digest. With a Sampler it first warms up (one pass over the pool, not judged
// for latency), samples "before", samples every Interval while running, and "after" at the end.
func RunJob(ctx context.Context, opt JobOptions) error {
	if opt.Job < 0 || opt.Job >= len(opt.Plan.Jobs) {
		return errs.New(errs.Input, "stress: job %d not in plan (%d jobs)", opt.Job, len(opt.Plan.Jobs))
	}
	pool := opt.Plan.Jobs[opt.Job]
	rn := harness.Runner{Backend: opt.Backend, ArtifactsDir: opt.Replays}
	prof := newJobProfile(opt)
	defer prof.write()
	// run runs pool entry k once and judges it.
	var run func(k int) Event
	if opt.Plan.Workload == WorkloadTrain {
		run = func(k int) Event { return trainEvent(ctx, opt.Backend, opt.Job, k, pool[k]) }
	} else {
		cases := make([]harness.Case, len(pool))
		for i, g := range pool {
			c, _, err := BuildCase(g.Seed, caseName(opt.Job, i), failpoint.Pick(failpoint.JudgeStressToleranceForBits, g.Digest, ""))
			if err != nil {
				return err
			}
			cases[i] = c
		}
		run = func(k int) Event {
			rn := rn
			rn.Profile = prof.sink()
			start := time.Now()
			r := rn.Run(cases[k])
			prof.ran(start)
			return Event{Kind: "graph", Job: opt.Job, Graph: k, MS: r.Timing.TotalMS, Verdict: r.Verdict,
				Code: r.ErrorCode, Reason: r.Reason, Replay: r.Replay}
		}
	}
	t0 := time.Now()
	if opt.WarmAll {
		if err := warmAll(opt, rn); err != nil {
			return err
		}
	}
	if opt.Sampler != nil {
		for k := range pool {
			run(k)
		}
		s := opt.Sampler.Read(since(t0), "before")
		opt.Emit(Event{Kind: "sample", Job: opt.Job, Sample: &s})
	}
	next := time.Now().Add(opt.Interval)
	for i := 0; time.Now().Before(opt.Until) && ctx.Err() == nil; i++ {
		e := run(i % len(pool))
		if opt.Plant == PlantLeak {
			plantLeak()
		}
		opt.Emit(e)
		if opt.Sampler != nil && time.Now().After(next) {
			s := opt.Sampler.Read(since(t0), "during")
			opt.Emit(Event{Kind: "sample", Job: opt.Job, Sample: &s})
			next = time.Now().Add(opt.Interval)
		}
	}
	if opt.Sampler != nil {
		s := opt.Sampler.Read(since(t0), "after")
		opt.Emit(Event{Kind: "sample", Job: opt.Job, Sample: &s})
	}
	return nil
}

func plantLeak() {
	leakMu.Lock()
	defer leakMu.Unlock()
	if leakStart.IsZero() {
		leakStart = time.Now()
	}
	have := float64(len(leaked) * (256 << 10))
	if have >= plantCap || have > time.Since(leakStart).Seconds()*plantRate {
		return
	}
	b := make([]byte, 256<<10)
	for p := 0; p < len(b); p += 4096 {
		b[p] = 1
	}
	leaked = append(leaked, b)
}
