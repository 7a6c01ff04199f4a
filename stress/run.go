package stress

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/backend"
	"github.com/tessera-qa/tessera-qa/engine/backend/cuda"
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/harness"
)

// Modes.
const (
	ModeGoroutines = "goroutines"
	ModeProcesses  = "processes"
	// ModeStreams runs each job as a goroutine on a CUDA lane of its own: its own stream,
	// thread, allocator and modules on the one device, so the jobs' kernels overlap on the GPU
	// (cuda.Placement.Lane). It needs the CUDA backend.
	ModeStreams = "streams"
)

// Options is one stress run.
type Options struct {
	Mode     string
	Jobs     int
	Backend  backend.Backend
	Duration time.Duration // of the loaded phase
	Seed     uint64
	PerJob   int           // graphs in each job's pool (default 6)
	Reps     int           // alone runs per graph (default 5)
	Interval time.Duration // between monitor samples (default 250ms)
	OutDir   string        // plan.json, history.jsonl, replays/, tmp/ (required)
	// Command starts a worker process for ModeProcesses: the tessera-qa binary (or a test
	// binary) running Worker with the given JSON WorkerArgs.
	Command  func(ctx context.Context, workerArgs string) *exec.Cmd
	Progress io.Writer // live progress lines (nil: none)
	Every    time.Duration
	Plant    string // a deliberate fault in every job (PlantLeak)
	// Workload is what the jobs run: WorkloadGraphs (default) or WorkloadTrain.
	Workload string
	// Pressure adds a pressure mode beside the jobs (pressure.go): PressureOOM, a memory hog;
	// PressureCache, processes hammering one autotune cache. "" for none.
	Pressure string
	// CPUBudget is the CPU backend's memory budget under PressureOOM (default 32 MiB).
	CPUBudget int64
	// NoCorrupt skips PressureCache's corruption of the cache file halfway through.
	NoCorrupt bool
	// Devices, above 1 under ModeProcesses on a GPU backend, spreads the jobs over that many
	// GPUs: job j runs on GPU j mod Devices (TESSERA_CUDA_DEVICE). Its results must still equal
	// the alone runs' (same device class), which is the check that the GPUs agree.
	Devices int
	// Observe, when set, receives a Snapshot every Every while the loaded phase runs (what
	// --metrics-addr serves).
	Observe func(Snapshot)
	// Profile records every job's first graph runs (profile.go) into OutDir/profile and
	// merges them into one trace (Report.Trace). The bits do not change.
	Profile bool
}

// profileDirOf is where o's jobs write their profile records ("" when not profiled).
func profileDirOf(o Options) string {
	if !o.Profile {
		return ""
	}
	return filepath.Join(o.OutDir, "profile")
}

// Snapshot is a run's state so far: totals and, per source and monitor, the latest reading
// and the leak judge's slope over the samples so far.
type Snapshot struct {
	Elapsed                    time.Duration
	Graphs, Mismatches, Errors int
	Monitors                   []Leak // Before/After/Slope over the samples so far
}

func (c *collector) snapshot(el time.Duration) Snapshot {
	sn := Snapshot{Elapsed: el, Graphs: c.rep.Graphs, Mismatches: c.rep.Mismatches, Errors: c.rep.Errors}
	sources := make([]string, 0, len(c.samples))
	for src := range c.samples {
		sources = append(sources, src)
	}
	sort.Strings(sources)
	for _, src := range sources {
		sn.Monitors = append(sn.Monitors, JudgeAll(src, c.samples[src])...)
	}
	return sn
}

// deviceEnv is the environment entry that places job's worker process on its GPU under
// Options.Devices ("" when the job takes the backend's own device).
func deviceEnv(o Options, job int) string {
	if o.Devices <= 1 || o.Mode != ModeProcesses {
		return ""
	}
	return "TESSERA_CUDA_DEVICE=" + strconv.Itoa(job%o.Devices)
}

// ReportSchema and ReportKind mark a Report's JSON, so the reporter (report/parse)
// can tell a stress report from its other formats.
const (
	ReportSchema = 1
	ReportKind   = "tessera-stress"
)

