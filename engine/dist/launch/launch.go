// Package launch starts the ranks of a job on this node the way torchrun does: one child
// process per local rank with RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR and
// MASTER_PORT set, output lines prefixed "[rank N] ", signals forwarded, and the whole job torn
// down as soon as one rank fails.
//
// The launcher of node 0 serves the rendezvous store (engine/dist/rdzv) itself, at
// MasterAddr:MasterPort, and tells the ranks where through TESSERA_RDZV=tcp://host:port (with
// TESSERA_RDZV_JOB, the job id), so the ranks only connect to it. MASTER_PORT is then left to
// programs that serve a store of their own on rank 0 (torch.distributed's env:// does): it is
// MasterPort+1, or another free port when MasterPort is 0. Every rank runs in its own process
// group, and every group is killed before Run returns, so no process the job started outlives
// it.
//
// Restarts (torchelastic's --max-restarts): with Spec.MaxRestarts > 0, a failed group (a rank
// exited non-zero or was killed) is torn down as usual and started again, up to MaxRestarts
// times. Every attempt is a fresh rendezvous: its job id is the job's id with "-aN" appended
// (N the attempt, 0 first), so no rank of one attempt can meet a rank of another; the store
// stays up across attempts. Ranks see TORCHELASTIC_RESTART_COUNT (the attempt) and
// TORCHELASTIC_MAX_RESTARTS, as under torchrun, and resume from their own checkpoints. A
// signal to the launcher or ctx ending stops the job without a restart. On several nodes each
// node's launcher restarts its own ranks; since the ranks of a data-parallel group fail
// together (a rank that loses a peer fails), the nodes' attempt counts stay in step.
package launch

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/dist/rdzv"
	"github.com/tessera-qa/tessera-qa/engine/errs"
)

// DefaultGrace is how long ranks get between SIGTERM and SIGKILL.
const DefaultGrace = 5 * time.Second

// outputGrace bounds the wait for the last output of ranks that exited: a process that
// inherited their output and lives on elsewhere must not hold the launcher.
const outputGrace = 2 * time.Second

// Spec describes the job on this node.
type Spec struct {
	NProcPerNode int // ranks on this node (>= 1)
	NNodes       int // nodes in the job (0 means 1)
	NodeRank     int // this node's index, 0..NNodes-1
	// MasterAddr is node 0's address (default 127.0.0.1). MasterPort is the store's port there;
	// 0 picks a free one, which only works on a single node.
	MasterAddr string
	MasterPort int
	Program    string
	Args       []string
	// Env adds KEY=VALUE entries to every rank's environment (the launcher's own variables
	// win over them).
	Env []string
	// Timeout is the ranks' rendezvous timeout (TESSERA_RDZV_TIMEOUT); 0 leaves their default.
	Timeout time.Duration
	// Grace is the time between SIGTERM and SIGKILL when tearing ranks down (DefaultGrace).
	Grace time.Duration
	// JobID names the job in the store and in handshakes; default TESSERA_RDZV_JOB, else a
	// random id on a single node, else one derived from the master address on several.
	JobID string
	// Stdout and Stderr receive the ranks' prefixed output (default os.Stdout, os.Stderr); Log
	// the launcher's own lines (default Stderr).
	Stdout, Stderr, Log io.Writer
	// Signals, when set, replaces SIGINT/SIGTERM delivered to this process (tests).
	Signals <-chan os.Signal

	// MaxRestarts is how many times a failed group is started again (see the package doc);
	// 0 never restarts and keeps the job id as it is.
	MaxRestarts int
	// Store, when set, is a rendezvous store served elsewhere (tcp://host:port or
	// etcd://...): the launcher serves none and hands this one to the ranks.
	Store string
	// Events, when set, is told of every rank started and ended and of every restart, in
	// order, from one goroutine at a time. A restart's event comes after every rank of the
	// failed attempt has ended and its output was copied, and before any rank of the next
	// attempt starts: a caller may repair things there (the chaos harness undoes its faults).
	Events func(Event)
}

// EventKind says what an Event reports.
type EventKind string

