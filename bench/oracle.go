package bench

import (
	"bufio"
	_ "embed"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/errs"
)

// Oracle computes and times a case in the reference framework, on the same device.
type Oracle interface {
	// Describe names the framework and its device ("torch 2.11.0 on NVIDIA H100 80GB HBM3").
	Describe() string
	// Version is the framework's version ("2.11.0").
	Version() string
	Run(req Request) (Reply, error)
	Close() error
}

// Request asks the oracle to compute one case from input files, write its output file, then
// time it (one line of the protocol; see torch_bench.py).
type Request struct {
	Type       string         `json:"type"` // "run"
	ID         int            `json:"id"`
	Op         string         `json:"op"`
	Inputs     []FileTensor   `json:"inputs"`
	Attrs      map[string]any `json:"attrs,omitempty"`
	Output     string         `json:"output"`
	Warmup     int            `json:"warmup"`
	Reps       int            `json:"reps"`
	FlushBytes int            `json:"flush_bytes"`
}

// FileTensor is a tensor in a file of raw little-endian element bytes.
type FileTensor struct {
	File  string `json:"file"`
	DType string `json:"dtype"`
	Shape []int  `json:"shape"`
}

// Reply is the oracle's answer: per-rep milliseconds and the output's dtype and shape, or an
// error for this case alone.
type Reply struct {
	Type    string    `json:"type"` // "result" or "error"
	ID      int       `json:"id"`
	TimesMS []float64 `json:"times_ms"`
	DType   string    `json:"dtype"`
	Shape   []int     `json:"shape"`
	Error   string    `json:"error"`
}

type hello struct {
	Type     string `json:"type"`
	Protocol int    `json:"protocol"`
	Torch    string `json:"torch"`
	Device   string `json:"device"`
	Python   string `json:"python"`
	Error    string `json:"error"`
}

// protocol is torch_bench.py's PROTOCOL.
const protocol = 1

//go:embed torch_bench.py
var torchScript []byte

// PythonEnv names the interpreter when --python does not (the differential oracles read it too).
const PythonEnv = "TESSERA_QA_PYTHON"

// Torch is the torch oracle: one python process for the whole command.
type Torch struct {
	python  string
	hello   hello
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	lines   chan []byte
	stderr  *tailBuffer
	timeout time.Duration
	dir     string
	next    int
}

// StartTorch starts torch_bench.py under the first interpreter that imports torch and sees a
// CUDA device: python when given, else $TESSERA_QA_PYTHON, else python3 on PATH, then
// /usr/bin/python3. None: E_NO_DEVICE saying why each failed. timeout bounds each request.
func StartTorch(python string, timeout time.Duration) (*Torch, error) {
	var tries []string
	switch {
	case python != "":
		tries = []string{python}
	case os.Getenv(PythonEnv) != "":
		tries = []string{os.Getenv(PythonEnv)}
	default:
		if p, err := exec.LookPath("python3"); err == nil {
			tries = append(tries, p)
		}
		if _, err := os.Stat("/usr/bin/python3"); err == nil && (len(tries) == 0 || tries[0] != "/usr/bin/python3") {
			tries = append(tries, "/usr/bin/python3")
		}
	}
	if len(tries) == 0 {
		return nil, errs.New(errs.NoDevice, "torch unavailable: no python3 found (name one with --python or $%s)", PythonEnv)
	}
	var why []string
	for _, py := range tries {
		t, err := startTorch(py, timeout)
		if err == nil {
			return t, nil
		}
		why = append(why, err.Error())
	}
	return nil, errs.New(errs.NoDevice, "torch unavailable: %s", strings.Join(why, "; "))
}