// Report is the verdict of a run (the CLI's table and its JSON).
type Report struct {
	Schema       int          `json:"schema"`
	Kind         string       `json:"kind"`
	Mode         string       `json:"mode"`
	Workload     string       `json:"workload,omitempty"` // WorkloadTrain; empty for graphs
	Device       string       `json:"device"`
	Devices      int          `json:"devices,omitempty"` // GPUs the jobs were spread over (Options.Devices)
	Jobs         int          `json:"jobs"`
	Seed         uint64       `json:"seed,string"`
	DurationS    float64      `json:"duration_s"`
	Graphs       int          `json:"graphs"`
	GraphsPerSec float64      `json:"graphs_per_s"`
	Mismatches   int          `json:"mismatches"`
	Errors       int          `json:"errors"`
	LeakCount    int          `json:"leaks"`
	Monitors     []Leak       `json:"monitors"`
	Latency      []JobLatency `json:"latency"`
	Failures     []string     `json:"failures,omitempty"`
	Replays      []string     `json:"replays,omitempty"`
	Pressure     string       `json:"pressure,omitempty"`
	OOM          *OOMReport   `json:"oom,omitempty"`
	Cache        *CacheReport `json:"cache,omitempty"`
	Artifacts    string       `json:"artifacts"`
	// Trace, with Options.Profile: the jobs' first graph runs as one Perfetto trace, a
	// process per job (Slices: its slices; the trace is validated).
	Trace  string `json:"trace,omitempty"`
	Slices int    `json:"trace_slices,omitempty"`
	Pass   bool   `json:"pass"`
}

// JobLatency is one job's graph latency (compile+run+digest, ms) alone and under load.
type JobLatency struct {
	Job       int     `json:"job"`
	Graphs    int     `json:"graphs"`
	AloneP50  float64 `json:"alone_p50_ms"`
	AloneP99  float64 `json:"alone_p99_ms"`
	LoadedP50 float64 `json:"loaded_p50_ms"`
	LoadedP99 float64 `json:"loaded_p99_ms"`
}

// WorkerArgs is what a worker process is told (as JSON on its command line).
type WorkerArgs struct {
	Plan     string        `json:"plan"`
	Job      int           `json:"job"`
	Until    time.Time     `json:"until"`
	Replays  string        `json:"replays"`
	TempDir  string        `json:"temp_dir"`
	Interval time.Duration `json:"interval"`
	Plant    string        `json:"plant,omitempty"`
	// Role is what the process does beside the graph jobs ("" a job, RoleHog, RoleHammer);
	// CacheDir is the hammered cache.
	Role     string `json:"role,omitempty"`
	CacheDir string `json:"cache_dir,omitempty"`
	// WarmAll: before its soak the job runs every pool of the plan (PressureCache: the JIT
	// cache shared by processes that compile the same kernels at once).
	WarmAll bool `json:"warm_all,omitempty"`
	// ProfileDir: JobOptions.ProfileDir.
	ProfileDir string `json:"profile_dir,omitempty"`
}

// DeviceSampler returns the device monitors of bs when they are CUDA backends (lanes of one
// device), else nil: the device's used memory, and summed over the lanes the allocators' live
// bytes and the loaded kernels.
func DeviceSampler(bs ...backend.Backend) func() (map[string]float64, error) {
	var cbs []*cuda.Backend
	for _, b := range bs {
		if cb, ok := b.(*cuda.Backend); ok && !slices.Contains(cbs, cb) {
			cbs = append(cbs, cb)
		}
	}
	if len(cbs) == 0 {
		return nil
	}
	return func() (map[string]float64, error) {
		v := map[string]float64{}
		for _, cb := range cbs {
			s, err := cb.Stats()
			if err != nil {
				return nil, err
			}
			v[MonDeviceUsed] = float64(s.DeviceTotal - s.DeviceFree)
			v[MonAllocLive] += float64(s.Alloc.LiveBytes)
			v[MonModules] += float64(s.Modules)
		}
		return v, nil
	}
}

// jobBackends is the backend of each job run in this process: o.Backend for every job, or in
// streams mode a lane of o.Backend's device per job (same partition, if any).
func jobBackends(o Options) []backend.Backend {
	bs := make([]backend.Backend, o.Jobs)
	for j := range bs {
		bs[j] = o.Backend
	}
	cb, ok := o.Backend.(*cuda.Backend)
	if o.Mode != ModeStreams || !ok {
		return bs
	}
	if info, err := cb.Info(); err == nil {
		for j := range bs {
			bs[j] = cuda.NewPlaced(info.Ordinal, cuda.Placement{Lane: j + 1, SMs: cb.Placement().SMs})
		}
	}
	return bs
}