const (
	RankStarted EventKind = "rank_started" // Rank, PID
	RankExited  EventKind = "rank_exited"  // Rank, PID, Code, How
	Restarting  EventKind = "restart"      // Attempt is the attempt about to start; Code, How: the failure
	GivingUp    EventKind = "give_up"      // the last failure, with no restart left (or not restartable)
)

// Event is one thing the launcher did or saw.
type Event struct {
	Kind    EventKind
	Time    time.Time
	Attempt int
	Rank    int
	PID     int
	Code    int    // exit code, 128+signal when killed
	How     string // "was killed by killed", "exited with code 1", or why there is no restart
}

// EnvRestartCount and EnvMaxRestarts are torchelastic's names for the attempt number and the
// restart budget, set for every rank.
const (
	EnvRestartCount = "TORCHELASTIC_RESTART_COUNT"
	EnvMaxRestarts  = "TORCHELASTIC_MAX_RESTARTS"
)

// The variables the launcher sets for every rank.
var rankVars = []string{"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "MASTER_ADDR", "MASTER_PORT",
	rdzv.EnvStore, rdzv.EnvJob, rdzv.EnvTimeout, EnvRestartCount, EnvMaxRestarts}

func (s *Spec) check() error {
	if s.NNodes == 0 {
		s.NNodes = 1
	}
	switch {
	case s.NProcPerNode < 1:
		return errs.New(errs.Input, "launch: --nproc-per-node %d: want at least 1", s.NProcPerNode)
	case s.NNodes < 1:
		return errs.New(errs.Input, "launch: --nnodes %d: want at least 1", s.NNodes)
	case s.NNodes*s.NProcPerNode > rdzv.MaxWorld:
		return errs.New(errs.Input, "launch: %d nodes x %d ranks exceeds the largest world, %d", s.NNodes, s.NProcPerNode, rdzv.MaxWorld)
	case s.NodeRank < 0 || s.NodeRank >= s.NNodes:
		return errs.New(errs.Input, "launch: --node-rank %d outside --nnodes %d (want 0..%d)", s.NodeRank, s.NNodes, s.NNodes-1)
	case s.MasterPort < 0 || s.MasterPort > 65535:
		return errs.New(errs.Input, "launch: --master-port %d is not a port (want 0 to pick one, or 1..65535)", s.MasterPort)
	case s.MasterPort == 65535:
		return errs.New(errs.Input, "launch: --master-port 65535: the job also needs the port above it (MASTER_PORT)")
	case s.NNodes > 1 && s.MasterPort == 0:
		return errs.New(errs.Input, "launch: --master-port is required with --nnodes %d (the other nodes must know it)", s.NNodes)
	case s.NNodes > 1 && s.MasterAddr == "":
		return errs.New(errs.Input, "launch: --master-addr is required with --nnodes %d", s.NNodes)
	case s.Program == "":
		return errs.New(errs.Input, "launch: no program to run")
	case s.Grace < 0 || s.Timeout < 0:
		return errs.New(errs.Input, "launch: negative timeout or grace period")
	case s.MaxRestarts < 0:
		return errs.New(errs.Input, "launch: --max-restarts %d: want 0 or more", s.MaxRestarts)
	case s.Store != "" && !strings.HasPrefix(s.Store, "tcp://") && !strings.HasPrefix(s.Store, "etcd://"):
		return errs.New(errs.Input, "launch: store %q: want tcp://host:port or etcd://host:port[,...][/prefix]", s.Store)
	}
	if s.MasterAddr == "" {
		s.MasterAddr = "127.0.0.1"
	}
	if strings.HasPrefix(s.MasterAddr, "[") && strings.HasSuffix(s.MasterAddr, "]") {
		s.MasterAddr = s.MasterAddr[1 : len(s.MasterAddr)-1]
	}
	if s.MasterAddr == "" || strings.ContainsAny(s.MasterAddr, " \t\n/") {
		return errs.New(errs.Input, "launch: --master-addr %q is not a host name or address", s.MasterAddr)
	}
	for _, kv := range s.Env {
		if k, _, ok := strings.Cut(kv, "="); !ok || k == "" {
			return errs.New(errs.Input, "launch: environment entry %q is not KEY=VALUE", kv)
		}
	}
	if s.Grace == 0 {
		s.Grace = DefaultGrace
	}
	if s.Stdout == nil {
		s.Stdout = os.Stdout
	}
	if s.Stderr == nil {
		s.Stderr = os.Stderr
	}
	if s.Log == nil {
		s.Log = s.Stderr
	}
	if s.JobID == "" {
		s.JobID = os.Getenv(rdzv.EnvJob)
	}
	if s.JobID == "" {
		if s.NNodes > 1 {
			s.JobID = "launch-" + strings.NewReplacer(":", "-", "[", "", "]", "").Replace(s.MasterAddr) + "-" + strconv.Itoa(s.MasterPort)
		} else {
			var b [6]byte
			rand.Read(b[:])
			s.JobID = "launch-" + hex.EncodeToString(b[:])
		}
	}
	return nil
}

