package qabin

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Result is one run of the binary: its exit code and what it printed.
type Result struct {
	Code           int
	Stdout, Stderr string
}

// Run runs bin with args and env (nil: this process's environment) for at most limit: past it
// the binary gets SIGTERM (the launcher forwards it to its ranks), and SIGKILL grace later. An
// error means the binary did not run or ran out of time; a non-zero exit is a Result.
func Run(bin string, env []string, limit, grace time.Duration, args ...string) (Result, error) {
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = env
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = grace
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r := Result{Stdout: out.String(), Stderr: errb.String()}
	var x *exec.ExitError
	switch {
	case ctx.Err() != nil:
		return r, fmt.Errorf("tessera-qa %v ran out of its %s:\n%s", args, limit, r.Stderr)
	case errors.As(err, &x):
		r.Code = x.ExitCode()
	case err != nil:
		return r, err
	}
	return r, nil
}

// Leftovers lists the processes still running bin (pid: command line), from /proc.
func Leftovers(bin string) []string {
	var out []string
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		if argv0, _, _ := bytes.Cut(b, []byte{0}); string(argv0) == bin {
			out = append(out, filepath.Base(filepath.Dir(p))+": "+strings.ReplaceAll(string(b), "\x00", " "))
		}
	}
	return out
}