// Worker is a worker process's body: it runs one job of the plan and writes its events as
// JSON lines to out.
func Worker(ctx context.Context, argsJSON string, b backend.Backend, out io.Writer) error {
	var a WorkerArgs
	if err := json.Unmarshal([]byte(argsJSON), &a); err != nil {
		return errs.Wrap(errs.Input, err, "stress worker: arguments")
	}
	var mu sync.Mutex
	enc := json.NewEncoder(out)
	emit := func(e Event) { mu.Lock(); enc.Encode(e); mu.Unlock() }
	sampler := &Sampler{TempDir: a.TempDir, Device: DeviceSampler(b)}
	if a.Role == RoleHammer {
		return RunHammer(ctx, HammerOptions{Dir: a.CacheDir, Hammer: a.Job, Until: a.Until, Sampler: sampler, Interval: a.Interval, Emit: emit})
	}
	p, err := ReadPlan(a.Plan)
	if err != nil {
		return err
	}
	if a.Role == RoleHog {
		return RunHog(ctx, JobOptions{Plan: p, Job: a.Job, Backend: b, Until: a.Until, Replays: a.Replays, Sampler: sampler, Interval: a.Interval, Emit: emit})
	}
	return RunJob(ctx, JobOptions{Plan: p, Job: a.Job, Backend: b, Until: a.Until, Replays: a.Replays,
		Sampler: sampler, Interval: a.Interval, Plant: a.Plant, WarmAll: a.WarmAll, Emit: emit, ProfileDir: a.ProfileDir})
}

// collector gathers every job's events on one clock and writes the history.
type collector struct {
	mu      sync.Mutex
	t0      time.Time
	hist    *json.Encoder
	graphs  map[int]*reservoir
	samples map[string][]Sample
	rep     *Report
	last    map[string]float64 // latest sample per monitor (max over sources)
	press   pressureLog        // what the pressure modes reported (pressure.go, hammer.go)
}

func (c *collector) add(source string, e Event) {
	c.mu.Lock()
	defer c.mu.Unlock()
	// The history keeps every sample and every graph that did not pass; passing graphs (a
	// thousand a second per CPU job) are counted, and their latencies kept in memory.
	if e.Kind != "graph" || e.Verdict != harness.VerdictPass {
		c.hist.Encode(struct {
			T float64 `json:"t"`
			Event
		}{since(c.t0), e})
	}
	switch e.Kind {
	case "graph":
		allowed := c.press.graph(e) // an E_OOM while a memory hog holds the memory
		c.rep.Graphs++
		r := c.graphs[e.Job]
		if r == nil {
			r = newReservoir(uint64(e.Job))
			c.graphs[e.Job] = r
		}
		r.add(e.MS)
		switch {
		case e.Verdict == harness.VerdictPass:
		case e.Code == string(errs.Nondeterministic):
			c.rep.Mismatches++
			c.fail(fmt.Sprintf("%s: job %d graph %d: %s", errs.Nondeterministic, e.Job, e.Graph, e.Reason), e.Replay)
		case allowed:
		default:
			c.rep.Errors++
			c.fail(fmt.Sprintf("job %d graph %d: %s %s %s", e.Job, e.Graph, e.Verdict, e.Code, e.Reason), e.Replay)
		}
	case KindOOM, KindCache:
		c.press.add(source, e)
	case "sample":
		if e.Sample != nil {
			c.samples[source] = append(c.samples[source], *e.Sample)
			for k, v := range e.Sample.Values {
				c.last[k] = math.Max(c.last[k], v)
			}
		}
	}
}

// fail records a failure line (the first 20; the count is in the report) and its manifest.
func (c *collector) fail(line, replay string) {
	if len(c.rep.Failures) < 20 {
		c.rep.Failures = append(c.rep.Failures, line)
	}
	if replay != "" && len(c.rep.Replays) < 20 {
		c.rep.Replays = append(c.rep.Replays, replay)
	}
}

