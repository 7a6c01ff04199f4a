package autotune

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/compiler"
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
	"github.com/tessera-qa/tessera-qa/engine/version"
)

const (
	// DefaultReps is the number of timed runs per candidate (design.md §8: median of >= 20).
	DefaultReps = 20
	// DefaultTieBand: medians within 1% of the best count as equally fast, so that the noise
	// of two runs on identical hardware rarely flips the choice.
	DefaultTieBand = 0.01
)

// Tuner chooses configs for the kernels of a graph. Timer, Runner and Device are required.
type Tuner struct {
	Cache  *Cache // nil: tune every kernel, remember nothing
	Timer  Timer
	Runner Runner // runs candidates for the correctness check (the backend being tuned)
	Device Device
	// Reps is the number of timed runs per candidate; 0 means DefaultReps.
	Reps int
	// TieBand is the relative band above the best median within which configs tie; 0 means
	// DefaultTieBand, negative means exact ties only.
	TieBand float64
	// MaxCandidates > 0 keeps only the first MaxCandidates configs of each Space (the default
	// and its nearest neighbours).
	MaxCandidates int
	// Engine is the engine version entries are keyed by; "" means version.Version.
	Engine string
	// Check compares a candidate's outputs with the default schedule's; nil means CompareOutputs.
	Check func(got, want []*tensor.Tensor) error
}

// Report says what Tune did.
type Report struct {
	Graph               string         `json:"graph"`
	Device              Device         `json:"device"`
	Clock               string         `json:"clock"`
	Engine              string         `json:"engine"`
	Reps                int            `json:"reps"`
	DefaultScheduleHash string         `json:"default_schedule_hash"`
	ScheduleHash        string         `json:"schedule_hash"` // with the returned configs
	Kernels             []KernelReport `json:"kernels"`
}

// KernelReport is one kernel key: every kernel of the program with that key gets its config.
type KernelReport struct {
	Kernels    []string    `json:"kernels"`
	Key        string      `json:"key"`
	Kind       string      `json:"kind"`
	Default    Config      `json:"default"`
	Chosen     Config      `json:"chosen"`
	DefaultMs  float64     `json:"default_ms"` // on a cache hit: as measured when the entry was made
	BestMs     float64     `json:"best_ms"`
	Candidates int         `json:"candidates"` // size of the config space
	Measured   int         `json:"measured"`   // candidates timed now (0 on a cache hit)
	Rejected   []Rejection `json:"rejected,omitempty"`
	CacheHit   bool        `json:"cache_hit"`
	Skipped    string      `json:"skipped,omitempty"` // why the kernel was not tuned
	Note       string      `json:"note,omitempty"`
}

// Rejection is a candidate that did not compile, run, match or time.
type Rejection struct {
	Config Config `json:"config"`
	Reason string `json:"reason"`
}

func (t *Tuner) engine() string {
	if t.Engine != "" {
		return t.Engine
	}
	return version.Version
}

func (t *Tuner) check(got, want []*tensor.Tensor) error {
	if t.Check != nil {
		return t.Check(got, want)
	}
	return CompareOutputs(got, want)
}