func startTorch(python string, timeout time.Duration) (*Torch, error) {
	dir, err := os.MkdirTemp("", "tessera-bench-py-")
	if err != nil {
		return nil, fmt.Errorf("temporary directory: %v", err)
	}
	script := filepath.Join(dir, "torch_bench.py")
	if err := os.WriteFile(script, torchScript, 0o644); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("write %s: %v", script, err)
	}
	cmd := exec.Command(python, "-B", "-u", script)
	cmd.Env = append(os.Environ(), "PYTHONUNBUFFERED=1", "PYTHONDONTWRITEBYTECODE=1")
	t := &Torch{python: python, cmd: cmd, lines: make(chan []byte, 1), stderr: &tailBuffer{max: 4096}, timeout: timeout, dir: dir}
	cmd.Stderr = t.stderr
	stdout, err := cmd.StdoutPipe()
	if err == nil {
		t.stdin, err = cmd.StdinPipe()
	}
	if err == nil {
		err = cmd.Start()
	}
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("%s: %v", python, err)
	}
	go func() {
		r := bufio.NewReaderSize(stdout, 1<<16)
		for {
			line, err := r.ReadBytes('\n')
			if len(strings.TrimSpace(string(line))) > 0 {
				t.lines <- line
			}
			if err != nil {
				close(t.lines)
				return
			}
		}
	}()
	// Importing torch and initialising CUDA takes seconds; give it the request timeout.
	line, err := t.read(max(timeout, time.Minute))
	if err == nil {
		err = json.Unmarshal(line, &t.hello)
	}
	switch {
	case err != nil:
	case t.hello.Type != "hello" || t.hello.Protocol != protocol:
		err = fmt.Errorf("first line is not a protocol-%d hello: %.200q", protocol, line)
	case t.hello.Error != "":
		err = fmt.Errorf("%s", t.hello.Error)
	}
	if err != nil {
		t.Close()
		return nil, fmt.Errorf("%s: %v%s", python, err, t.stderr.detail())
	}
	return t, nil
}

func (t *Torch) read(d time.Duration) ([]byte, error) {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case line, ok := <-t.lines:
		if !ok {
			return nil, fmt.Errorf("the torch process exited")
		}
		return line, nil
	case <-timer.C:
		return nil, fmt.Errorf("no answer within %s", d)
	}
}

// Describe is e.g. "torch 2.11.0 on NVIDIA H100 80GB HBM3 (python 3.12.3)".
func (t *Torch) Describe() string {
	return fmt.Sprintf("torch %s on %s (python %s, %s)", t.hello.Torch, t.hello.Device, t.hello.Python, t.python)
}

// Version is torch's version.
func (t *Torch) Version() string { return t.hello.Torch }

// Run sends one request and waits for its reply. A reply of type error is returned as a
// Reply with Error set (that case failed, the process goes on); a dead or silent process is
// an error (E_TIMEOUT for silence).
func (t *Torch) Run(req Request) (Reply, error) {
	t.next++
	req.Type, req.ID = "run", t.next
	b, err := json.Marshal(req)
	if err != nil {
		return Reply{}, errs.New(errs.Internal, "bench: encode request: %v", err)
	}
	if _, err := t.stdin.Write(append(b, '\n')); err != nil {
		return Reply{}, errs.New(errs.Input, "bench: torch process: %v%s", err, t.stderr.detail())
	}
	line, err := t.read(t.timeout)
	if err != nil {
		code := errs.Input
		if strings.HasPrefix(err.Error(), "no answer") {
			code = errs.Timeout
		}
		return Reply{}, errs.New(code, "bench: torch %s %s: %v%s", req.Op, req.Inputs[0].DType, err, t.stderr.detail())
	}
	var r Reply
	if err := json.Unmarshal(line, &r); err != nil || (r.Type != "result" && r.Type != "error") || r.ID != req.ID {
		return Reply{}, errs.New(errs.Input, "bench: torch answered %.200q to request %d", line, req.ID)
	}
	return r, nil
}

// Close asks the process to quit, kills it if it does not within seconds, and removes the
// script's directory.
func (t *Torch) Close() error {
	if t.stdin != nil {
		_, _ = t.stdin.Write([]byte(`{"type":"quit"}` + "\n"))
		t.stdin.Close()
	}
	done := make(chan struct{})
	go func() { _ = t.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		_ = t.cmd.Process.Kill()
		<-done
	}
	return os.RemoveAll(t.dir)
}

// tailBuffer keeps the last max bytes written (the python process's stderr).
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (w *tailBuffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.b = append(w.b, p...)
	if len(w.b) > w.max {
		w.b = w.b[len(w.b)-w.max:]
	}
	return len(p), nil
}

// detail is "; stderr: <last line>" when the process wrote something.
func (w *tailBuffer) detail() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	lines := strings.Split(strings.TrimSpace(string(w.b)), "\n")
	if last := strings.TrimSpace(lines[len(lines)-1]); last != "" {
		return "; stderr: " + last
	}
	return ""
}