// Run makes the plan (alone phase), runs the jobs concurrently for Duration (loaded phase)
// and judges the history. An error means the run could not be made (bad options, a plan that
// cannot be built, a worker that cannot start); what the run found is in the Report.
func Run(ctx context.Context, o Options) (*Report, error) {
	if o.Jobs < 1 || o.Duration <= 0 || o.Backend == nil || o.OutDir == "" {
		return nil, errs.New(errs.Input, "stress: need jobs >= 1, a duration > 0, a backend and an output folder (jobs %d, duration %s)", o.Jobs, o.Duration)
	}
	if o.Mode != ModeGoroutines && o.Mode != ModeProcesses && o.Mode != ModeStreams {
		return nil, errs.New(errs.Input, "stress: mode %q (want %s, %s or %s)", o.Mode, ModeGoroutines, ModeProcesses, ModeStreams)
	}
	if _, isCUDA := o.Backend.(*cuda.Backend); o.Mode == ModeStreams && !isCUDA {
		return nil, errs.New(errs.Input, "stress: mode %s needs the cuda backend, not %s", ModeStreams, o.Backend.Name())
	}
	if o.Mode == ModeProcesses && o.Command == nil {
		return nil, errs.New(errs.Input, "stress: processes mode needs a worker command")
	}
	o.PerJob, o.Reps, o.Interval, o.Every = or(o.PerJob, 6), or(o.Reps, 5), or(o.Interval, 250*time.Millisecond), or(o.Every, time.Second)
	tmp, replays := filepath.Join(o.OutDir, "tmp"), filepath.Join(o.OutDir, "replays")
	for _, d := range []string{o.OutDir, tmp} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, errs.Wrap(errs.Input, err, "stress: output folder")
		}
	}
	if err := checkPressure(o); err != nil {
		return nil, err
	}
	var (
		plan *Plan
		err  error
	)
	switch o.Workload {
	case "", WorkloadGraphs:
		plan, err = MakePlan(o.Backend, o.Seed, o.Jobs+hogPools(o), o.PerJob, o.Reps)
	case WorkloadTrain:
		if o.Pressure != "" {
			return nil, errs.New(errs.Input, "stress: the %s workload runs without pressure (got %s)", WorkloadTrain, o.Pressure)
		}
		plan, err = MakeTrainPlan(ctx, o.Backend, o.Seed, o.Jobs, o.PerJob, o.Reps)
	default:
		return nil, errs.New(errs.Input, "stress: workload %q (want %s or %s)", o.Workload, WorkloadGraphs, WorkloadTrain)
	}
	if err != nil {
		return nil, err
	}
	planPath := filepath.Join(o.OutDir, "plan.json")
	if err := WritePlan(planPath, plan); err != nil {
		return nil, err
	}
	hf, err := os.Create(filepath.Join(o.OutDir, "history.jsonl"))
	if err != nil {
		return nil, errs.Wrap(errs.Input, err, "stress: history")
	}
	defer hf.Close()
	hw := bufio.NewWriter(hf)
	defer hw.Flush()

	rep := &Report{Schema: ReportSchema, Kind: ReportKind, Mode: o.Mode, Device: o.Backend.Device(), Jobs: o.Jobs, Seed: o.Seed, Artifacts: o.OutDir}
	if deviceEnv(o, 0) != "" {
		rep.Devices = o.Devices
	}
	if o.Workload == WorkloadTrain {
		rep.Workload = WorkloadTrain
	}
	c := &collector{t0: time.Now(), hist: json.NewEncoder(hw), graphs: map[int]*reservoir{}, samples: map[string][]Sample{}, rep: rep, last: map[string]float64{}}
	until := time.Now().Add(o.Duration)
	stopProgress := progress(o, c, until)

	start := time.Now()
	o, stopPressure := startPressure(ctx, o, planPath, plan, c, until, replays, tmp)
	switch o.Mode {
	case ModeGoroutines, ModeStreams:
		runGoroutines(ctx, o, plan, c, until, replays, tmp)
	case ModeProcesses:
		runProcesses(ctx, o, planPath, c, until, replays, tmp)
	}
	stopPressure()
	stopProgress()
	// A job stuck past its deadline (goroutines mode) may still report: judge a fixed history.
	c.mu.Lock()
	defer c.mu.Unlock()
	rep.DurationS = time.Since(start).Seconds()
	rep.GraphsPerSec = float64(rep.Graphs) / rep.DurationS

	sources := make([]string, 0, len(c.samples))
	for s := range c.samples {
		sources = append(sources, s)
	}
	sort.Strings(sources)
	for _, s := range sources {
		for _, l := range JudgeAll(s, c.samples[s]) {
			rep.Monitors = append(rep.Monitors, l)
			if l.Leak {
				rep.LeakCount++
				rep.Failures = append(rep.Failures, fmt.Sprintf("leak: %s of %s grew %.0f (allowance %.0f, slope %.1f/min)", l.Monitor, l.Source, l.Growth, l.Allowance, l.Slope))
			}
		}
	}
	for j := range o.Jobs {
		var alone []float64
		for _, g := range plan.Jobs[j] {
			alone = append(alone, g.AloneMS...)
		}
		var loaded []float64
		n := 0
		if r := c.graphs[j]; r != nil {
			loaded, n = r.xs, r.n
		}
		rep.Latency = append(rep.Latency, JobLatency{Job: j, Graphs: n,
			AloneP50: Percentile(alone, 50), AloneP99: Percentile(alone, 99),
			LoadedP50: Percentile(loaded, 50), LoadedP99: Percentile(loaded, 99)})
		if n == 0 {
			rep.Failures = append(rep.Failures, fmt.Sprintf("job %d ran no graph", j))
		}
	}
	judgePressure(o, c)
	if o.Profile {
		path, n, err := mergeProfile(profileDirOf(o))
		rep.Trace, rep.Slices = path, n
		if err != nil {
			rep.Failures = append(rep.Failures, fmt.Sprintf("profile: %v", err))
		}
	}
	rep.Pass = rep.Mismatches == 0 && rep.Errors == 0 && rep.LeakCount == 0 && len(rep.Failures) == 0
	return rep, nil
}

