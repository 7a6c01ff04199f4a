package differential

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/errs"
)

// process is one running oracle interpreter. Its stdout is read by one goroutine that hands
// each line to lines and closes lines at EOF, so a reader can always wait with a timeout.
type process struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  chan []byte
	stop   chan struct{} // closed by kill: the reader drops lines nobody will read
	stopMu sync.Once
	stderr *tail
	exited chan struct{} // closed once Wait has returned
	waitMu sync.Mutex
	result error // Wait's error, valid after exited is closed
}

// spawn starts python on the framework's script in dir and reads its hello line.
func spawn(python, dir, framework string, startTimeout time.Duration, log io.Writer) (*process, Hello, error) {
	script := filepath.Join(dir, Frameworks[framework])
	cmd := exec.Command(python, "-B", "-u", script)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "PYTHONUNBUFFERED=1", "PYTHONDONTWRITEBYTECODE=1")
	p := &process{cmd: cmd, lines: make(chan []byte, 1), stop: make(chan struct{}), stderr: newTail(4096, log), exited: make(chan struct{})}
	cmd.Stderr = p.stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, Hello{}, errs.New(errs.Input, "oracle %s: %v", framework, err)
	}
	if p.stdin, err = cmd.StdinPipe(); err != nil {
		return nil, Hello{}, errs.New(errs.Input, "oracle %s: %v", framework, err)
	}
	if err := cmd.Start(); err != nil {
		return nil, Hello{}, errs.New(errs.Input, "cannot run %s: %v", python, err)
	}
	go p.read(stdout)
	line, err := p.next(startTimeout)
	if err != nil {
		p.kill()
		if errs.CodeOf(err) == errs.Timeout {
			return nil, Hello{}, errs.New(errs.Timeout, "%s: no hello from the %s oracle within %s (importing %s hangs?)", python, framework, startTimeout, framework)
		}
		return nil, Hello{}, errs.New(errs.Input, "%s: the %s oracle exited before its hello%s", python, framework, p.exitDetail())
	}
	var h Hello
	if err := json.Unmarshal(line, &h); err != nil || h.Type != "hello" {
		p.kill()
		return nil, Hello{}, errs.New(errs.Input, "%s: the %s oracle's first line is not a hello: %.200q", python, framework, line)
	}
	// A hello that reports a missing framework is read whatever its version: it says why.
	if h.Error == "" && (h.Protocol < MinProtocol || h.Protocol > Protocol) {
		p.kill()
		return nil, Hello{}, errs.New(errs.Input, "%s: the %s oracle speaks protocol %d, this build %d to %d", python, framework, h.Protocol, MinProtocol, Protocol)
	}
	return p, h, nil
}

func (p *process) read(stdout io.Reader) {
	r := bufio.NewReaderSize(stdout, 1<<16)
	for {
		line, err := r.ReadBytes('\n')
		if len(strings.TrimSpace(string(line))) > 0 {
			select {
			case p.lines <- line:
			case <-p.stop: // a late answer after a timeout: keep draining to EOF
			}
		}
		if err != nil {
			close(p.lines)
			p.wait()
			return
		}
	}
}

func (p *process) wait() {
	p.waitMu.Lock()
	defer p.waitMu.Unlock()
	select {
	case <-p.exited:
		return
	default:
	}
	p.result = p.cmd.Wait()
	close(p.exited)
}

// next returns the next stdout line: E_TIMEOUT when none comes within d, E_INPUT when the
// process closed its stdout (it exited or crashed).
func (p *process) next(d time.Duration) ([]byte, error) {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case line, ok := <-p.lines:
		if !ok {
			return nil, errs.New(errs.Input, "oracle closed its output")
		}
		return line, nil
	case <-timer.C:
		return nil, errs.New(errs.Timeout, "no answer within %s", d)
	}
}

// send writes one request line. A hung oracle stops reading and a large request then blocks
// in Write, so the write runs beside the caller's timeout instead of in front of it.
func (p *process) send(v any) <-chan error {
	done := make(chan error, 1)
	b, err := json.Marshal(v)
	if err != nil {
		done <- errs.New(errs.Input, "encode request: %v", err)
		return done
	}
	go func() {
		_, err := p.stdin.Write(append(b, '\n'))
		done <- err
	}()
	return done
}

// kill ends the process and waits for it, so no zombie or reader goroutine is left behind.
func (p *process) kill() {
	p.stopMu.Do(func() { close(p.stop) })
	if p.cmd.Process != nil {
		_ = p.cmd.Process.Kill()
	}
	p.stdin.Close()
	select {
	case <-p.exited:
	case <-time.After(5 * time.Second):
	}
}

// quit asks the process to exit, and kills it if it has not within grace.
func (p *process) quit(grace time.Duration) {
	select {
	case <-p.send(request{Type: "quit"}):
	case <-time.After(grace):
	}
	p.stdin.Close()
	select {
	case <-p.exited:
	case <-time.After(grace):
		p.kill()
	}
}

// exitDetail describes how the process ended, for error messages: ": exit status 1; stderr: ...".
func (p *process) exitDetail() string {
	select {
	case <-p.exited:
	case <-time.After(2 * time.Second):
	}
	var parts []string
	select {
	case <-p.exited:
		var ee *exec.ExitError
		switch {
		case errors.As(p.result, &ee):
			parts = append(parts, ee.ProcessState.String())
		case p.result != nil:
			parts = append(parts, p.result.Error())
		default:
			parts = append(parts, "exit status 0")
		}
	default:
		parts = append(parts, "still running")
	}
	if s := p.stderr.String(); s != "" {
		parts = append(parts, "stderr: "+s)
	}
	return ": " + strings.Join(parts, "; ")
}

// tail keeps the last n bytes written to it (the end of a traceback is the useful part) and
// forwards everything to an optional log.
type tail struct {
	mu  sync.Mutex
	n   int
	buf []byte
	log io.Writer
}

func newTail(n int, log io.Writer) *tail { return &tail{n: n, log: log} }

func (t *tail) Write(b []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.log != nil {
		_, _ = t.log.Write(b)
	}
	t.buf = append(t.buf, b...)
	if len(t.buf) > t.n {
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-t.n:]...)
	}
	return len(b), nil
}

// String is the kept tail on one line, the last 600 bytes of it.
func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := strings.Join(strings.Fields(string(t.buf)), " ")
	if len(s) > 600 {
		s = "..." + s[len(s)-600:]
	}
	return s
}
