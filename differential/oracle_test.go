package differential

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

const fakeHello = `{"type":"hello","protocol":1,"framework":"torch","version":"fake","python":"3.0","devices":["cpu"]}`

// fakePython writes a shell script that stands in for the interpreter: it ignores the oracle
// script it is given and plays the part described by body.
func fakePython(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "python")
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// oneCase is a one-node wire case computing exp.
func oneCase(t *testing.T) []WireCase {
	t.Helper()
	b := graph.NewBuilder("g")
	b.Output(b.Op("exp", nil, b.Input("x", numerics.F32, 2)))
	g, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	in := map[string]*tensorT{"x": f32s(1, 2)}
	p, err := Prepare("exp/f32/2", g, in)
	if err != nil {
		t.Fatal(err)
	}
	return []WireCase{p.Case}
}

func wantCode(t *testing.T, err error, code errs.Code, parts ...string) {
	t.Helper()
	if errs.CodeOf(err) != code {
		t.Fatalf("error %v, want code %s", err, code)
	}
	for _, s := range parts {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not mention %q", err, s)
		}
	}
	if strings.Contains(err.Error(), "\n") {
		t.Errorf("error is not one line: %q", err)
	}
}

func TestHungOracleTimesOutAndIsRestartedBoundedly(t *testing.T) {
	py := fakePython(t, "echo '"+fakeHello+"'\nexec sleep 60")
	o, err := Start(Config{Framework: "torch", Python: py, Timeout: 200 * time.Millisecond, StartTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	start := time.Now()
	_, err = o.Eval(Target{Device: "cpu"}, oneCase(t))
	wantCode(t, err, errs.Timeout, "op exp", "exp/f32/2", "killed")
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("a hung oracle took %s to report", d)
	}
	// Each later request restarts the process (it hangs again) until the restart budget is spent.
	for i := range maxRestarts {
		_, err = o.Eval(Target{Device: "cpu"}, oneCase(t))
		wantCode(t, err, errs.Timeout)
		_ = i
	}
	_, err = o.Eval(Target{Device: "cpu"}, oneCase(t))
	wantCode(t, err, errs.Input, "not restarted again")
}

func TestCrashedOracleNamesOpExitStatusAndStderr(t *testing.T) {
	py := fakePython(t, "echo '"+fakeHello+"'\nread line\necho 'Traceback: boom in exp' >&2\nexit 3")
	o, err := Start(Config{Framework: "torch", Python: py, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	_, err = o.Eval(Target{Device: "cpu"}, oneCase(t))
	wantCode(t, err, errs.Input, "op exp", "exit status 3", "boom in exp", py)
}

func TestOracleBreakingTheProtocol(t *testing.T) {
	py := fakePython(t, "echo '"+fakeHello+"'\nread line\necho 'this is not json'\nexec sleep 60")
	o, err := Start(Config{Framework: "torch", Python: py, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	_, err = o.Eval(Target{Device: "cpu"}, oneCase(t))
	wantCode(t, err, errs.Input, "broke the protocol", "not JSON")

	py = fakePython(t, "echo '"+fakeHello+"'\nread line\necho '{\"type\":\"result\",\"id\":1,\"results\":[]}'\nexec sleep 60")
	o2, err := Start(Config{Framework: "torch", Python: py, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer o2.Close()
	_, err = o2.Eval(Target{Device: "cpu"}, oneCase(t))
	wantCode(t, err, errs.Input, "0 results for 1 cases")
}

func TestMissingFrameworkIsNoDevice(t *testing.T) {
	py := fakePython(t, `echo '{"type":"hello","protocol":1,"framework":"torch","python":"3.9","error":"ModuleNotFoundError: No module named torch"}'`)
	_, err := Start(Config{Framework: "torch", Python: py})
	wantCode(t, err, errs.NoDevice, "oracle torch unavailable", py, "No module named torch")

	_, err = Start(Config{Framework: "torch", Python: filepath.Join(t.TempDir(), "no-such-python")})
	wantCode(t, err, errs.NoDevice, "no-such-python")

	_, err = Start(Config{Framework: "tensorflow"})
	wantCode(t, err, errs.Input, "unknown oracle")
}

func TestStartRejectsWrongProtocolAndSilentInterpreters(t *testing.T) {
	py := fakePython(t, `echo '{"type":"hello","protocol":99,"framework":"torch"}'`)
	_, err := Start(Config{Framework: "torch", Python: py})
	wantCode(t, err, errs.NoDevice, "protocol 99")

	py = fakePython(t, "exec sleep 60")
	_, err = Start(Config{Framework: "torch", Python: py, StartTimeout: 200 * time.Millisecond})
	wantCode(t, err, errs.Timeout, "no hello")

	py = fakePython(t, "echo 'Python 2 says hi'")
	_, err = Start(Config{Framework: "torch", Python: py})
	wantCode(t, err, errs.NoDevice, "not a hello")
}

func TestCandidates(t *testing.T) {
	t.Setenv(PythonEnv, "/opt/py/bin/python3")
	if c := candidates("/x/python"); len(c) != 1 || c[0].path != "/x/python" || !c[0].explicit {
		t.Errorf("flag: %+v", c)
	}
	if c := candidates(""); len(c) != 1 || c[0].path != "/opt/py/bin/python3" || !c[0].explicit {
		t.Errorf("env: %+v", c)
	}
	t.Setenv(PythonEnv, "")
	t.Setenv("PATH", t.TempDir())
	c := candidates("")
	if len(c) != 1 || c[0].path != systemPython || c[0].explicit {
		t.Errorf("no python3 on PATH: %+v, want only %s", c, systemPython)
	}
}
