package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/backend"
	"github.com/tessera-qa/tessera-qa/engine/dist"
	"github.com/tessera-qa/tessera-qa/engine/dist/fabric"
	"github.com/tessera-qa/tessera-qa/engine/dist/launch"
	"github.com/tessera-qa/tessera-qa/engine/dist/mesh"
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/training"
)

// The environment an agent gives its rank processes.
const (
	EnvWorker      = "TESSERA_CHAOS_WORKER"      // the scenario, as JSON: this process is a rank
	EnvHistory     = "TESSERA_CHAOS_HISTORY"     // the run's artifacts folder (which faults already acted)
	EnvCheckpoints = "TESSERA_CHAOS_CHECKPOINTS" // the run's checkpoint folder
)

// termGrace is how long a rank may go on after the launcher's SIGTERM, to report what it
// detected (the launcher's grace before SIGKILL is longer).
const termGrace = 800 * time.Millisecond

// EventPrefix starts the lines a rank prints for its agent: "@chaos {json event}".
const EventPrefix = "@chaos "

// IsWorker reports whether this process is a rank started by a chaos agent.
func IsWorker() bool { return os.Getenv(EnvWorker) != "" }

// TrainConfig is the workload of s on backend b (checkpoints in dir, resuming from the newest).
func (s *Scenario) TrainConfig(b backend.Backend, dir string) (training.Config, error) {
	m, err := s.Model()
	if err != nil {
		return training.Config{}, err
	}
	opt, err := training.NewOptimizer("adamw", 1e-2, b)
	if err != nil {
		return training.Config{}, err
	}
	cfg := training.Config{Model: m, Dims: s.Dims(), Steps: s.Steps, Seed: s.Seed, Optimizer: opt, Backend: b,
		Timeout: time.Duration(s.CommTimeout)}
	if dir != "" {
		cfg.CheckpointDir, cfg.CheckpointEvery, cfg.Resume = dir, s.CheckpointEvery, true
	}
	if s.Mesh != "" {
		if cfg.Mesh, err = mesh.ParseMesh(s.Mesh); err != nil {
			return training.Config{}, errs.Wrap(errs.Input, err, "chaos: mesh")
		}
	}
	return cfg, nil
}

// worker is one rank's side of a run: it reports what the rank does and injects the faults
// scheduled in this rank.
type worker struct {
	sc      *Scenario
	run     Run
	self    int
	attempt int
	ckDir   string
	tap     *Tap
	emit    func(Event)
	// fab is the modeled fabric this rank's frames go over (nil: none).
	fab *fabric.Fabric

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu       sync.Mutex
	fired    map[string]bool
	lastStep int
	lastCk   int
}

func newWorker(sc *Scenario, run Run, self, attempt int, ckDir string, fired map[string]bool, emit func(Event)) *worker {
	ctx, cancel := context.WithCancel(context.Background())
	if fired == nil {
		fired = map[string]bool{}
	}
	return &worker{sc: sc, run: run, self: self, attempt: attempt, ckDir: ckDir, tap: NewTap(sc.Plant), emit: emit,
		ctx: ctx, cancel: cancel, fired: fired}
}

// stop ends the faults still acting in this rank and waits for their undo.
func (w *worker) stop() {
	w.cancel()
	w.wg.Wait()
}

func (w *worker) record(e Event) {
	e.Attempt, e.Rank = w.attempt, w.self
	if e.T.IsZero() {
		e.T = time.Now()
	}
	w.emit(e)
}

