package cli

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/backend"
	"github.com/tessera-qa/tessera-qa/engine/compiler"
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
)

// Test backends, registered once for the package: one that cannot run here, one that runs on
// the CPU but corrupts its outputs (so checks must fail), one that panics.
func init() {
	backend.Register(&fakeBackend{name: "zz-missing", unavailable: errs.New(errs.NoDevice, "no zz device in this test")})
	backend.Register(&fakeBackend{name: "zz-broken", corrupt: true})
	backend.Register(&fakeBackend{name: "zz-panic", panics: true})
}

type fakeBackend struct {
	name        string
	unavailable error
	corrupt     bool
	panics      bool
}

func (f *fakeBackend) Name() string        { return f.name }
func (f *fakeBackend) Available() error    { return f.unavailable }
func (f *fakeBackend) Device() string      { return "fake " + f.name }
func (f *fakeBackend) DeviceClass() string { return "fake/" + f.name }

func (f *fakeBackend) Run(p *compiler.Program, in map[string]*tensor.Tensor) ([]*tensor.Tensor, error) {
	if f.panics {
		panic("zz-panic backend: deliberate panic")
	}
	cpu, err := backend.Get("cpu")
	if err != nil {
		return nil, err
	}
	outs, err := cpu.Run(p, in)
	if err != nil || !f.corrupt {
		return outs, err
	}
	for i, t := range outs {
		t = t.Clone()
		// Flip a high bit of element 0 (sign/exponent of a float, bit 6 of the top byte of an
		// int): far outside any tolerance.
		t.Data[t.DType.Size()-1] ^= 0x40
		outs[i] = t
	}
	return outs, nil
}

type outcome struct {
	code           int
	stdout, stderr string
}

func cli(t *testing.T, args ...string) outcome {
	t.Helper()
	var out, errb bytes.Buffer
	code := Main(args, strings.NewReader(""), &out, &errb)
	return outcome{code, out.String(), errb.String()}
}

// errToken returns the code of the single error line on stderr ("E_PARSE"), failing the test
// unless stderr is exactly one "tessera-qa: E_CODE: ..." line.
func (o outcome) errToken(t *testing.T) string {
	t.Helper()
	lines := strings.Split(strings.TrimRight(o.stderr, "\n"), "\n")
	if len(lines) != 1 || !strings.HasPrefix(lines[0], "tessera-qa: E_") {
		t.Fatalf("stderr is not one error line:\n%s", o.stderr)
	}
	tok, rest, _ := strings.Cut(strings.TrimPrefix(lines[0], "tessera-qa: "), ":")
	if again := codeInText.FindString(rest); again != "" {
		t.Fatalf("error line carries a second code %q: %s", again, lines[0])
	}
	return tok
}

// codeInText finds an error code written as a prefix inside a message: a wrapped error that
// kept its code when it was formatted into another one.
var codeInText = regexp.MustCompile(`\bE_[A-Z_]+: `)

func (o outcome) want(t *testing.T, code int, token string) {
	t.Helper()
	if o.code != code {
		t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", o.code, code, o.stdout, o.stderr)
	}
	if token != "" {
		if got := o.errToken(t); got != token {
			t.Fatalf("error code %s, want %s: %s", got, token, o.stderr)
		}
	}
}

func mustJSON(t *testing.T, s string, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(s), v); err != nil {
		t.Fatalf("stdout is not one JSON document: %v\n%s", err, s)
	}
}

// exampleGraph is the hand-written example of docs/graph-format.md.
func exampleGraph(t *testing.T) string {
	t.Helper()
	p := filepath.Join("..", "..", "..", "..", "docs", "examples", "mlp.tg")
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("example graph: %v", err)
	}
	return p
}