func or[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// progress prints a line every o.Every until the returned stop is called.
func progress(o Options, c *collector, until time.Time) func() {
	if o.Progress == nil && o.Observe == nil {
		return func() {}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(o.Every)
		defer t.Stop()
		start := time.Now()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				c.mu.Lock()
				el := time.Since(start).Seconds()
				if o.Observe != nil {
					o.Observe(c.snapshot(time.Since(start)))
				}
				if o.Progress == nil {
					c.mu.Unlock()
					continue
				}
				fmt.Fprintf(o.Progress, "stress: %5.1fs/%s  jobs %d  graphs %d (%.0f/s)  mismatches %d  errors %d  rss %.0f MiB\n",
					el, o.Duration, o.Jobs, c.rep.Graphs, float64(c.rep.Graphs)/el, c.rep.Mismatches, c.rep.Errors, c.last[MonRSS]/(1<<20))
				c.mu.Unlock()
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

func runGoroutines(ctx context.Context, o Options, plan *Plan, c *collector, until time.Time, replays, tmp string) {
	bs := jobBackends(o)
	s := Sampler{TempDir: tmp, Device: DeviceSampler(append([]backend.Backend{o.Backend}, bs...)...)}
	t0 := time.Now()
	c.add("process", Event{Kind: "sample", Sample: ptr(s.Read(since(t0), "before"))})
	done := make(chan struct{})
	var wg sync.WaitGroup
	for j := range o.Jobs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := RunJob(ctx, JobOptions{Plan: plan, Job: j, Backend: bs[j], Until: until, Replays: replays,
				Plant: o.Plant, Emit: func(e Event) { c.add("process", e) }, ProfileDir: profileDirOf(o)})
			if err != nil {
				c.mu.Lock()
				c.rep.Failures = append(c.rep.Failures, fmt.Sprintf("job %d: %v", j, err))
				c.mu.Unlock()
			}
		}()
	}
	go func() { wg.Wait(); close(done) }()
	t := time.NewTicker(o.Interval)
	defer t.Stop()
	// A graph that never returns must not hang the run: after the grace the run is judged
	// without the stuck jobs (their goroutines end with the process).
	late := time.NewTimer(time.Until(until.Add(workerGrace)))
	defer late.Stop()
	for {
		select {
		case <-late.C:
			c.mu.Lock()
			c.rep.Failures = append(c.rep.Failures, fmt.Sprintf("%s: jobs still running %s after the soak ended", errs.Timeout, workerGrace))
			c.mu.Unlock()
			return
		case <-done:
			c.add("process", Event{Kind: "sample", Sample: ptr(s.Read(since(t0), "after"))})
			return
		case <-t.C:
			c.add("process", Event{Kind: "sample", Sample: ptr(s.Read(since(t0), "during"))})
		}
	}
}

func ptr[T any](v T) *T { return &v }

// workerGrace is how long after the soak's end a worker may take to finish its last graph
// and exit before it is killed.
const workerGrace = 60 * time.Second

func runProcesses(ctx context.Context, o Options, planPath string, c *collector, until time.Time, replays, tmp string) {
	// The deadline covers the worker's warm-up pass, the soak and the grace.
	ctx, cancel := context.WithDeadline(ctx, until.Add(workerGrace))
	defer cancel()
	var wg sync.WaitGroup
	for j := range o.Jobs {
		startWorker(ctx, o, WorkerArgs{Plan: planPath, Job: j, Until: until, Replays: replays, TempDir: tmp, Interval: o.Interval, Plant: o.Plant,
			WarmAll: o.Pressure == PressureCache, ProfileDir: profileDirOf(o)},
			fmt.Sprintf("job %d", j), c, &wg)
	}
	wg.Wait()
}

// startWorker starts one worker process with a, feeds its events to c under source, and on
// exit checks that it succeeded and that its pid is gone; wg counts it.
func startWorker(ctx context.Context, o Options, a WorkerArgs, source string, c *collector, wg *sync.WaitGroup) {
	args, _ := json.Marshal(a)
	cmd := o.Command(ctx, string(args))
	if cmd.Env == nil {
		cmd.Env = os.Environ()
	}
	cmd.Env = append(cmd.Env, "TMPDIR="+a.TempDir)
	if d := deviceEnv(o, a.Job); d != "" {
		cmd.Env = append(cmd.Env, d)
	}
	cmd.WaitDelay = 5 * time.Second
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err == nil {
		err = cmd.Start()
	}
	if err != nil {
		c.mu.Lock()
		c.rep.Failures = append(c.rep.Failures, fmt.Sprintf("%s: worker did not start: %v", source, err))
		c.mu.Unlock()
		return
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 1<<20), 1<<24)
		for sc.Scan() {
			var e Event
			if json.Unmarshal(sc.Bytes(), &e) == nil {
				c.add(source, e)
			}
		}
		err := cmd.Wait()
		pid := cmd.Process.Pid
		gone := errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
		c.mu.Lock()
		defer c.mu.Unlock()
		if err != nil {
			c.rep.Failures = append(c.rep.Failures, fmt.Sprintf("%s: worker pid %d: %v: %s", source, pid, err, lastLine(stderr.String())))
		}
		if !gone {
			c.rep.Failures = append(c.rep.Failures, fmt.Sprintf("%s: worker pid %d still exists after Wait", source, pid))
		}
	}()
}