// observe is the workload's Observe hook.
func (w *worker) observe(o training.Observation) {
	switch o.Kind {
	case "resume":
		w.mu.Lock()
		w.lastStep = o.Step
		w.mu.Unlock()
		w.record(Event{Kind: KindResume, Step: o.Step})
		for _, n := range o.Notices {
			w.record(Event{Kind: KindDetect, Code: string(errs.Checkpoint), Detail: n})
		}
	case "step":
		w.mu.Lock()
		w.lastStep = o.Step
		w.mu.Unlock()
		var wait []float64
		for _, d := range o.PeerWait {
			wait = append(wait, float64(d.Nanoseconds())/1e3)
		}
		w.record(Event{Kind: KindStep, Step: o.Step, Bits: o.LossBits, ComputeMS: float64(o.Compute.Microseconds()) / 1e3, WaitUS: wait})
		// A fault acts after the step's checkpoint when one is due.
		if k := w.sc.CheckpointEvery; k <= 0 || o.Step%k != 0 {
			w.trigger(o.Step, false)
		}
	case "checkpoint":
		w.mu.Lock()
		w.lastCk = o.Step
		w.mu.Unlock()
		w.record(Event{Kind: KindCheckpoint, Step: o.Step})
		w.trigger(o.Step, true)
	}
}

// trigger injects every fault of this rank whose step has come and that has not acted yet.
func (w *worker) trigger(step int, checkpointed bool) {
	for _, in := range w.sc.Faults {
		site := in.Fault.Site()
		if w.fired[in.ID] || site == SiteAgent || (site == SiteRank && in.Rank != w.self) || step < in.Step {
			continue
		}
		_, ckFault := in.Fault.(checkpointFault)
		if ckFault && !checkpointed {
			continue
		}
		if err := in.Fault.Available(w.run); err != nil {
			w.fired[in.ID] = true
			w.record(Event{Kind: KindHeal, Fault: in.ID, Name: in.Fault.Name(), Detail: "not injected: " + err.Error()})
			continue
		}
		w.fired[in.ID] = true
		ev := Event{Kind: KindInject, Fault: in.ID, Name: in.Fault.Name(), Step: step}
		if ckFault {
			ev.Damaged = w.lastCk
		}
		w.record(ev)
		t := &rankTarget{w: w, in: in, armed: make(chan struct{})}
		heal := func(detail string, err error) {
			if err != nil {
				detail = "failed: " + err.Error()
			}
			w.record(Event{Kind: KindHeal, Fault: in.ID, Name: in.Fault.Name(), Detail: detail})
		}
		if syncFault(in.Fault) {
			heal(in.Fault.Inject(w.ctx, t))
			continue
		}
		// Faults on frames arm the tap (or put a fault in force on the fabric) and wait for
		// their frame: the step must go on, but not before the fault is armed, so that it
		// hits the very next frames.
		armed := w.tap.armed()
		done := make(chan struct{})
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			defer close(done)
			heal(in.Fault.Inject(w.ctx, t))
		}()
		deadline := time.After(2 * time.Second)
	wait:
		for w.tap.armed() <= armed {
			select {
			case <-done:
				break wait
			case <-t.armed:
				break wait
			case <-deadline:
				break wait
			case <-time.After(200 * time.Microsecond):
			}
		}
	}
}

// syncFault: faults that act on the process itself right away (before the next step).
func syncFault(f Fault) bool {
	switch f.(type) {
	case *Kill, *CheckpointCorrupt, *TornWrite, *IllegalAddress, *OOM:
		return true
	}
	return false
}

// rankTarget is a fault's view of the rank process it runs in.
type rankTarget struct {
	w     *worker
	in    Injection
	armed chan struct{} // closed once a fabric fault is in force
	once  sync.Once
}

func (t *rankTarget) Fabric() FabricControl {
	if t.w.fab == nil {
		return nil
	}
	return rankFabric{t}
}

// rankFabric is a rank's fault's hold on the fabric: adding a fault arms it.
type rankFabric struct{ t *rankTarget }

func (f rankFabric) Add(x fabric.Fault) (func(), error) {
	undo, err := f.t.w.fab.AddFault(x)
	f.t.once.Do(func() { close(f.t.armed) })
	return undo, err
}
func (f rankFabric) Stats() fabric.Stats { return f.t.w.fab.Stats() }