func TestUsageErrorsAreOneLineExit2(t *testing.T) {
	g := exampleGraph(t)
	for _, tc := range []struct {
		args []string
		help string // the verb the line must point to
	}{
		{nil, "tessera-qa --help"},
		{[]string{"rnu"}, "tessera-qa --help"},
		{[]string{"run", "--bogus"}, "tessera-qa run --help"},
		{[]string{"run", "--smoke", "many"}, "tessera-qa run --help"},
		{[]string{"run", "--smoke=-1"}, "tessera-qa run --help"},
		{[]string{"run", "extra"}, "tessera-qa run --help"},
		{[]string{"exec"}, "tessera-qa exec --help"},
		{[]string{"exec", g}, "tessera-qa exec --help"},
		{[]string{"compile"}, "tessera-qa compile --help"},
		{[]string{"compile", g, g}, "tessera-qa compile --help"},
		{[]string{"compile", "--dump=nonsense", g}, "tessera-qa compile --help"},
		{[]string{"ops", "extra"}, "tessera-qa ops --help"},
		{[]string{"replay"}, "tessera-qa replay --help"},
		{[]string{"golden"}, "tessera-qa golden --help"},
		{[]string{"golden", "bogus"}, "tessera-qa golden --help"},
		{[]string{"help", "bogus"}, "tessera-qa --help"},
		{[]string{"run", "--seed", "-3"}, "tessera-qa run --help"},
		{[]string{"golden", "verify", "--dir"}, "tessera-qa golden verify --help"},
		{[]string{"version", "--json"}, "tessera-qa version --help"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			o := cli(t, tc.args...)
			o.want(t, ExitUsage, "E_INPUT")
			if !strings.Contains(o.stderr, "(see "+tc.help+")") {
				t.Errorf("error line does not point to %q: %s", tc.help, o.stderr)
			}
			if o.stdout != "" {
				t.Errorf("usage error printed on stdout:\n%s", o.stdout)
			}
		})
	}
}

// A coded error formatted into another keeps one code, the innermost: the outside run saw
// "E_INPUT: E_INPUT: chaos: ..." and "E_INPUT: --mesh: E_PARSE: ...".
func TestWrappedErrorsPrintOneCode(t *testing.T) {
	g := exampleGraph(t)
	for _, tc := range []struct {
		args []string
		code string
		text string
	}{
		{[]string{"chaos", "--kill-rank", "7", "--world", "3"}, "E_INPUT", "E_INPUT: chaos: rank/kill: rank 7 outside world 3"},
		{[]string{"train", "--mesh", "foo"}, "E_PARSE", "E_PARSE: --mesh: mesh \"foo\""},
		{[]string{"compile", "--mesh", "foo", g}, "E_PARSE", "E_PARSE: mesh \"foo\""},
		{[]string{"chaos", "--faults", "bogus/x"}, "E_INPUT", "E_INPUT: chaos: unknown fault \"bogus/x\""},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			o := cli(t, tc.args...)
			o.want(t, ExitUsage, tc.code)
			if !strings.Contains(o.stderr, tc.text) {
				t.Errorf("stderr %q does not contain %q", o.stderr, tc.text)
			}
		})
	}
}

func TestHelpGoesToStdout(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"run", "--help"}, {"help", "exec"}, {"golden", "verify", "-h"}} {
		o := cli(t, args...)
		o.want(t, ExitOK, "")
		if !strings.Contains(o.stdout, "Usage:") || o.stderr != "" {
			t.Errorf("%v: stdout %q, stderr %q", args, o.stdout, o.stderr)
		}
	}
}

func TestVersion(t *testing.T) {
	o := cli(t, "version")
	o.want(t, ExitOK, "")
	if !strings.HasPrefix(o.stdout, "tessera-qa ") {
		t.Errorf("stdout: %q", o.stdout)
	}
	o = cli(t, "version", "--json", "-")
	o.want(t, ExitOK, "")
	var v map[string]string
	mustJSON(t, o.stdout, &v)
	for _, k := range []string{"version", "commit", "go_version", "os", "arch"} {
		if v[k] == "" {
			t.Errorf("version --json lacks %q: %v", k, v)
		}
	}
	if !strings.HasPrefix(o.stderr, "tessera-qa ") {
		t.Errorf("with --json -, the human line belongs on stderr: %q", o.stderr)
	}
}

func TestJSONToFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "v.json")
	cli(t, "version", "--json", p).want(t, ExitOK, "")
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var v versionJSON
	mustJSON(t, string(b), &v)
	if v.Version == "" {
		t.Errorf("empty version in %s", b)
	}
	o := cli(t, "version", "--json", filepath.Join(t.TempDir(), "no", "such", "dir", "v.json"))
	o.want(t, ExitUsage, "E_INPUT")
}

func TestPanicIsOneInternalLine(t *testing.T) {
	g := exampleGraph(t)
	in := filepath.Join(t.TempDir(), "in.npz")
	writeInputs(t, in, g)
	o := cli(t, "exec", g, "--in", in, "--out", filepath.Join(t.TempDir(), "out.npz"), "--backend", "zz-panic")
	o.want(t, ExitUsage, "E_INTERNAL")
	if strings.Contains(o.stderr, "goroutine") {
		t.Errorf("stack trace leaked: %s", o.stderr)
	}
}
