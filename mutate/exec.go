package mutate

import (
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

	"github.com/onsi/ginkgo/v2/types"

	fp "github.com/tessera-qa/tessera-qa/engine/failpoint"
	"github.com/tessera-qa/tessera-qa/harness"
)

// Verdict is what one suite did under one fault.
type Verdict string

const (
	Caught  Verdict = "caught"  // the suite failed: CI would have gone red
	Missed  Verdict = "missed"  // the suite passed with the fault on
	Skipped Verdict = "skipped" // every spec skipped (e.g. no torch for the differential suite)
	Errored Verdict = "error"   // the suite could not be run at all (not a catch)
	NotRun  Verdict = "not-run" // left out: the run stops at a fault's first catch

	// With no fault on, a suite should pass; Failed there means it cannot judge faults.
	Passed Verdict = "pass"
	Failed Verdict = "fail"
)

// Outcome is one suite's verdict under one fault (or none, for the baseline).
type Outcome struct {
	Suite   string  `json:"suite"`
	Verdict Verdict `json:"verdict"`
	// Detail names the first failing spec and why, or why the suite skipped or errored.
	Detail  string  `json:"detail,omitempty"`
	Seconds float64 `json:"seconds"`
}

// maxDetail bounds the detail kept per outcome; the suite's own output has the rest.
const maxDetail = 300

// suiteRun is one suite run under one fault.
type suiteRun struct {
	suite   Suite
	bins    map[string]string // package -> binary
	fault   string            // "" for none
	ops     []string          // focus on specs labelled with these ops; nil: every spec
	root    string
	workDir string
	timeout time.Duration
	// seed seeds Ginkgo (and through it rapid) and the smoke generator.
	seed       uint64
	smokeCount int
}

// run runs every package of the suite; the suite catches the fault if any package fails.
func (j suiteRun) run(ctx context.Context) Outcome {
	start := time.Now()
	var outs []Outcome
	for _, pkg := range j.suite.Packages {
		outs = append(outs, j.runPackage(ctx, pkg))
	}
	o := combine(j.suite.Name, outs)
	o.Seconds = time.Since(start).Seconds()
	return o
}

// combine: any catch wins; then an error; all skipped is skipped; else missed.
func combine(suite string, outs []Outcome) Outcome {
	for _, want := range []Verdict{Caught, Errored, Missed} {
		for _, o := range outs {
			if o.Verdict == want {
				return Outcome{Suite: suite, Verdict: want, Detail: o.Detail}
			}
		}
	}
	if len(outs) > 0 {
		return Outcome{Suite: suite, Verdict: Skipped, Detail: outs[0].Detail}
	}
	return Outcome{Suite: suite, Verdict: Skipped, Detail: "no packages"}
}

func (j suiteRun) runPackage(ctx context.Context, pkg string) Outcome {
	ctx, cancel := context.WithTimeout(ctx, j.timeout)
	defer cancel()
	scratch, err := os.MkdirTemp(j.workDir, "run-")
	if err != nil {
		return Outcome{Verdict: Errored, Detail: clip(err.Error())}
	}
	defer os.RemoveAll(scratch)
	bin := j.bins[pkg]
	var args []string
	dir := filepath.Join(j.root, filepath.FromSlash(pkg))
	report := filepath.Join(scratch, "report.json")
	switch j.suite.Kind {
	case KindGinkgo:
		// CI runs every spec; those for a GPU skip on its CPU machines, so leave them out here
		// so that a machine with a GPU answers the same question. The first failure settles it.
		args = []string{"-ginkgo.label-filter=" + labelFilter(j.ops), "-ginkgo.fail-fast", "-ginkgo.no-color",
			"-ginkgo.seed=" + strconv.FormatUint(j.seed%(1<<31), 10), "-ginkgo.json-report=" + report}
	case KindGoTest:
		args = []string{"-test.failfast"}
	case KindSmoke:
		dir = scratch
		args = []string{"run", "--backend", "cpu", "--suite", "smoke", "--seed", strconv.FormatUint(j.seed, 10),
			"--smoke", strconv.Itoa(j.smokeCount), "--out", filepath.Join(scratch, "out")}
	}
	args = append(args, j.suite.Args...)
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = dir
	// Replay manifests of the failures a fault causes stay in the scratch folder, out of CI's
	// artifacts.
	cmd.Env = append(withoutFailpoints(os.Environ()), "TESSERA_QA_ARTIFACTS="+filepath.Join(scratch, "artifacts"))
	cmd.Env = append(cmd.Env, j.suite.Env...)
	if j.fault != "" {
		cmd.Env = append(cmd.Env, fp.EnvVar+"="+j.fault)
	}
	var out tailBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.WaitDelay = 10 * time.Second
	err = cmd.Run()
	if ctx.Err() == context.Canceled {
		return Outcome{Verdict: Errored, Detail: pkg + ": interrupted"}
	}
	if ctx.Err() == context.DeadlineExceeded {
		return Outcome{Verdict: Caught, Detail: fmt.Sprintf("%s timed out after %s", pkg, j.timeout)}
	}
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		return Outcome{Verdict: Errored, Detail: clip(fmt.Sprintf("%s: %v", pkg, err))}
	}
	if strings.Contains(out.String(), "failpoint: "+fp.EnvVar) {
		return Outcome{Verdict: Errored, Detail: clip(out.lastLine())}
	}
	switch j.suite.Kind {
	case KindGinkgo:
		return ginkgoOutcome(pkg, err == nil, report, &out)
	case KindSmoke:
		return smokeOutcome(exitCode(err), filepath.Join(scratch, "out", "results.json"), &out)
	}
	if err == nil {
		return Outcome{Verdict: Missed}
	}
	return Outcome{Verdict: Caught, Detail: clip(pkg + ": " + goTestFailure(out.String()))}
}

