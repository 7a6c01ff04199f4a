package differential

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/errs"
)

// Defaults of Config.
const (
	DefaultTimeout      = 2 * time.Minute
	DefaultStartTimeout = 2 * time.Minute
	// maxRestarts bounds how often a crashed or hung oracle is started again, so that an
	// oracle that dies on every request ends a run instead of looping.
	maxRestarts = 3
)

// Config says which oracle to start.
type Config struct {
	// Framework is "torch" or "jax".
	Framework string
	// Python is the interpreter to use; "" means $TESSERA_QA_PYTHON, else the first of python3
	// on PATH and /usr/bin/python3 that can import the framework.
	Python string
	// Timeout bounds each request (0: DefaultTimeout); StartTimeout the wait for the hello
	// line, which includes importing the framework (0: DefaultStartTimeout).
	Timeout, StartTimeout time.Duration
	// Log, when set, receives the oracle's stderr (framework warnings). Error messages carry
	// its tail either way.
	Log io.Writer
}

// Oracle is one long-lived oracle process serving requests one at a time. It is safe for
// concurrent use; requests are serialized.
type Oracle struct {
	cfg    Config
	python string
	hello  Hello
	dir    string

	mu       sync.Mutex
	proc     *process // nil after a crash or timeout: the next Eval starts a new one
	nextID   int64
	restarts int
	closed   bool
}

