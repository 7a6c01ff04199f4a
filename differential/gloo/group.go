package gloo

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/tessera-qa/tessera-qa/differential"
	"github.com/tessera-qa/tessera-qa/engine/errs"
)

// scriptName is the rank script as it is written into the group's directory.
const scriptName = "gloo_rank.py"

// settle is how long the group keeps listening after the first rank fails, so that the rank
// that died first is told apart from the peers that then lose their connection to it.
const settle = 300 * time.Millisecond

// importAllowance is the least time a rank gets to import torch and say hello: on a loaded
// 2-core machine three interpreters importing torch at once took over 8 s (CI, 2026-12-02),
// which the progress timeout alone called a hang. After hello, Config.Timeout bounds every
// step again.
const importAllowance = 60 * time.Second

// startup is the deadline for the first sign of life (torch imported).
func startup(cfg Config) time.Duration { return max(cfg.Timeout, importAllowance) }

// reapWait bounds the wait for a killed rank to be reaped.
const reapWait = 5 * time.Second

// job is DIR/job.json, what every rank reads.
type job struct {
	Mode     string  `json:"mode"` // "collective" or "bench"
	Op       string  `json:"op"`
	Red      string  `json:"red"`
	Root     int     `json:"root"`
	DType    string  `json:"dtype"`
	World    int     `json:"world"`
	TimeoutS float64 `json:"timeout_s"`
	Counts   []int   `json:"counts,omitempty"` // bench: elements of the op's whole buffer per size
	Iters    int     `json:"iters,omitempty"`
	Warmup   int     `json:"warmup,omitempty"`
	// Items: the collectives of a "batch" job, run in order in one group (batch.go).
	Items []item `json:"items,omitempty"`
}

// item is one collective of a batch job.
type item struct {
	Op    string `json:"op"`
	Red   string `json:"red"`
	Root  int    `json:"root"`
	DType string `json:"dtype"`
}

func (j job) steps() int {
	switch j.Mode {
	case "bench":
		return len(j.Counts)
	case "batch":
		return len(j.Items)
	}
	return 1
}

// message is one stdout line of a rank.
type message struct {
	Type   string    `json:"type"`
	Step   int       `json:"step"`
	Times  []float64 `json:"times"`
	Where  string    `json:"where"`
	Msg    string    `json:"msg"`
	Error  string    `json:"error"`
	Torch  string    `json:"torch"`
	Numpy  string    `json:"numpy"`
	Python string    `json:"python"`
}

// unsupported is a refusal by gloo, turned into E_UNSUPPORTED by the caller.
type unsupported struct{ msg string }

func (u *unsupported) Error() string { return u.msg }

// Progress of a rank, as an ordered number: the group's deadline moves on whenever the
// slowest rank advances, and a timeout blames the ranks furthest behind.
const (
	pStarted = iota // process started, no hello yet (python starting, torch importing)
	pHello          // torch imported
	pRdzv           // joining the group
	pReady          // group initialised
	pSteps          // pSteps+2k: in step k; pSteps+2k+1: step k finished
)

func pDone(steps int) int { return pSteps + 2*steps }

// where describes a progress value for messages.
func where(p, steps int, mode string) string {
	stepName := func(k int) string {
		if mode == "collective" {
			return "the collective"
		}
		if mode == "batch" {
			return "collective " + strconv.Itoa(k) + " of the batch"
		}
		return "bench size " + strconv.Itoa(k)
	}
	switch {
	case p == pStarted:
		return "before importing torch"
	case p == pHello:
		return "before the rendezvous"
	case p == pRdzv:
		return "in the rendezvous"
	case p == pReady:
		return "before " + stepName(0)
	case p >= pDone(steps):
		return "after finishing"
	case (p-pSteps)%2 == 0:
		return "in " + stepName((p-pSteps)/2)
	}
	k := (p - pSteps) / 2
	if k+1 < steps {
		return "between " + stepName(k) + " and " + stepName(k+1)
	}
	return "writing its output"
}

// rankProc is one running rank.
type rankProc struct {
	rank     int
	cmd      *exec.Cmd
	stderr   *differential.Tail
	exited   chan struct{} // closed once Wait returned
	waitErr  error         // valid after exited is closed
	progress int
	done     bool   // said "done"
	gone     bool   // its exit event arrived
	failure  string // why it failed, "" if it did not
	died     bool   // it exited or crashed without reporting an error itself
	where    string // the error line's where: init, comm, io
}

type event struct {
	rank int
	line []byte
	exit bool
}

// started is called with each rank's PID (tests check that none is left behind).
var started func(pid int)

