package sanitizer

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/errs"
)

// Var names compute-sanitizer's path explicitly; otherwise Locate looks on PATH, then under
// /usr/local/cuda*/bin.
const Var = "TESSERA_COMPUTE_SANITIZER"

// ExitCode is the --error-exitcode a run asks for: the tool's own exit when it reported
// something, apart from any exit of the child.
const ExitCode = 86

// Locate finds compute-sanitizer. No tool is E_UNSUPPORTED naming where it looked.
func Locate() (string, error) {
	return locate(os.Getenv, exec.LookPath, filepath.Glob)
}

func locate(getenv func(string) string, look func(string) (string, error), glob func(string) ([]string, error)) (string, error) {
	if p := getenv(Var); p != "" {
		if _, err := look(p); err != nil {
			return "", errs.New(errs.Unsupported, "compute-sanitizer: %s=%s: %v", Var, p, err)
		}
		return p, nil
	}
	if p, err := look("compute-sanitizer"); err == nil {
		return p, nil
	}
	ms, _ := glob("/usr/local/cuda*/bin/compute-sanitizer")
	slices.Sort(ms)
	for i := len(ms) - 1; i >= 0; i-- { // the newest toolkit's name sorts last (cuda-13.0 > cuda-12.8)
		if _, err := look(ms[i]); err == nil {
			return ms[i], nil
		}
	}
	return "", errs.New(errs.Unsupported, "compute-sanitizer: not on PATH, not under /usr/local/cuda*/bin, and %s is unset", Var)
}

// Args is the tool's command line around the child's: only options every release since
// 2022 has (--tool, --error-exitcode), so no tool refuses an option instead of running.
func Args(tool Tool, child []string) []string {
	return append([]string{"--tool", string(tool), "--error-exitcode", itoa(ExitCode)}, child...)
}

// Version asks the tool for its version line ("" when it will not say).
func Version(ctx context.Context, path string) string {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	out, _ := exec.CommandContext(ctx, path, "--version").CombinedOutput()
	for _, l := range strings.Split(string(out), "\n") {
		if strings.Contains(l, "ersion") {
			return strings.TrimSpace(l)
		}
	}
	return ""
}

// Exec runs the tool on the child command with env added to this process's environment,
// for at most timeout; the whole process group is killed at the deadline (the child too).
// An error is returned only when the tool could not be started at all.
func Exec(ctx context.Context, path string, tool Tool, child, env []string, timeout time.Duration) (Run, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, Args(tool, child)...)
	cmd.Env = append(os.Environ(), env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 10 * time.Second
	start := time.Now()
	err := cmd.Run()
	r := Run{Tool: tool, Exit: 0, Output: out.String(), Seconds: time.Since(start).Seconds()}
	var ee *exec.ExitError
	switch {
	case ctx.Err() != nil:
		r.TimedOut, r.Exit = true, -1
	case errors.As(err, &ee):
		r.Exit = ee.ExitCode()
	case err != nil:
		return r, errs.Wrap(errs.Unsupported, err, "compute-sanitizer: starting %s", path)
	}
	return r, nil
}

func itoa(n int) string { return strconv.Itoa(n) }
