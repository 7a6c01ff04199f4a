package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/backend"
	"github.com/tessera-qa/tessera-qa/engine/dist"
	"github.com/tessera-qa/tessera-qa/engine/dist/fabric"
	"github.com/tessera-qa/tessera-qa/engine/dist/launch"
	"github.com/tessera-qa/tessera-qa/engine/dist/rdzv"
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/training"
)

// Options say how to run a scenario.
type Options struct {
	// Dir is the run's artifacts folder (created): history-*.jsonl, history.jsonl (merged),
	// scenario.json, reference.json, report.json, checkpoints/.
	Dir string
	// Program and Args start a rank (this binary in its rank mode); tcp runs only.
	Program string
	Args    []string
	// Log receives the launcher's lines and the ranks' output that is not an event.
	Log io.Writer
	// Cluster, when set, makes this process the agent of one node of a job started by
	// torchrun or srun: it runs rank Cluster.Rank (one rank per agent), agent 0 serves the
	// store and checks the run once every agent has ended. Dir must be shared by all.
	Cluster *rdzv.Env
	// Reference, when set, is the fault-free run (else computed here, in-process).
	Reference *Reference
	// Launcher, when set, starts and restarts the ranks instead of engine/dist/launch (the
	// containers of chaos/container). If it also implements NodeControl, the node/* faults
	// act through it.
	Launcher Launcher
	// StoreListen is where the agent's rendezvous store listens (default 127.0.0.1:0); ranks
	// in containers need an address on their network.
	StoreListen string
}

// Launcher starts the ranks of a job and restarts the group on failure, with the semantics of
// engine/dist/launch.Run (Spec.MaxRestarts, Events, Store, Stdout, Env).
type Launcher interface {
	Run(ctx context.Context, spec launch.Spec) (exit int, err error)
}

// Execute runs sc and checks it. The report's Passed is the checker's verdict; err is set
// only when the run could not be made (bad input, no store, no artifacts folder).
func Execute(ctx context.Context, sc *Scenario, o Options) (*Report, error) {
	if err := sc.Normalize(); err != nil {
		return nil, err
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return nil, errs.New(errs.Input, "chaos: artifacts folder %s: %v", o.Dir, err)
	}
	me := 0
	if o.Cluster != nil {
		me = o.Cluster.Rank
	}
	if _, err := os.Stat(filepath.Join(o.Dir, fmt.Sprintf("history-agent-%d.jsonl", me))); err == nil {
		return nil, errs.New(errs.Input, "chaos: %s already holds a run (its history and checkpoints would mix with this one's): give another --artifacts", o.Dir)
	}
	os.WriteFile(filepath.Join(o.Dir, "scenario.json"), sc.MarshalIndent(), 0o644)
	ref := o.Reference
	if ref == nil && (o.Cluster == nil || o.Cluster.Rank == 0) {
		var err error
		if ref, err = ReferenceRun(ctx, sc); err != nil {
			return nil, err
		}
	}
	if ref != nil {
		b, _ := json.MarshalIndent(ref, "", "  ")
		os.WriteFile(filepath.Join(o.Dir, "reference.json"), b, 0o644)
	}
	rec, err := NewRecorder(filepath.Join(o.Dir, fmt.Sprintf("history-agent-%d.jsonl", me)))
	if err != nil {
		return nil, err
	}
	root := os.Geteuid() == 0 && o.Cluster == nil && o.Launcher == nil
	run := sc.Run(root)
	_, run.Containers = o.Launcher.(NodeControl)
	a := &agent{sc: sc, o: o, run: run, rec: rec, pids: map[int]int{}, lastStep: map[int]int{}, fired: map[string]bool{},
		ckDir: filepath.Join(o.Dir, "checkpoints"), me: me}
	if o.Cluster == nil {
		a.slow = newStragglerWatch(sc.World, func(e Event) { rec.Record(e) }) // a node of a cluster sees one rank
		if run.Topology != nil {
			a.slow.waitFloorUS = stragglerVirtualWaitUS // the fabric's clock has no scheduler noise
		}
	}
	rec.Record(Event{Kind: KindScenario, Rank: -1, Detail: sc.Name})
	var runErr error
	if sc.Transport == "inproc" {
		runErr = a.inproc(ctx)
	} else {
		runErr = a.tcp(ctx)
	}
	rec.Close()
	if runErr != nil {
		return nil, runErr
	}
	if o.Cluster != nil && o.Cluster.Rank != 0 {
		return nil, nil // agent 0 checks
	}
	if o.Cluster != nil {
		waitAgents(o.Dir, o.Cluster.World, time.Duration(sc.CommTimeout)*4+30*time.Second)
	}
	evs, err := ReadHistory(o.Dir)
	if err != nil {
		return nil, err
	}
	if err := WriteHistory(filepath.Join(o.Dir, HistoryFile), evs); err != nil {
		return nil, err
	}
	rep := Check(sc, run, ref, evs)
	rep.Dir = o.Dir
	if sc.Profile {
		rep.Profiles = mergeProfiles(o.Dir, rep)
	}
	b, _ := json.MarshalIndent(rep, "", "  ")
	os.WriteFile(filepath.Join(o.Dir, "report.json"), b, 0o644)
	return rep, nil
}