func lastLine(s string) string {
	s = string(bytes.TrimSpace([]byte(s)))
	if i := bytes.LastIndexByte([]byte(s), '\n'); i >= 0 {
		s = s[i+1:]
	}
	return s
}

// Percentile is the nearest-rank p-th percentile of xs (0 for none).
func Percentile(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	k := int(math.Ceil(p/100*float64(len(s)))) - 1
	return s[min(max(k, 0), len(s)-1)]
}

// reservoirSize bounds the latencies kept per job: a CPU job runs thousands of graphs a
// second, and keeping them all grew the runner's own RSS (27 MB in two minutes of goroutines
// mode, which the RSS monitor of that same process measures). A uniform sample of this size
// puts p99 within a fraction of a percentile.
const reservoirSize = 1 << 14

// reservoir is a uniform sample of a stream (Vitter's algorithm R), seeded so runs repeat.
type reservoir struct {
	xs []float64
	n  int
	r  *rand.Rand
}

func newReservoir(seed uint64) *reservoir {
	return &reservoir{xs: make([]float64, 0, reservoirSize), r: rand.New(rand.NewPCG(seed, 0x5eed))}
}

func (r *reservoir) add(x float64) {
	r.n++
	if len(r.xs) < reservoirSize {
		r.xs = append(r.xs, x)
		return
	}
	if k := r.r.IntN(r.n); k < reservoirSize {
		r.xs[k] = x
	}
}