// env is the ranks' environment: unbuffered Python, and gloo on loopback unless the caller
// chose an interface (every rank runs on this machine; gloo binds ephemeral ports and
// exchanges them through the FileStore).
func env() []string {
	e := append(os.Environ(), "PYTHONUNBUFFERED=1", "PYTHONDONTWRITEBYTECODE=1")
	if os.Getenv("GLOO_SOCKET_IFNAME") == "" {
		if _, err := os.Stat("/sys/class/net/lo"); err == nil {
			e = append(e, "GLOO_SOCKET_IFNAME=lo")
		}
	}
	return e
}

// spawn starts one interpreter on the script in its own process group.
func spawn(cfg Config, dir string, rank int, args []string, events chan<- event, stop <-chan struct{}) (*rankProc, error) {
	cmd := exec.Command(cfg.Python, append([]string{"-B", "-u", filepath.Join(dir, scriptName)}, args...)...)
	cmd.Dir = dir
	cmd.Env = env()
	cmd.SysProcAttr = procAttr()
	cmd.WaitDelay = 2 * time.Second
	p := &rankProc{rank: rank, cmd: cmd, stderr: differential.NewTail(4096, cfg.Log), exited: make(chan struct{})}
	cmd.Stderr = p.stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, errs.New(errs.Internal, "gloo: rank %d: %v", rank, err)
	}
	if err := cmd.Start(); err != nil {
		return nil, noPython(cfg, fmt.Sprintf("cannot run %s: %v", cfg.Python, err))
	}
	if started != nil {
		started(cmd.Process.Pid)
	}
	go func() {
		r := bufio.NewReaderSize(stdout, 1<<16)
		for {
			line, err := r.ReadBytes('\n')
			if len(strings.TrimSpace(string(line))) > 0 {
				select {
				case events <- event{rank: rank, line: line}:
				case <-stop: // nobody listens any more: drain to EOF
				}
			}
			if err != nil {
				break
			}
		}
		p.waitErr = cmd.Wait()
		close(p.exited)
		select {
		case events <- event{rank: rank, exit: true}:
		case <-stop:
		}
	}()
	return p, nil
}

// kill ends the rank's whole process group and waits (bounded) until it is reaped.
func (p *rankProc) kill() {
	select {
	case <-p.exited:
	default:
		killGroup(p.cmd.Process.Pid)
		_ = p.cmd.Process.Kill()
	}
}

func (p *rankProc) reap(deadline time.Time) {
	select {
	case <-p.exited:
	case <-time.After(time.Until(deadline)):
	}
}

func (p *rankProc) exitStatus() string {
	select {
	case <-p.exited:
	default:
		return "still running"
	}
	var ee *exec.ExitError
	switch {
	case errors.As(p.waitErr, &ee):
		return ee.ProcessState.String()
	case p.waitErr != nil:
		return p.waitErr.Error()
	}
	return "exit status 0"
}

func noPython(cfg Config, why string) error {
	hint := "install python3-torch (ci/setup.d/20-torch.sh) or name an interpreter with $" + differential.PythonEnv
	return errs.New(errs.NoDevice, "gloo oracle unavailable: %s; %s", why, hint)
}