// labelFilter selects the CPU specs, of the given ops only when there are any.
func labelFilter(ops []string) string {
	if len(ops) == 0 {
		return "!gpu"
	}
	return "!gpu && (" + strings.Join(ops, " || ") + ")"
}

func exitCode(err error) int {
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return exit.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}

// ginkgoOutcome reads the suite's JSON report: a failing spec is a catch, a passing suite
// with at least one passed spec a miss, a passing suite whose specs all skipped a skip.
func ginkgoOutcome(pkg string, passed bool, report string, out *tailBuffer) Outcome {
	var reps []types.Report
	data, rerr := os.ReadFile(report)
	if rerr == nil {
		rerr = json.Unmarshal(data, &reps)
	}
	var nPassed int
	var firstSkip string
	for _, r := range reps {
		for _, s := range r.SpecReports {
			switch {
			case s.State.Is(types.SpecStateFailureStates):
				return Outcome{Verdict: Caught, Detail: clip(specName(s) + ": " + failureText(s.Failure.Message))}
			case s.State == types.SpecStatePassed:
				nPassed++
			case s.State == types.SpecStateSkipped && firstSkip == "" && s.Failure.Message != "":
				firstSkip = specName(s) + ": " + firstLine(s.Failure.Message)
			}
		}
		if !r.SuiteSucceeded && len(r.SpecialSuiteFailureReasons) > 0 {
			return Outcome{Verdict: Caught, Detail: clip(pkg + ": " + strings.Join(r.SpecialSuiteFailureReasons, "; "))}
		}
	}
	switch {
	case !passed:
		// Failed before or outside any spec (a panic at start-up, a broken report).
		return Outcome{Verdict: Caught, Detail: clip(pkg + ": " + out.lastLine())}
	case rerr != nil:
		return Outcome{Verdict: Errored, Detail: clip(fmt.Sprintf("%s passed but its report is unreadable: %v", pkg, rerr))}
	case nPassed == 0:
		if firstSkip == "" {
			firstSkip = pkg + ": no spec ran"
		}
		return Outcome{Verdict: Skipped, Detail: clip(firstSkip)}
	}
	return Outcome{Verdict: Missed}
}

func specName(s types.SpecReport) string {
	if t := s.FullText(); t != "" {
		return t
	}
	return s.LeafNodeType.String()
}

// smokeOutcome: `tessera-qa run` exits 1 when a check failed; its results.json names it.
func smokeOutcome(code int, results string, out *tailBuffer) Outcome {
	switch code {
	case 0:
		return Outcome{Verdict: Missed}
	case 1:
		detail := out.lastLine()
		if rs, err := harness.ReadResults(results); err == nil {
			for _, r := range rs {
				if r.Failed() {
					detail = r.Suite + "/" + r.Case + ": " + r.Reason
					break
				}
			}
		}
		return Outcome{Verdict: Caught, Detail: clip(detail)}
	}
	return Outcome{Verdict: Errored, Detail: clip(fmt.Sprintf("tessera-qa run exited %d: %s", code, out.lastLine()))}
}

// goTestFailure picks the first "--- FAIL" line of a test binary's output and the message
// under it.
func goTestFailure(out string) string {
	lines := strings.Split(out, "\n")
	for i, l := range lines {
		if strings.HasPrefix(strings.TrimSpace(l), "--- FAIL:") {
			msg := strings.TrimSpace(l)
			if i+1 < len(lines) && strings.TrimSpace(lines[i+1]) != "" {
				msg += " " + strings.TrimSpace(lines[i+1])
			}
			return msg
		}
	}
	return lastLine(out)
}

// withoutFailpoints drops any fault list inherited from the caller's environment, so that
// what runs is exactly what the job says.
func withoutFailpoints(env []string) []string {
	var out []string
	for _, kv := range env {
		if !strings.HasPrefix(kv, fp.EnvVar+"=") {
			out = append(out, kv)
		}
	}
	return out
}

// failureText is the gist of a spec's failure message: its first two lines (rapid puts the
// property's own message on the second), stopping where gomega's "Expected ..." dump starts.
func failureText(msg string) string {
	var out []string
	for _, l := range strings.Split(msg, "\n") {
		l = strings.TrimSpace(l)
		switch {
		case l == "":
			continue
		case l == "Expected" || strings.HasPrefix(l, "Expected "):
			return strings.Join(out, " ")
		}
		if out = append(out, l); len(out) == 2 {
			break
		}
	}
	return strings.Join(out, " ")
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return s
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

func clip(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > maxDetail {
		s = strings.ToValidUTF8(s[:maxDetail-3], "") + "..."
	}
	return s
}

// tailBuffer keeps the last tailBytes of a process's output: enough for the messages a
// verdict quotes, without holding a chatty suite's whole log.
type tailBuffer struct{ b []byte }

const tailBytes = 64 << 10

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.b = append(t.b, p...)
	if len(t.b) > 2*tailBytes {
		t.b = append(t.b[:0], t.b[len(t.b)-tailBytes:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	if len(t.b) > tailBytes {
		return string(t.b[len(t.b)-tailBytes:])
	}
	return string(t.b)
}

func (t *tailBuffer) lastLine() string { return lastLine(t.String()) }