// rank is one child process.
type rank struct {
	n     int
	cmd   *exec.Cmd
	pid   int
	outs  []*os.File // our read ends of its stdout and stderr
	ended bool
}

type exited struct {
	rank int
	code int
	how  string
}

// Run starts the ranks of this node and waits for them. exit is the first failing rank's exit
// code (128+signal for a rank killed by a signal), or 0 when every rank succeeded. err is set
// when the launcher itself could not do its job: bad input (E_INPUT), a store that cannot be
// served (E_COMM_INIT), a rank that cannot be started, or ctx ending (E_TIMEOUT); ranks are
// torn down in every case.
func Run(ctx context.Context, spec Spec) (exit int, err error) {
	if err := spec.check(); err != nil {
		return 2, err
	}
	prog, err := exec.LookPath(spec.Program)
	if err != nil {
		return 2, errs.New(errs.Input, "launch: program %q: %v", spec.Program, unwrapExec(err))
	}
	port := spec.MasterPort
	var srv *rdzv.Server
	if spec.NodeRank == 0 && spec.Store == "" {
		listen := net.JoinHostPort(spec.MasterAddr, strconv.Itoa(port))
		if !rdzv.IsLoopback(spec.MasterAddr) {
			listen = net.JoinHostPort("", strconv.Itoa(port))
		}
		srv, err = rdzv.Serve(ctx, listen)
		if err != nil {
			return 3, errs.Wrap(errs.CommInit, err, "launch: the rendezvous store (--master-port %d)", spec.MasterPort)
		}
		defer srv.Close()
		_, p, _ := net.SplitHostPort(srv.Addr())
		port, _ = strconv.Atoi(p)
	}

	masterPort := spec.MasterPort + 1
	if spec.MasterPort == 0 {
		if masterPort, err = freePort(spec.MasterAddr); err != nil {
			return 3, err
		}
	}

	sigs := spec.Signals
	if sigs == nil {
		ch := make(chan os.Signal, 4)
		signal.Notify(ch, syscall.SIGINT, syscall.SIGTERM)
		defer signal.Stop(ch)
		sigs = ch
	}

	world := spec.NNodes * spec.NProcPerNode
	store := spec.Store
	if store == "" {
		store = "tcp://" + net.JoinHostPort(spec.MasterAddr, strconv.Itoa(port))
	}
	base := childEnv(os.Environ(), spec.Env)
	for attempt := 0; ; attempt++ {
		job := spec.JobID
		if spec.MaxRestarts > 0 {
			job += "-a" + strconv.Itoa(attempt)
		}
		l := &launcher{spec: spec, out: &lineWriter{}, attempt: attempt}
		for local := range spec.NProcPerNode {
			n := spec.NodeRank*spec.NProcPerNode + local
			env := append(base[:len(base):len(base)],
				"RANK="+strconv.Itoa(n), "WORLD_SIZE="+strconv.Itoa(world),
				"LOCAL_RANK="+strconv.Itoa(local), "LOCAL_WORLD_SIZE="+strconv.Itoa(spec.NProcPerNode),
				"GROUP_RANK="+strconv.Itoa(spec.NodeRank),
				"MASTER_ADDR="+spec.MasterAddr, "MASTER_PORT="+strconv.Itoa(masterPort),
				rdzv.EnvStore+"="+store, rdzv.EnvJob+"="+job,
				EnvRestartCount+"="+strconv.Itoa(attempt), EnvMaxRestarts+"="+strconv.Itoa(spec.MaxRestarts))
			if spec.Timeout > 0 {
				env = append(env, rdzv.EnvTimeout+"="+spec.Timeout.String())
			}
			if err := l.start(n, prog, env); err != nil {
				l.teardown(syscall.SIGKILL)
				for range l.ranks {
					l.ended(<-l.exits)
				}
				l.finishOutput()
				return 3, err
			}
		}
		exit, err := l.wait(ctx, sigs)
		if exit == 0 && err == nil {
			return 0, nil
		}
		why := ""
		switch {
		case err != nil || l.signalled:
			why = "stopped, not failed: no restart"
		case attempt >= spec.MaxRestarts:
			why = fmt.Sprintf("no restart left (--max-restarts %d)", spec.MaxRestarts)
		}
		if why != "" {
			if spec.MaxRestarts > 0 {
				l.logf("giving up after attempt %d: %s", attempt, why)
			}
			l.event(Event{Kind: GivingUp, Attempt: attempt, Rank: l.first, Code: exit, How: why})
			return exit, err
		}
		l.logf("rank %d failed (exit %d); restarting the group (restart %d of %d)", l.first, exit, attempt+1, spec.MaxRestarts)
		l.event(Event{Kind: Restarting, Attempt: attempt + 1, Rank: l.first, Code: exit, How: l.firstHow})
	}
}