// Tune compiles g with default schedules, runs it on inputs for the reference outputs, and
// tunes every kernel key that has a config space and no tile hint: from the cache when it
// holds a valid entry, else by measuring the space. It returns compiler.Options.Configs.
func (t *Tuner) Tune(g *graph.Graph, inputs map[string]*tensor.Tensor) (map[string]compiler.Schedule, Report, error) {
	switch {
	case g == nil:
		return nil, Report{}, errs.New(errs.Input, "autotune: nil graph")
	case t.Timer == nil || t.Runner == nil:
		return nil, Report{}, errs.New(errs.Input, "autotune: tuner of graph %s needs a timer and a runner", g.Name)
	case t.Reps < 0:
		return nil, Report{}, errs.New(errs.Input, "autotune: reps %d < 0", t.Reps)
	}
	if err := t.Device.Validate(); err != nil {
		return nil, Report{}, err
	}
	reps := t.Reps
	if reps == 0 {
		reps = DefaultReps
	}
	base, err := compiler.Compile(g, compiler.Options{})
	if err != nil {
		return nil, Report{}, err
	}
	want, err := t.Runner.Run(base, inputs)
	if err != nil {
		return nil, Report{}, errs.Wrap(errs.Input, err, "autotune: run %s with default schedules", g.Name)
	}
	rep := Report{Graph: g.Name, Device: t.Device, Clock: t.Timer.Clock(), Engine: t.engine(), Reps: reps,
		DefaultScheduleHash: base.ScheduleHash, ScheduleHash: base.ScheduleHash, Kernels: []KernelReport{}}
	configs := map[string]compiler.Schedule{}
	for _, idx := range kernelsByKey(base) {
		sc := base.Schedules[idx[0]]
		kr := KernelReport{Key: sc.Key, Kind: sc.Kind, Default: configOf(sc), Chosen: configOf(sc)}
		for _, i := range idx {
			kr.Kernels = append(kr.Kernels, base.Schedules[i].Kernel)
			if s := base.Schedules[i]; s.Source != "default" && kr.Skipped == "" {
				kr.Skipped = fmt.Sprintf("kernel %s has a %s schedule", s.Kernel, s.Source)
			}
		}
		if kr.Skipped == "" && !HasSpace(sc.Kind) {
			kr.Skipped = "no config space for kind " + sc.Kind
		}
		if kr.Skipped == "" {
			c, err := t.tuneKernel(g, base, idx[0], inputs, want, reps, &kr)
			if err != nil {
				return nil, rep, err
			}
			configs[sc.Key] = c.Schedule(sc.Key, sc.Kind)
		}
		rep.Kernels = append(rep.Kernels, kr)
	}
	if len(configs) > 0 {
		// Each config passed against the default outputs alone; together they must too.
		p, err := compiler.Compile(g, compiler.Options{Configs: configs})
		if err != nil {
			return nil, rep, errs.Wrap(errs.Internal, err, "autotune: compile %s with the tuned configs", g.Name)
		}
		got, err := t.Runner.Run(p, inputs)
		if err == nil {
			err = t.check(got, want)
		}
		if err != nil {
			return nil, rep, errs.Wrap(errs.Internal, err, "autotune: %s with all tuned configs differs from the default schedules", g.Name)
		}
		rep.ScheduleHash = p.ScheduleHash
	}
	return configs, rep, nil
}

// kernelsByKey groups kernel indices by schedule key, in order of first appearance.
func kernelsByKey(p *compiler.Program) [][]int {
	var keys []string
	byKey := map[string][]int{}
	for i, s := range p.Schedules {
		if _, ok := byKey[s.Key]; !ok {
			keys = append(keys, s.Key)
		}
		byKey[s.Key] = append(byKey[s.Key], i)
	}
	out := make([][]int, len(keys))
	for i, k := range keys {
		out[i] = byKey[k]
	}
	return out
}

// measured is a candidate that passed the correctness check, with its median time.
type measured struct {
	c  Config
	ms float64
}