// newDir makes the group's temporary directory and writes the script into it.
func newDir(cfg Config) (string, error) {
	dir, err := os.MkdirTemp(cfg.WorkDir, "tessera-gloo-")
	if err != nil {
		return "", errs.New(errs.Input, "gloo: temporary directory: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, scriptName), script, 0o644); err != nil {
		os.RemoveAll(dir)
		return "", errs.New(errs.Input, "gloo: write %s: %v", scriptName, err)
	}
	return dir, nil
}

// run starts cfg.World ranks on job j, waits for all of them under the deadlines, and hands
// the directory and every step's timings ([step][rank]) to collect. prepare writes the
// inputs first. Every rank's process group is killed on every path out.
func run(ctx context.Context, cfg Config, j job, what string,
	prepare func(dir string) error, collect func(dir string, times [][][]float64, refused map[int]string) error) (err error) {
	if ctx.Err() != nil {
		return errs.New(errs.TimeoutComm, "gloo %s: not started, the caller's context has ended (%v)", what, ctx.Err())
	}
	dir, err := newDir(cfg)
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	j.TimeoutS = cfg.Timeout.Seconds()
	b, _ := json.Marshal(j)
	if err := os.WriteFile(filepath.Join(dir, "job.json"), b, 0o644); err != nil {
		return errs.New(errs.Input, "gloo: write job: %v", err)
	}
	if err := prepare(dir); err != nil {
		return err
	}

	n, steps := j.World, j.steps()
	events := make(chan event, 4*n)
	stop := make(chan struct{})
	var ranks []*rankProc
	defer func() {
		close(stop)
		for _, p := range ranks {
			p.kill()
		}
		deadline := time.Now().Add(reapWait)
		for _, p := range ranks {
			p.reap(deadline)
		}
	}()
	for r := range n {
		p, err := spawn(cfg, dir, r, []string{dir, strconv.Itoa(r)}, events, stop)
		if err != nil {
			return err
		}
		ranks = append(ranks, p)
	}

	refused := map[int]string{} // batch: the items gloo refused, by step
	times := make([][][]float64, steps)
	for k := range times {
		times[k] = make([][]float64, n)
	}
	minProgress := func() int {
		m := pDone(steps) + 1
		for _, p := range ranks {
			m = min(m, p.progress)
		}
		return m
	}
	timer := time.NewTimer(startup(cfg))
	defer timer.Stop()
	var settling <-chan time.Time
	last := minProgress()
	limit := func() time.Duration {
		if last < pHello {
			return startup(cfg)
		}
		return cfg.Timeout
	}
	for {
		select {
		case <-ctx.Done():
			if settling != nil {
				return blameFailed(ranks, steps, j.Mode, what)
			}
			return blameStuck(ranks, steps, j.Mode, what, fmt.Sprintf("the caller's context ended (%v)", ctx.Err()))
		case <-timer.C:
			if settling != nil {
				return blameFailed(ranks, steps, j.Mode, what)
			}
			return blameStuck(ranks, steps, j.Mode, what, fmt.Sprintf("no progress within %s", limit()))
		case <-settling:
			return blameFailed(ranks, steps, j.Mode, what)
		case ev := <-events:
			p := ranks[ev.rank]
			if ev.exit {
				p.gone = true
				if (!p.done || p.waitErr != nil) && p.failure == "" {
					if p.progress == pStarted {
						return noPython(cfg, fmt.Sprintf("%s exited before saying whether it has torch (%s)%s", cfg.Python, p.exitStatus(), stderrNote(p)))
					}
					p.failure, p.died = p.exitStatus(), true
				}
			} else {
				var m message
				if jerr := json.Unmarshal(ev.line, &m); jerr != nil {
					m = message{Type: "error", Where: "io", Msg: fmt.Sprintf("not a protocol line: %.200q", ev.line)}
				}
				switch m.Type {
				case "hello":
					if m.Error != "" {
						return noPython(cfg, fmt.Sprintf("%s (python %s) cannot run gloo: %s", cfg.Python, m.Python, m.Error))
					}
					p.progress = max(p.progress, pHello)
				case "rdzv":
					p.progress = max(p.progress, pRdzv)
				case "ready":
					p.progress = max(p.progress, pReady)
				case "enter":
					p.progress = max(p.progress, pSteps+2*m.Step)
				case "step":
					p.progress = max(p.progress, pSteps+2*m.Step+1)
					if m.Step >= 0 && m.Step < steps {
						times[m.Step][ev.rank] = m.Times
					}
				case "done":
					p.progress, p.done = pDone(steps), true
				case "unsupported":
					return &unsupported{msg: m.Msg}
				case "refused":
					refused[m.Step] = m.Msg
				case "error":
					if p.failure == "" {
						p.failure, p.where = m.Msg, m.Where
					}
				}
			}
			if p.failure != "" && settling == nil {
				settling = time.After(settle)
			}
		}
		if settling != nil {
			continue
		}
		if all(ranks, func(p *rankProc) bool { return p.done && p.gone }) {
			return collect(dir, times, refused)
		}
		if m := minProgress(); m > last {
			last = m
			if !timer.Stop() {
				select {
				case <-timer.C:
				default:
				}
			}
			timer.Reset(limit())
		}
	}
}

func all(ranks []*rankProc, f func(*rankProc) bool) bool {
	for _, p := range ranks {
		if !f(p) {
			return false
		}
	}
	return true
}

func stderrNote(p *rankProc) string {
	if s := p.stderr.String(); s != "" {
		return "; stderr: " + s
	}
	return ""
}

// codeFor is E_COMM_INIT while a culprit had not joined the group, E_TIMEOUT_COMM after.
func codeFor(culprits []*rankProc) errs.Code {
	for _, p := range culprits {
		if p.progress < pReady {
			return errs.CommInit
		}
	}
	return errs.TimeoutComm
}

func rankList(ps []*rankProc) string {
	var s []string
	for _, p := range ps {
		s = append(s, strconv.Itoa(p.rank))
	}
	if len(s) == 1 {
		return "rank " + s[0]
	}
	return "ranks " + strings.Join(s, ", ")
}

// blameStuck names the ranks furthest behind when the group stopped making progress.
func blameStuck(ranks []*rankProc, steps int, mode, what, why string) error {
	var waiting []*rankProc
	for _, p := range ranks {
		if !p.done {
			waiting = append(waiting, p)
		}
	}
	if len(waiting) == 0 { // all said done, one has not exited
		waiting = ranks
	}
	low := waiting[0].progress
	for _, p := range waiting {
		low = min(low, p.progress)
	}
	var culprits, others []*rankProc
	for _, p := range ranks {
		if p.progress == low && !p.done {
			culprits = append(culprits, p)
		} else {
			others = append(others, p)
		}
	}
	msg := fmt.Sprintf("gloo %s: %s stuck %s: %s", what, rankList(culprits), where(low, steps, mode), why)
	if len(others) > 0 {
		var parts []string
		for _, p := range others {
			parts = append(parts, fmt.Sprintf("rank %d %s", p.rank, where(p.progress, steps, mode)))
		}
		msg += " (" + strings.Join(parts, ", ") + ")"
	}
	msg += "; killed the group" + tails(culprits)
	return errs.New(codeFor(culprits), "%s", msg)
}

// blameFailed names the ranks that failed: those that died without a word first, the ranks
// that then reported an error (often the lost connection to the dead one) after them.
func blameFailed(ranks []*rankProc, steps int, mode, what string) error {
	var died, reported []*rankProc
	for _, p := range ranks {
		switch {
		case p.failure == "":
		case p.died:
			died = append(died, p)
		default:
			reported = append(reported, p)
		}
	}
	culprits, witnesses := died, reported
	if len(died) == 0 {
		culprits, witnesses = reported, nil
	}
	var parts []string
	for _, p := range culprits {
		if p.died {
			parts = append(parts, fmt.Sprintf("rank %d exited %s (%s)", p.rank, where(p.progress, steps, mode), p.failure))
		} else {
			parts = append(parts, fmt.Sprintf("rank %d failed %s: %s", p.rank, where(p.progress, steps, mode), p.failure))
		}
	}
	msg := fmt.Sprintf("gloo %s: %s", what, strings.Join(parts, "; "))
	if len(witnesses) > 0 {
		var ws []string
		for _, p := range witnesses {
			ws = append(ws, fmt.Sprintf("rank %d: %s", p.rank, p.failure))
		}
		msg += " (then " + strings.Join(ws, "; ") + ")"
	}
	msg += "; killed the group" + tails(culprits)
	code := codeFor(culprits)
	if !culprits[0].died {
		switch culprits[0].where {
		case "init":
			code = errs.CommInit
		case "io":
			code = errs.Internal
		}
	}
	return errs.New(code, "%s", msg)
}

// tails is the stderr tail of up to three ranks.
func tails(ps []*rankProc) string {
	var s string
	for _, p := range ps[:min(3, len(ps))] {
		if t := p.stderr.String(); t != "" {
			s += fmt.Sprintf("; stderr of rank %d: %s", p.rank, t)
		}
	}
	return s
}

// Info is what the interpreter reported: versions of Python, torch and numpy.
type Info struct {
	Python        string // the interpreter's path
	PythonVersion string
	Torch         string
	Numpy         string
}

// Probe starts the interpreter once to see whether it can run gloo: E_NO_DEVICE (with the
// reason) when it cannot import torch with the gloo backend, so callers can skip.
func Probe(ctx context.Context, cfg Config) (Info, error) {
	cfg = cfg.withDefaults()
	dir, err := newDir(cfg)
	if err != nil {
		return Info{}, err
	}
	defer os.RemoveAll(dir)
	events := make(chan event, 4)
	stop := make(chan struct{})
	p, err := spawn(cfg, dir, 0, []string{"hello"}, events, stop)
	if err != nil {
		return Info{}, err
	}
	defer func() {
		close(stop)
		p.kill()
		p.reap(time.Now().Add(reapWait))
	}()
	timer := time.NewTimer(startup(cfg))
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return Info{}, errs.New(errs.Timeout, "gloo: probing %s: %v", cfg.Python, ctx.Err())
		case <-timer.C:
			return Info{}, errs.New(errs.Timeout, "gloo: %s did not say within %s whether it has torch (importing torch hangs?)%s", cfg.Python, startup(cfg), stderrNote(p))
		case ev := <-events:
			if ev.exit {
				return Info{}, noPython(cfg, fmt.Sprintf("%s exited before saying whether it has torch (%s)%s", cfg.Python, p.exitStatus(), stderrNote(p)))
			}
			var m message
			if json.Unmarshal(ev.line, &m) != nil || m.Type != "hello" {
				return Info{}, noPython(cfg, fmt.Sprintf("%s printed %.200q instead of a hello", cfg.Python, ev.line))
			}
			if m.Error != "" {
				return Info{}, noPython(cfg, fmt.Sprintf("%s (python %s) cannot run gloo: %s", cfg.Python, m.Python, m.Error))
			}
			return Info{Python: cfg.Python, PythonVersion: m.Python, Torch: m.Torch, Numpy: m.Numpy}, nil
		}
	}
}