// freePort asks the kernel for a port on host that is free now.
func freePort(host string) (int, error) {
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return 0, errs.New(errs.CommInit, "launch: cannot find a free port on %s: %v", host, err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// childEnv is the launcher's environment without the variables it sets, plus extra.
func childEnv(environ, extra []string) []string {
	out := make([]string, 0, len(environ)+len(extra)+len(rankVars))
	skip := map[string]bool{}
	for _, k := range rankVars {
		skip[k] = true
	}
	for _, kv := range append(environ, extra...) {
		k, _, _ := strings.Cut(kv, "=")
		if !skip[k] {
			out = append(out, kv)
		}
	}
	return out
}

type launcher struct {
	spec    Spec
	attempt int
	ranks   []*rank
	out     *lineWriter
	wg      sync.WaitGroup // output copiers
	exits   chan exited

	first     int    // the first failing rank (-1: none)
	firstHow  string // how it ended
	signalled bool   // a signal to the launcher stopped the job
}

func (l *launcher) event(e Event) {
	if l.spec.Events != nil {
		e.Time = time.Now()
		if e.Attempt == 0 {
			e.Attempt = l.attempt
		}
		l.spec.Events(e)
	}
}

// ended records a rank's end.
func (l *launcher) ended(e exited) {
	r := l.byN(e.rank)
	r.ended = true
	l.event(Event{Kind: RankExited, Rank: e.rank, PID: r.pid, Code: e.code, How: e.how})
}

func (l *launcher) logf(format string, args ...any) {
	l.out.write(l.spec.Log, []byte("[launch] "+fmt.Sprintf(format, args...)+"\n"))
}

func (l *launcher) start(n int, prog string, env []string) error {
	if l.exits == nil {
		l.exits = make(chan exited, l.spec.NProcPerNode)
	}
	cmd := exec.Command(prog, l.spec.Args...)
	cmd.Env = env
	cmd.SysProcAttr = procAttr()
	r := &rank{n: n, cmd: cmd}
	var ours, theirs []*os.File
	for range 2 {
		pr, pw, err := os.Pipe()
		if err != nil {
			closeAll(ours)
			closeAll(theirs)
			return errs.New(errs.Internal, "launch: rank %d: output pipe: %v", n, err)
		}
		ours, theirs = append(ours, pr), append(theirs, pw)
	}
	cmd.Stdout, cmd.Stderr = theirs[0], theirs[1]
	err := cmd.Start()
	closeAll(theirs) // the child holds its own copies now
	if err != nil {
		closeAll(ours)
		return errs.New(errs.CommInit, "launch: cannot start rank %d (%s): %v", n, prog, unwrapExec(err))
	}
	r.pid, r.outs = cmd.Process.Pid, ours
	l.ranks = append(l.ranks, r)
	l.event(Event{Kind: RankStarted, Rank: n, PID: r.pid})
	prefix := []byte(fmt.Sprintf("[rank %d] ", n))
	for i, w := range []io.Writer{l.spec.Stdout, l.spec.Stderr} {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			l.out.copyLines(w, ours[i], prefix)
		}()
	}
	go func() {
		err := cmd.Wait()
		l.exits <- exitOf(n, cmd.ProcessState, err)
	}()
	return nil
}

func closeAll(fs []*os.File) {
	for _, f := range fs {
		f.Close()
	}
}

func exitOf(n int, ps *os.ProcessState, err error) exited {
	if ps == nil {
		return exited{rank: n, code: 1, how: fmt.Sprintf("could not be waited for: %v", err)}
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return exited{rank: n, code: 128 + int(ws.Signal()), how: "was killed by " + ws.Signal().String()}
	}
	return exited{rank: n, code: ps.ExitCode(), how: fmt.Sprintf("exited with code %d", ps.ExitCode())}
}

// wait supervises the ranks until all have ended.
func (l *launcher) wait(ctx context.Context, sigs <-chan os.Signal) (int, error) {
	running := len(l.ranks)
	first := -1
	l.first = -1
	exit := 0
	var runErr error
	var killTimer <-chan time.Time
	stopping := false
	stop := func(sig syscall.Signal) {
		l.teardown(sig)
		if !stopping {
			stopping = true
			killTimer = time.After(l.spec.Grace)
		}
	}
	done := ctx.Done()
	for running > 0 {
		select {
		case e := <-l.exits:
			running--
			l.ended(e)
			if e.code != 0 && first < 0 {
				first, exit = e.rank, e.code
				l.first, l.firstHow = e.rank, e.how
				if running > 0 && !stopping {
					l.logf("rank %d %s; terminating the other ranks", e.rank, e.how)
					stop(syscall.SIGTERM)
				} else {
					l.logf("rank %d %s", e.rank, e.how)
				}
			}
		case s := <-sigs:
			sig, ok := s.(syscall.Signal)
			if !ok {
				sig = syscall.SIGTERM
			}
			if stopping {
				l.logf("%s again: killing the ranks", sig)
				l.teardown(syscall.SIGKILL)
				continue
			}
			l.logf("%s: forwarding it to the ranks", sig)
			l.signalled = true
			stop(sig)
		case <-done:
			done = nil
			runErr = errs.Wrap(errs.Timeout, ctx.Err(), "launch: the job ran out of time or was cancelled")
			l.logf("%v: terminating the ranks", ctx.Err())
			stop(syscall.SIGTERM)
		case <-killTimer:
			killTimer = nil
			l.logf("ranks still running %s after the signal: killing them", l.spec.Grace)
			l.teardown(syscall.SIGKILL)
		}
	}
	// Anything a rank left behind in its process group goes with it.
	for _, r := range l.ranks {
		signalGroup(r.pid, syscall.SIGKILL)
	}
	l.finishOutput()
	if runErr != nil && exit == 0 {
		exit = 1
	}
	return exit, runErr
}

func (l *launcher) byN(n int) *rank {
	for _, r := range l.ranks {
		if r.n == n {
			return r
		}
	}
	return nil
}

// teardown signals every rank's process group, ended ranks included (their children may
// still run).
func (l *launcher) teardown(sig syscall.Signal) {
	for _, r := range l.ranks {
		signalGroup(r.pid, sig)
	}
}

// finishOutput waits for the ranks' last lines, then closes the pipes.
func (l *launcher) finishOutput() {
	done := make(chan struct{})
	go func() { l.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(outputGrace):
		for _, r := range l.ranks {
			closeAll(r.outs)
		}
		<-done
	}
	for _, r := range l.ranks {
		closeAll(r.outs)
	}
}

func unwrapExec(err error) error {
	if e, ok := err.(*exec.Error); ok {
		return e.Err
	}
	if e, ok := err.(*os.PathError); ok {
		return e.Err
	}
	return err
}