func (t *Tuner) tuneKernel(g *graph.Graph, base *compiler.Program, i int, inputs map[string]*tensor.Tensor, want []*tensor.Tensor, reps int, kr *KernelReport) (Config, error) {
	sc := base.Schedules[i]
	pr, err := problemOf(base, i)
	if err != nil {
		return Config{}, err
	}
	space, err := Space(base, i, t.Device)
	if err != nil {
		return Config{}, err
	}
	kr.Candidates = len(space)
	if t.MaxCandidates > 0 && len(space) > t.MaxCandidates {
		space = space[:t.MaxCandidates]
	}
	if t.Cache != nil {
		e, ok, err := t.Cache.Lookup(t.Device, t.engine(), sc.Key)
		if err != nil {
			return Config{}, err
		}
		if ok {
			reason := pr.check(e.Config, t.Device)
			if e.Config == kr.Default {
				reason = ""
			}
			if reason == "" {
				if _, err := t.candidate(g, base, i, e.Config, inputs, want); err != nil {
					reason = err.Error()
				}
			}
			if reason == "" {
				kr.CacheHit, kr.Chosen, kr.DefaultMs, kr.BestMs = true, e.Config, e.DefaultMs, e.BestMs
				return e.Config, nil
			}
			kr.Note = fmt.Sprintf("cached config %s rejected (%s); retuned", e.Config, reason)
			t.Cache.warnf("autotune cache %s: entry for %s: %s", t.Cache.Path(t.Device), sc.Key, kr.Note)
		}
	}
	if len(space) == 1 {
		// Nothing to choose between: timing the default would only cost time.
		kr.Note = "the default is the only valid config"
		return t.remember(sc, kr.Default, 0, 0, 0)
	}
	var ok []measured
	for j, c := range space {
		p := base
		if j > 0 {
			if p, err = t.candidate(g, base, i, c, inputs, want); err != nil {
				kr.Rejected = append(kr.Rejected, Rejection{Config: c, Reason: err.Error()})
				continue
			}
		}
		times, err := t.Timer.Time(p, i, inputs, reps)
		var ms float64
		if err == nil {
			ms, err = median(times, reps)
		}
		if err != nil {
			if j == 0 {
				return Config{}, errs.Wrap(errs.Internal, err, "autotune: time %s (%s) with its default schedule %s", sc.Kernel, sc.Key, c)
			}
			kr.Rejected = append(kr.Rejected, Rejection{Config: c, Reason: "timing: " + err.Error()})
			continue
		}
		kr.Measured++
		ok = append(ok, measured{c, ms})
	}
	best := choose(ok, kr.Default, t.tieBand())
	kr.Chosen, kr.DefaultMs, kr.BestMs = best.c, ok[0].ms, best.ms
	return t.remember(sc, best.c, ok[0].ms, best.ms, kr.Measured)
}

// remember stores a choice in the cache, when there is one, and returns it.
func (t *Tuner) remember(sc compiler.Schedule, c Config, defaultMs, bestMs float64, measured int) (Config, error) {
	if t.Cache == nil {
		return c, nil
	}
	e := Entry{Key: sc.Key, Engine: t.engine(), Kind: sc.Kind, Config: c, DefaultMs: defaultMs, BestMs: bestMs,
		Measured: measured, Clock: t.Timer.Clock(), Device: t.Device.Name, Commit: version.Commit(),
		Created: time.Now().UTC().Format(time.RFC3339)}
	if err := t.Cache.Store(t.Device, e); err != nil {
		return Config{}, err
	}
	return c, nil
}

// candidate compiles g with config c for kernel i's key, runs it and checks its outputs
// against want: a fast but wrong config never reaches the timer.
func (t *Tuner) candidate(g *graph.Graph, base *compiler.Program, i int, c Config, inputs map[string]*tensor.Tensor, want []*tensor.Tensor) (*compiler.Program, error) {
	sc := base.Schedules[i]
	p, err := compiler.Compile(g, compiler.Options{Configs: map[string]compiler.Schedule{sc.Key: c.Schedule(sc.Key, sc.Kind)}})
	if err != nil {
		return nil, errs.Wrap(errs.Internal, err, "compile")
	}
	if len(p.Schedules) != len(base.Schedules) || p.Schedules[i].Key != sc.Key || configOf(p.Schedules[i]) != c {
		return nil, errs.New(errs.Internal, "compiled program does not carry config %s for kernel %s", c, sc.Kernel)
	}
	got, err := t.Runner.Run(p, inputs)
	if err != nil {
		return nil, errs.Wrap(errs.Internal, err, "run")
	}
	if err := t.check(got, want); err != nil {
		return nil, errs.Wrap(errs.Internal, err, "outputs differ from the default schedule's")
	}
	return p, nil
}

func (t *Tuner) tieBand() float64 {
	switch {
	case t.TieBand == 0:
		return DefaultTieBand
	case t.TieBand < 0:
		return 0
	}
	return t.TieBand
}

// choose picks among measured candidates (ms[0] is the default): of those within band of
// the fastest median, the default if it is one of them, else the smallest config. Only the
// timings decide, so identical timings give identical choices.
func choose(ms []measured, def Config, band float64) measured {
	best := slices.MinFunc(ms, func(a, b measured) int { return cmp.Compare(a.ms, b.ms) }).ms
	limit := best * (1 + band)
	var pick *measured
	for k := range ms {
		r := &ms[k]
		if r.ms > limit {
			continue
		}
		if r.c == def {
			return *r
		}
		if pick == nil || r.c.compare(pick.c) < 0 {
			pick = r
		}
	}
	return *pick
}