func (t *rankTarget) Rank() int             { return t.in.Rank }
func (t *rankTarget) Self() int             { return t.w.self }
func (t *rankTarget) World() int            { return t.w.sc.World }
func (t *rankTarget) Run() Run              { return t.w.run }
func (t *rankTarget) Tap() *Tap             { return t.w.tap }
func (t *rankTarget) CheckpointDir() string { return t.w.ckDir }
func (t *rankTarget) Store() StoreControl   { return nil }
func (t *rankTarget) Nodes() NodeControl    { return nil }
func (t *rankTarget) LastStep() int {
	t.w.mu.Lock()
	defer t.w.mu.Unlock()
	return t.w.lastStep
}
func (t *rankTarget) LastCheckpoint() int {
	t.w.mu.Lock()
	defer t.w.mu.Unlock()
	return t.w.lastCk
}
func (t *rankTarget) Signal(rank int, sig Signal) error {
	if rank != t.w.self {
		return fmt.Errorf("rank %d cannot signal rank %d", t.w.self, rank)
	}
	if t.w.sc.Transport == "inproc" {
		return unsupported("inproc ranks share one process: no signal")
	}
	err := syscall.Kill(os.Getpid(), syscall.Signal(sig))
	if err == nil && syscall.Signal(sig) == syscall.SIGKILL {
		time.Sleep(time.Minute) // the signal is on its way
	}
	return err
}

// firedIn lists the injections an earlier attempt already made, from the histories in dir.
func firedIn(dir string) map[string]bool {
	out := map[string]bool{}
	if dir == "" {
		return out
	}
	evs, _ := ReadHistory(dir)
	for _, e := range evs {
		if e.Kind == KindInject || (e.Kind == KindHeal && e.Fault != "") {
			out[e.Fault] = true
		}
	}
	return out
}

// RunRank is a rank process of a tcp run (started by an agent through the launcher, with the
// scenario in $TESSERA_CHAOS_WORKER): it trains, reports every event to out as an
// "@chaos {json}" line, and injects its faults. Its error is the workload's.
func RunRank(ctx context.Context, out io.Writer) error {
	sc := &Scenario{}
	if err := json.Unmarshal([]byte(os.Getenv(EnvWorker)), sc); err != nil {
		return errs.New(errs.Input, "chaos: rank: $%s: %v", EnvWorker, err)
	}
	if err := sc.Normalize(); err != nil {
		return err
	}
	self, _ := strconv.Atoi(os.Getenv("RANK"))
	attempt, _ := strconv.Atoi(os.Getenv(launch.EnvRestartCount))
	var mu sync.Mutex
	emit := func(e Event) {
		line, _ := json.Marshal(e)
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(out, "%s%s\n", EventPrefix, line)
	}
	b, err := backend.Get(sc.Backend)
	if err != nil {
		return err
	}
	run := sc.Run(os.Geteuid() == 0)
	ckDir := os.Getenv(EnvCheckpoints)
	w := newWorker(sc, run, self, attempt, ckDir, firedIn(os.Getenv(EnvHistory)), emit)
	cfg, err := sc.TrainConfig(b, ckDir)
	if err != nil {
		return err
	}
	cfg.Wrap, cfg.Observe = w.tap.Wrap, w.observe
	if sc.Profile {
		cfg.ProfileDir = profileDir(os.Getenv(EnvHistory), attempt)
	}
	// The launcher tears the group down (SIGTERM) as soon as one rank fails; a rank that is
	// itself detecting the failure gets a moment to say so before it goes.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM)
	defer signal.Stop(sigs)
	go func() {
		if _, ok := <-sigs; ok {
			time.Sleep(termGrace)
			os.Exit(128 + int(syscall.SIGTERM))
		}
	}()
	res, err := training.Rank(ctx, cfg)
	if err != nil {
		w.record(Event{Kind: KindDetect, Code: string(errs.CodeOf(err)), Detail: err.Error(), Field: dist.DesyncField(err)})
		w.stop()
		return err
	}
	w.stop()
	if self == 0 {
		w.record(Event{Kind: KindDone, Step: sc.Steps, Digest: res.Digest})
	}
	return nil
}