// waitAgents waits (bounded) until every agent's history has its job_end.
func waitAgents(dir string, world int, limit time.Duration) {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		n := 0
		for r := range world {
			evs, _ := ReadEvents(filepath.Join(dir, fmt.Sprintf("history-agent-%d.jsonl", r)))
			for _, e := range evs {
				if e.Kind == KindJobEnd {
					n++
					break
				}
			}
		}
		if n == world {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

var refCache sync.Map // key string -> *Reference

// ReferenceRun is the fault-free run of sc's workload (same seed, same world), on goroutine
// ranks: the deterministic collectives give it the bits of any transport. Cached per process.
func ReferenceRun(ctx context.Context, sc *Scenario) (*Reference, error) {
	key := fmt.Sprintf("%s/%d/%d/%d/%s", sc.Workload, sc.World, sc.Steps, sc.Seed, sc.Backend)
	if r, ok := refCache.Load(key); ok {
		return r.(*Reference), nil
	}
	b, err := backend.Get(sc.Backend)
	if err != nil {
		return nil, err
	}
	if err := b.Available(); err != nil {
		return nil, errs.Wrap(errs.NoDevice, err, "chaos: backend %s", sc.Backend)
	}
	cfg, err := sc.TrainConfig(b, "")
	if err != nil {
		return nil, err
	}
	cfg.Timeout = time.Minute
	res, err := training.Inproc(ctx, cfg, sc.World)
	if err != nil {
		return nil, errs.Wrap(errs.CodeOf(err), err, "chaos: the fault-free reference run")
	}
	ref := &Reference{Digest: res.Digest}
	for _, l := range res.Losses {
		ref.Bits = append(ref.Bits, l.Bits)
	}
	refCache.Store(key, ref)
	return ref, nil
}

// agent runs the ranks of one node (all of them, locally), records the history and injects
// the faults that act from outside the ranks.
type agent struct {
	sc    *Scenario
	o     Options
	run   Run
	rec   *Recorder
	ckDir string
	me    int
	store *storeCtl

	mu       sync.Mutex
	attempt  int
	pids     map[int]int
	lastStep map[int]int
	lastCk   int
	fired    map[string]bool
	active   []context.CancelFunc
	wg       sync.WaitGroup
	// slow watches the local ranks' step events for a fail-slow rank (straggler.go).
	slow *stragglerWatch
	// stops: per rank, the injections holding its process stopped. A SIGCONT continues it
	// only once none does, so a rank/slow's duty cycle cannot end a rank/hang early.
	stops map[int]map[string]bool
}

func (a *agent) record(e Event) {
	if e.Kind != KindStep && e.Kind != KindResume && e.Kind != KindCheckpoint && e.Kind != KindDetect && e.Kind != KindInject && e.Kind != KindHeal && e.Kind != KindDone {
		e.Rank = -1
	}
	a.rec.Record(e)
}

// tcp runs the ranks as processes through the launcher, restarting the group on failure.
func (a *agent) tcp(ctx context.Context) error {
	sc, o := a.sc, a.o
	if o.Program == "" {
		return errs.New(errs.Input, "chaos: no program to start the ranks with")
	}
	unmount, err := a.checkpointFS()
	if err != nil {
		return err
	}
	defer unmount()
	spec := launch.Spec{NProcPerNode: sc.World, Program: o.Program, Args: o.Args,
		Timeout: 30 * time.Second, Grace: time.Second, MaxRestarts: sc.MaxRestarts,
		Events: a.launchEvent, Stdout: &eventWriter{a: a}, Stderr: o.Log, Log: o.Log,
		JobID: "chaos-" + regexp.MustCompile(`[^a-zA-Z0-9]+`).ReplaceAllString(sc.Name, "-") + "-" + strconv.FormatInt(time.Now().UnixNano()%1e9, 36)}
	if c := o.Cluster; c != nil {
		spec.NProcPerNode, spec.NNodes, spec.NodeRank = 1, c.World, c.Rank
		// Every node's agent must name the attempt's rendezvous alike: no clock, no pid.
		spec.MasterAddr, spec.MasterPort = c.MasterAddr, c.MasterPort
		spec.JobID = c.JobID + "-" + regexp.MustCompile(`[^a-zA-Z0-9]+`).ReplaceAllString(sc.Name, "-")
		addr := c.StoreAddr
		if c.Rank == 0 {
			if a.store, err = serveStore(ctx, c.ListenAddr()); err != nil {
				return err
			}
			defer a.store.close()
		}
		spec.Store = "tcp://" + addr
	} else {
		listen := o.StoreListen
		if listen == "" {
			listen = "127.0.0.1:0"
		}
		if a.store, err = serveStore(ctx, listen); err != nil {
			return err
		}
		defer a.store.close()
		spec.Store = "tcp://" + a.store.addr
	}
	js, _ := json.Marshal(sc)
	spec.Env = []string{EnvWorker + "=" + string(js), EnvHistory + "=" + o.Dir, EnvCheckpoints + "=" + a.ckDir}
	bctx, cancel := context.WithTimeout(ctx, time.Duration(sc.Bound))
	defer cancel()
	run := launch.Run
	if o.Launcher != nil {
		run = o.Launcher.Run
	}
	exit, err := run(bctx, spec)
	a.healAll()
	detail := ""
	switch {
	case bctx.Err() != nil && ctx.Err() == nil:
		detail = "timeout"
	case err != nil:
		detail = err.Error()
	}
	a.mu.Lock()
	last := a.attempt
	a.mu.Unlock()
	a.record(Event{Kind: KindJobEnd, Attempt: last, Code: strconv.Itoa(exit), Detail: detail})
	if err != nil && detail != "timeout" && errs.CodeOf(err) != errs.Timeout {
		return err
	}
	return nil
}

// checkpointFS prepares the checkpoint folder: a small tmpfs when a disk/full fault is
// scheduled and this agent may mount one (the machine's own disk is never filled).
func (a *agent) checkpointFS() (func(), error) {
	if err := os.MkdirAll(a.ckDir, 0o755); err != nil {
		return nil, errs.New(errs.Input, "chaos: %v", err)
	}
	need := false
	for _, in := range a.sc.Faults {
		if _, ok := in.Fault.(*DiskFull); ok && in.Fault.Available(a.run) == nil {
			need = true
		}
	}
	if !need {
		return func() {}, nil
	}
	if err := mountTmpfs(a.ckDir, "8m"); err != nil {
		a.run.Root = false // disk/full is then unavailable, and says so
		return func() {}, nil
	}
	return func() { unmount(a.ckDir) }, nil
}

// mountTmpfs mounts a tmpfs of size at dir.
func mountTmpfs(dir, size string) error {
	return syscall.Mount("tmpfs", dir, "tmpfs", 0, "size="+size+",mode=0755")
}

// unmount unmounts dir, waiting (bounded) for files still open, then lazily.
func unmount(dir string) {
	for range 50 {
		if syscall.Unmount(dir, 0) == nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	syscall.Unmount(dir, syscall.MNT_DETACH)
}

// launchEvent is the launcher's Events hook.
func (a *agent) launchEvent(e launch.Event) {
	switch e.Kind {
	case launch.RankStarted:
		a.mu.Lock()
		a.attempt, a.pids[e.Rank] = e.Attempt, e.PID
		delete(a.stops, e.Rank) // a new process: nothing holds it
		a.mu.Unlock()
		a.record(Event{T: e.Time, Kind: KindRankStart, Attempt: e.Attempt, PID: e.PID, Detail: "rank " + strconv.Itoa(e.Rank)})
	case launch.RankExited:
		a.record(Event{T: e.Time, Kind: KindRankExit, Attempt: e.Attempt, PID: e.PID, Code: strconv.Itoa(e.Code), Detail: fmt.Sprintf("rank %d %s", e.Rank, e.How)})
	case launch.Restarting:
		a.healAll() // faults end before the group comes back
		a.mu.Lock()
		a.attempt = e.Attempt
		a.mu.Unlock()
		a.record(Event{Kind: KindRestart, Attempt: e.Attempt, Detail: fmt.Sprintf("rank %d %s", e.Rank, e.How)})
	case launch.GivingUp:
		a.record(Event{Kind: KindGiveUp, Attempt: e.Attempt, Detail: fmt.Sprintf("rank %d: %s", e.Rank, e.How)})
	}
}

// healAll ends the agent's faults still acting and waits for their undo.
func (a *agent) healAll() {
	a.mu.Lock()
	for _, c := range a.active {
		c()
	}
	a.active = nil
	a.mu.Unlock()
	a.wg.Wait()
}

// eventWriter receives the ranks' stdout lines from the launcher ("[rank N] ...").
type eventWriter struct{ a *agent }

var rankPrefix = regexp.MustCompile(`^\[rank \d+\] `)

func (w *eventWriter) Write(p []byte) (int, error) {
	line := rankPrefix.ReplaceAll(bytes.TrimRight(p, "\n"), nil)
	if rest, ok := bytes.CutPrefix(line, []byte(EventPrefix)); ok {
		var e Event
		if json.Unmarshal(rest, &e) == nil {
			w.a.onRankEvent(e)
			return len(p), nil
		}
	}
	w.a.o.Log.Write(p)
	return len(p), nil
}

// onRankEvent records a rank's event and fires the agent's faults that were waiting for it.
func (a *agent) onRankEvent(e Event) {
	a.rec.Record(e)
	a.slow.step(e)
	switch e.Kind {
	case KindInject, KindHeal:
		a.mu.Lock()
		a.fired[e.Fault] = true
		a.mu.Unlock()
	case KindCheckpoint:
		a.mu.Lock()
		a.lastCk = max(a.lastCk, e.Step)
		a.mu.Unlock()
	case KindStep:
		a.mu.Lock()
		a.lastStep[e.Rank] = e.Step
		attempt := a.attempt
		var due []Injection
		for _, in := range a.sc.Faults {
			if a.fired[in.ID] || in.Fault.Site() != SiteAgent || e.Step < in.Step {
				continue
			}
			if _, ok := in.Fault.(*StoreRestart); ok {
				if a.store == nil {
					continue // only the agent that serves the store restarts it
				}
			} else if in.Rank != e.Rank {
				continue
			}
			a.fired[in.ID] = true
			due = append(due, in)
		}
		a.mu.Unlock()
		for _, in := range due {
			a.inject(in, attempt, e.Step)
		}
	}
}

// inject starts an agent fault; it acts until it ends on its own or the group restarts.
func (a *agent) inject(in Injection, attempt, step int) {
	if err := in.Fault.Available(a.run); err != nil {
		a.record(Event{Kind: KindHeal, Attempt: attempt, Fault: in.ID, Name: in.Fault.Name(), Detail: "not injected: " + err.Error()})
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	a.mu.Lock()
	a.active = append(a.active, cancel)
	a.mu.Unlock()
	a.rec.Record(Event{Kind: KindInject, Attempt: attempt, Rank: in.Rank, Fault: in.ID, Name: in.Fault.Name(), Step: step})
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		detail, err := in.Fault.Inject(ctx, &agentTarget{a: a, in: in})
		if err != nil {
			detail = "failed: " + err.Error()
		}
		a.rec.Record(Event{Kind: KindHeal, Attempt: attempt, Rank: in.Rank, Fault: in.ID, Name: in.Fault.Name(), Detail: detail})
	}()
}

// agentTarget is a fault's view of the ranks from their agent.
type agentTarget struct {
	a  *agent
	in Injection
}

func (t *agentTarget) Rank() int             { return t.in.Rank }
func (t *agentTarget) Self() int             { return -1 }
func (t *agentTarget) World() int            { return t.a.sc.World }
func (t *agentTarget) Run() Run              { return t.a.run }
func (t *agentTarget) Tap() *Tap             { return nil }
func (t *agentTarget) CheckpointDir() string { return t.a.ckDir }
func (t *agentTarget) Fabric() FabricControl { return nil }
func (t *agentTarget) Nodes() NodeControl {
	n, _ := t.a.o.Launcher.(NodeControl)
	return n
}
func (t *agentTarget) Store() StoreControl {
	if t.a.store == nil {
		return nil
	}
	return t.a.store
}
func (t *agentTarget) LastStep() int {
	t.a.mu.Lock()
	defer t.a.mu.Unlock()
	return t.a.lastStep[t.in.Rank]
}
func (t *agentTarget) LastCheckpoint() int {
	t.a.mu.Lock()
	defer t.a.mu.Unlock()
	return t.a.lastCk
}
func (t *agentTarget) Signal(rank int, sig Signal) error {
	a := t.a
	a.mu.Lock()
	pid, ok := a.pids[rank]
	if a.stops == nil {
		a.stops = map[int]map[string]bool{}
	}
	switch syscall.Signal(sig) {
	case syscall.SIGSTOP:
		if a.stops[rank] == nil {
			a.stops[rank] = map[string]bool{}
		}
		a.stops[rank][t.in.ID] = true
	case syscall.SIGCONT:
		delete(a.stops[rank], t.in.ID)
		if len(a.stops[rank]) > 0 {
			a.mu.Unlock()
			return nil // another fault still holds it stopped
		}
	}
	a.mu.Unlock()
	if !ok || pid <= 0 {
		return fmt.Errorf("rank %d has no process of this agent's to signal", rank)
	}
	err := syscall.Kill(pid, syscall.Signal(sig))
	if errors.Is(err, syscall.ESRCH) {
		return nil // it ended already
	}
	return err
}

// storeCtl is a rendezvous store the agent serves and can restart at the same address.
type storeCtl struct {
	mu   sync.Mutex
	addr string
	srv  *rdzv.Server
}

func serveStore(ctx context.Context, addr string) (*storeCtl, error) {
	srv, err := rdzv.Serve(context.Background(), addr)
	if err != nil {
		return nil, errs.Wrap(errs.CommInit, err, "chaos: the rendezvous store")
	}
	return &storeCtl{addr: srv.Addr(), srv: srv}, nil
}

// Restart closes the store, waits down, and serves an empty one at the same address.
func (s *storeCtl) Restart(ctx context.Context, down time.Duration) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.srv.Close()
	s.srv = nil
	sleepCtx(ctx, down)
	var err error
	for range 50 {
		var srv *rdzv.Server
		if srv, err = rdzv.Serve(context.Background(), s.addr); err == nil {
			s.srv = srv
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return err
}

func (s *storeCtl) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.srv != nil {
		s.srv.Close()
	}
}

// inproc runs the ranks as goroutines of this process over the in-process transport, and
// restarts them itself (the same semantics as the launcher's --max-restarts).
func (a *agent) inproc(ctx context.Context) error {
	sc := a.sc
	if err := os.MkdirAll(a.ckDir, 0o755); err != nil {
		return errs.New(errs.Input, "chaos: %v", err)
	}
	b, err := backend.Get(sc.Backend)
	if err != nil {
		return err
	}
	bctx, cancel := context.WithTimeout(ctx, time.Duration(sc.Bound))
	defer cancel()
	fired := make([]map[string]bool, sc.World)
	for r := range fired {
		fired[r] = map[string]bool{}
	}
	exit := 1
	for attempt := 0; attempt <= sc.MaxRestarts && bctx.Err() == nil; attempt++ {
		if attempt > 0 {
			a.record(Event{Kind: KindRestart, Attempt: attempt})
		}
		ts := dist.NewInproc(sc.World)
		var fab *fabric.Fabric
		if a.run.Topology != nil {
			// A fresh fabric per attempt: its clocks start with the group, and its faults
			// (a corrupting NIC) end with the attempt, as a replaced node's would.
			fab = fabric.New(a.run.Topology, true, sc.Seed+uint64(attempt))
		}
		errc := make(chan error, sc.World)
		var digest string
		for r := range sc.World {
			w := newWorker(sc, a.run, r, attempt, a.ckDir, fired[r], func(e Event) { a.rec.Record(e); a.slow.step(e) })
			cfg, err := sc.TrainConfig(b, a.ckDir)
			if err != nil {
				return err
			}
			// The tap above the fabric: what it drops never reaches the fabric's clocks.
			var t dist.Transport = ts[r]
			if fab != nil {
				t, w.fab = fab.Wrap(t), fab
			}
			cfg.Comm = dist.NewComm(w.tap.Wrap(t), dist.Options{Mode: dist.Deterministic, Timeout: time.Duration(sc.CommTimeout)})
			cfg.Observe = w.observe
			if sc.Profile {
				cfg.ProfileDir = profileDir(a.o.Dir, attempt)
			}
			go func() {
				res, err := training.Run(bctx, cfg)
				if err != nil {
					w.record(Event{Kind: KindDetect, Code: string(errs.CodeOf(err)), Detail: err.Error(), Field: dist.DesyncField(err)})
					ts[r].Close()
				} else if r == 0 {
					digest = res.Digest
				}
				w.stop()
				errc <- err
			}()
		}
		failed := false
		for range sc.World {
			if err := <-errc; err != nil {
				failed = true
			}
		}
		if !failed {
			a.rec.Record(Event{Kind: KindDone, Attempt: attempt, Rank: 0, Step: sc.Steps, Digest: digest})
			exit = 0
			break
		}
	}
	detail := ""
	if bctx.Err() != nil && ctx.Err() == nil {
		detail = "timeout"
	}
	a.mu.Lock()
	last := a.attempt
	a.mu.Unlock()
	a.record(Event{Kind: KindJobEnd, Attempt: last, Code: strconv.Itoa(exit), Detail: detail})
	return nil
}

// LookExe is the path of this program, to start ranks with.
func LookExe() (string, error) {
	p, err := os.Executable()
	if err != nil {
		return exec.LookPath(os.Args[0])
	}
	return p, nil
}