// Start starts the oracle. When no interpreter can import the framework the error is
// E_NO_DEVICE (the environment asked for is missing: exit 3), listing each interpreter tried
// and why it failed.
func Start(cfg Config) (*Oracle, error) {
	if _, ok := Frameworks[cfg.Framework]; !ok {
		return nil, errs.New(errs.Input, "unknown oracle %q (want torch or jax)", cfg.Framework)
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.StartTimeout <= 0 {
		cfg.StartTimeout = DefaultStartTimeout
	}
	dir, err := writeScripts()
	if err != nil {
		return nil, err
	}
	var tried []string
	cands := candidates(cfg.Python)
	for _, c := range cands {
		p, h, err := spawn(c.path, dir, cfg.Framework, cfg.StartTimeout, cfg.Log)
		switch {
		case err != nil && errs.CodeOf(err) == errs.Timeout:
			os.RemoveAll(dir)
			return nil, err
		case err != nil:
			tried = append(tried, message(err))
			continue
		case h.Error != "":
			p.quit(5 * time.Second)
			tried = append(tried, fmt.Sprintf("%s (python %s): %s", c.path, h.Python, h.Error))
			continue
		}
		return &Oracle{cfg: cfg, python: c.path, hello: h, dir: dir, proc: p}, nil
	}
	os.RemoveAll(dir)
	hint := "install python3-torch (ci/setup.d/20-torch.sh), or name an interpreter with --python or $" + PythonEnv
	switch {
	case len(cands) == 1 && cands[0].explicit:
		hint = "the interpreter named by --python or $" + PythonEnv + " was the only one tried"
	case cfg.Framework == "jax":
		hint = "name an interpreter that has jax with --python or $" + PythonEnv
	}
	return nil, errs.New(errs.NoDevice, "oracle %s unavailable: no interpreter can import %s (%s); %s",
		cfg.Framework, cfg.Framework, strings.Join(tried, "; "), hint)
}

// message is an error's text without its code, for lists inside another coded error.
func message(err error) string {
	var e *errs.Error
	if errors.As(err, &e) {
		return e.Msg
	}
	return err.Error()
}

// Hello is what the oracle reported at start: framework version, devices, Python version.
func (o *Oracle) Hello() Hello { return o.hello }

// Python is the interpreter the oracle runs under.
func (o *Oracle) Python() string { return o.python }

// Describe is a one-line description: "torch 1.13.0 (python 3.11.2 /usr/bin/python3)".
func (o *Oracle) Describe() string {
	return fmt.Sprintf("%s %s (python %s %s)", o.hello.Framework, o.hello.Version, o.hello.Python, o.python)
}

// Target is where and how the oracle computes a request.
type Target struct {
	// Device is "cpu" or "cuda".
	Device string
	// Native asks for the framework's own 16-bit float kernels even where they round
	// intermediates or accumulate in the storage dtype, and Tessera's contract (compute in f32,
	// round once) does not; the mapping's f32 upcasts are then off. It exists to show those
	// differences (suites/differential), not to judge the engine.
	Native bool
}

// Eval sends one request holding cases and returns one result per case, in order. A case the
// oracle cannot compute comes back with its Error set; the error return is for the request as
// a whole: E_TIMEOUT when the oracle does not answer within the timeout (it is killed), E_INPUT
// when it crashed or broke the protocol. Either way the next Eval starts a fresh process.
func (o *Oracle) Eval(t Target, cases []WireCase) ([]WireResult, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed {
		return nil, errs.New(errs.Input, "oracle %s: already closed", o.hello.Framework)
	}
	if len(cases) == 0 {
		return nil, nil
	}
	if o.hello.Protocol < 2 {
		for _, c := range cases {
			if c.Grad != nil {
				return nil, errs.New(errs.Unsupported, "oracle %s speaks protocol %d; gradient case %s needs protocol 2", o.hello.Framework, o.hello.Protocol, c.Name)
			}
		}
	}
	if err := o.ensure(); err != nil {
		return nil, err
	}
	o.nextID++
	id := o.nextID
	what := describeCases(cases)
	sent := o.proc.send(request{Type: "eval", ID: id, Device: t.Device, Native: t.Native, Cases: cases})
	deadline := time.Now().Add(o.cfg.Timeout)
	for {
		line, err := o.proc.next(time.Until(deadline))
		if err != nil {
			return nil, o.fail(err, id, what, sent)
		}
		var r response
		if err := json.Unmarshal(line, &r); err != nil {
			return nil, o.broken(fmt.Sprintf("request %d (%s): answer is not JSON: %.200q", id, what, line))
		}
		if r.ID != nil && *r.ID != id {
			continue // an answer to an earlier request that timed out on our side
		}
		switch r.Type {
		case "result":
			if len(r.Results) != len(cases) {
				return nil, o.broken(fmt.Sprintf("request %d (%s): %d results for %d cases", id, what, len(r.Results), len(cases)))
			}
			return r.Results, nil
		case "error":
			return nil, errs.New(errs.Input, "oracle %s rejected request %d (%s): %s", o.hello.Framework, id, what, r.Error)
		}
		return nil, o.broken(fmt.Sprintf("request %d (%s): unexpected %q line", id, what, r.Type))
	}
}

// ensure restarts the process after a crash or timeout, a bounded number of times.
func (o *Oracle) ensure() error {
	if o.proc != nil {
		return nil
	}
	if o.restarts >= maxRestarts {
		return errs.New(errs.Input, "oracle %s: not restarted again after %d crashes or timeouts", o.hello.Framework, o.restarts)
	}
	o.restarts++
	p, h, err := spawn(o.python, o.dir, o.cfg.Framework, o.cfg.StartTimeout, o.cfg.Log)
	if err != nil {
		return errs.Wrap(errs.Input, err, "oracle %s: restart %d", o.hello.Framework, o.restarts)
	}
	if h.Error != "" {
		p.kill()
		return errs.New(errs.Input, "oracle %s: restart %d: %s", o.hello.Framework, o.restarts, h.Error)
	}
	o.proc = p
	return nil
}

// fail turns a missing answer into the request's error and drops the process.
func (o *Oracle) fail(err error, id int64, what string, sent <-chan error) error {
	p := o.proc
	o.proc = nil
	if errs.CodeOf(err) == errs.Timeout {
		p.kill()
		return errs.New(errs.Timeout, "oracle %s gave no answer to request %d (%s) within %s; killed it%s",
			o.hello.Framework, id, what, o.cfg.Timeout, stderrNote(p))
	}
	detail := p.exitDetail()
	select {
	case werr := <-sent:
		if werr != nil {
			detail += "; writing the request: " + werr.Error()
		}
	default:
	}
	p.kill()
	return errs.New(errs.Input, "oracle %s (%s) exited during request %d (%s)%s", o.hello.Framework, o.python, id, what, detail)
}

// broken drops a process that broke the protocol.
func (o *Oracle) broken(msg string) error {
	p := o.proc
	o.proc = nil
	p.kill()
	return errs.New(errs.Input, "oracle %s broke the protocol: %s%s", o.hello.Framework, msg, stderrNote(p))
}

func stderrNote(p *process) string {
	if s := p.stderr.String(); s != "" {
		return "; stderr: " + s
	}
	return ""
}

// Close asks the oracle to quit (killing it after a grace period) and removes its scripts.
func (o *Oracle) Close() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed {
		return nil
	}
	o.closed = true
	if o.proc != nil {
		o.proc.quit(5 * time.Second)
		o.proc = nil
	}
	return os.RemoveAll(o.dir)
}

// describeCases names what a request computes, for error messages: "ops softmax, exp; 12
// cases from softmax/bf16/1x7".
func describeCases(cases []WireCase) string {
	var ops []string
	for _, c := range cases {
		for _, n := range c.Nodes {
			if !slices.Contains(ops, n.Op) {
				ops = append(ops, n.Op)
			}
		}
	}
	if len(ops) > 6 {
		ops = append(ops[:6], "...")
	}
	s := "op " + strings.Join(ops, ", ")
	if len(ops) > 1 {
		s = "ops " + strings.Join(ops, ", ")
	}
	for _, c := range cases {
		if c.Grad != nil {
			s += " (with gradients)"
			break
		}
	}
	if len(cases) == 1 {
		return s + "; case " + cases[0].Name
	}
	return fmt.Sprintf("%s; %d cases from %s", s, len(cases), cases[0].Name)
}
