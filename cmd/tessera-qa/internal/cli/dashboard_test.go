package cli

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tessera-qa/tessera-qa/ci/workflows"
	"github.com/tessera-qa/tessera-qa/report"
	"github.com/tessera-qa/tessera-qa/report/synth"
)

// synthStore writes report/synth's history (a 25% slowdown, a noise-only series, a
// changed digest) into a fresh SQLite store.
func synthStore(t *testing.T) (string, synth.Plan) {
	t.Helper()
	dsn := filepath.Join(t.TempDir(), "results.db")
	db, err := report.Open(context.Background(), dsn, report.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	plan, err := synth.Write(context.Background(), db, synth.Options{Runs: 12, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	return dsn, plan
}

func TestDashboardExport(t *testing.T) {
	dsn, plan := synthStore(t)
	dir := filepath.Join(t.TempDir(), "site")
	o := cli(t, "dashboard", "export", dir, "--db", dsn, "--json", "-")
	o.want(t, ExitOK, "")
	var res struct {
		Dir   string   `json:"dir"`
		Files []string `json:"files"`
		Bytes int64    `json:"bytes"`
	}
	mustJSON(t, o.stdout, &res)
	if res.Dir != dir || len(res.Files) != 1+7+6 || res.Bytes == 0 {
		t.Errorf("export report: %+v", res)
	}
	if !strings.Contains(o.stderr, "dashboard: 14 files") {
		t.Errorf("human line: %q", o.stderr)
	}
	page, err := os.ReadFile(filepath.Join(dir, "series-"+plan.Slow.ID()+".html"))
	if err != nil || !bytes.Contains(page, []byte(`data-blocking="true"`)) {
		t.Errorf("slowed series page: %v", err)
	}
}

func TestDashboardUsageErrors(t *testing.T) {
	dsn, _ := synthStore(t)
	cli(t, "dashboard").want(t, ExitUsage, "E_INPUT")
	cli(t, "dashboard", "publish").want(t, ExitUsage, "E_INPUT")
	cli(t, "dashboard", "export").want(t, ExitUsage, "E_INPUT")
	cli(t, "dashboard", "export", "a", "b").want(t, ExitUsage, "E_INPUT")
	cli(t, "dashboard", "serve", "--addr", "8080", "--db", dsn).want(t, ExitUsage, "E_INPUT")
	missing := filepath.Join(t.TempDir(), "none.db")
	cli(t, "dashboard", "export", t.TempDir(), "--db", missing).want(t, ExitUsage, "E_INPUT")
	if _, err := os.Stat(missing); err == nil {
		t.Errorf("a read-only dashboard created the store %s", missing)
	}
	cli(t, "dashboard", "export", t.TempDir(), "--db", dsn, "--config", filepath.Join(t.TempDir(), "no.json")).want(t, ExitUsage, "E_INPUT")
}

// syncBuffer is a bytes.Buffer the serving goroutine writes while the test reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestDashboardServe runs `dashboard serve` on an ephemeral loopback port, reads pages, is
// refused a write, and stops it with SIGINT as a person's Ctrl-C would.
func TestDashboardServe(t *testing.T) {
	dsn, plan := synthStore(t)
	var out, errb syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- Main([]string{"dashboard", "serve", "--addr", "127.0.0.1:0", "--db", dsn}, strings.NewReader(""), &out, &errb)
	}()
	urlRe := regexp.MustCompile(`dashboard at (http://127\.0\.0\.1:\d+/)`)
	var base string
	for deadline := time.Now().Add(20 * time.Second); base == "" && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if m := urlRe.FindStringSubmatch(out.String()); m != nil {
			base = m[1]
		}
		select {
		case code := <-done:
			t.Fatalf("serve exited %d early: %s", code, errb.String())
		default:
		}
	}
	if base == "" {
		t.Fatalf("serve printed no address: %q %q", out.String(), errb.String())
	}
	get := func(p string) (int, string) {
		resp, err := http.Get(base + p)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get(""); code != 200 || !strings.Contains(body, plan.Slow.ID()) {
		t.Errorf("GET /: %d", code)
	}
	if code, _ := get("series-" + plan.Noisy.ID() + ".html"); code != 200 {
		t.Errorf("GET noisy series: %d", code)
	}
	resp, err := http.Post(base+"index.html", "text/plain", strings.NewReader("x"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST: %d, want 405", resp.StatusCode)
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case code := <-done:
		if code != ExitOK {
			t.Errorf("serve exited %d after SIGINT: %s", code, errb.String())
		}
	case <-time.After(15 * time.Second):
		t.Fatal("serve did not stop on SIGINT")
	}
	if errb.String() != "" {
		t.Errorf("stderr: %q", errb.String())
	}
}

var shellVar = regexp.MustCompile(`^"?\$\{?[A-Za-z_][A-Za-z0-9_]*\}?"?$`)

// TestWorkflowCommandsParse resolves every tessera-qa command of the CI workflows
// (ci/workflows) against this binary's real verbs: the verb and subcommand exist, every flag
// is one of theirs and the positional arguments are what they take. Commands marked "not
// built yet" are only listed.
func TestWorkflowCommandsParse(t *testing.T) {
	ws, err := workflows.Load(filepath.Join("..", "..", "..", "..", "ci", "workflows"))
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for file, w := range ws {
		for _, c := range workflows.Commands(file, w) {
			if c.Tool != "tessera-qa" {
				continue
			}
			line := c.File + " (" + c.Step + "): tessera-qa " + strings.Join(c.Args, " ")
			root := newRoot(&env{stdin: strings.NewReader(""), stdout: io.Discard, stderr: io.Discard})
			// A shell variable ("$KILL_RANK") is set by the workflow at run time: it stands for
			// "1" here, which parses as a number, a name and a path alike.
			args := make([]string, len(c.Args))
			for i, a := range c.Args {
				args[i] = shellVar.ReplaceAllString(a, "1")
			}
			cmd, rest, err := root.Find(args)
			if c.Pending {
				t.Logf("not built yet: %s", line)
				continue
			}
			if err != nil || cmd == root || cmd.HasSubCommands() {
				t.Errorf("%s: no such verb (found %q: %v)", line, cmd.CommandPath(), err)
				continue
			}
			if err := cmd.ParseFlags(rest); err != nil {
				t.Errorf("%s: %v", line, err)
				continue
			}
			if cmd.Args != nil {
				if err := cmd.Args(cmd, cmd.Flags().Args()); err != nil {
					t.Errorf("%s: %v", line, err)
				}
			}
			checked++
		}
	}
	if checked < 8 {
		t.Errorf("checked only %d commands", checked)
	}
}

func TestRedactDSN(t *testing.T) {
	for in, want := range map[string]string{
		"tessera-qa-out/results.db":                     "tessera-qa-out/results.db",
		"postgres://qa:s3cret@db.internal:5432/tessera": "postgres://qa:xxxxx@db.internal:5432/tessera",
		"postgresql://qa@db/tessera?sslmode=disable":    "postgresql://qa@db/tessera?sslmode=disable",
	} {
		if got := redactDSN(in); got != want || strings.Contains(got, "s3cret") {
			t.Errorf("redactDSN(%q) = %q, want %q", in, got, want)
		}
	}
}
