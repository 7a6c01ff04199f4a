// Package spawn runs the ranks of a device-transport test as processes: the test binary
// re-executes itself once per rank with a role in the environment (its TestMain dispatches on
// Role), and the parent serves the rendezvous store on a free loopback port, so the ranks meet
// exactly as under `tessera-qa launch` (tcp.FromEnv). Every child is bounded by a deadline and
// ended by its PID when it passes it; World reports any child process still alive afterwards.
package spawn

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/dist/rdzv"
)

// EnvRole names the role a re-executed test binary plays.
const EnvRole = "TESSERA_SPAWN_ROLE"

// Role returns the role this process was started for, "" in the parent.
func Role() string { return os.Getenv(EnvRole) }

// safetyEnv keeps NVLink multicast off in every child, whatever the parent's environment
// (multicast can take a shared machine's GPUs out of service).
var safetyEnv = []string{"NCCL_NVLS_ENABLE=0", "TORCH_SYMM_MEM_DISABLE_MULTICAST=1", "NVSHMEM_DISABLE_NVLS=1"}

// Result is one rank's process after it ended.
type Result struct {
	Rank     int
	PID      int
	ExitCode int // -1 when it was killed
	Killed   bool
	Stdout   string
	Stderr   string
}

// Report is a finished world.
type Report struct {
	Ranks []Result
	// Left lists child PIDs still alive after World returned (must be empty).
	Left []int
}

// Failed reports whether any rank exited non-zero or was killed.
func (r Report) Failed() bool {
	for _, x := range r.Ranks {
		if x.ExitCode != 0 || x.Killed {
			return true
		}
	}
	return false
}

// String summarises every rank's end and the tail of its output.
func (r Report) String() string {
	var b strings.Builder
	for _, x := range r.Ranks {
		fmt.Fprintf(&b, "rank %d (pid %d): exit %d killed=%v\n", x.Rank, x.PID, x.ExitCode, x.Killed)
		for _, s := range []string{x.Stdout, x.Stderr} {
			if s = strings.TrimSpace(s); s != "" {
				if len(s) > 4000 {
					s = "..." + s[len(s)-4000:]
				}
				b.WriteString(s + "\n")
			}
		}
	}
	if len(r.Left) > 0 {
		fmt.Fprintf(&b, "processes still alive: %v\n", r.Left)
	}
	return b.String()
}

// World starts n copies of this executable with role and env (KEY=VALUE entries) as ranks
// 0..n-1 of one job and waits for them, killing every one still running at timeout.
func World(ctx context.Context, n int, role string, env []string, timeout time.Duration) (Report, error) {
	exe, err := os.Executable()
	if err != nil {
		return Report{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	store, err := rdzv.Serve(ctx, "127.0.0.1:0")
	if err != nil {
		return Report{}, err
	}
	defer store.Close()
	job := fmt.Sprintf("spawn-%d-%d", os.Getpid(), time.Now().UnixNano())
	base := cleanEnv(os.Environ())
	cmds := make([]*exec.Cmd, n)
	outs := make([]*bytes.Buffer, n)
	errOuts := make([]*bytes.Buffer, n)
	for r := range n {
		cmd := exec.Command(exe, "-test.run=^$")
		cmd.Env = append(append(append([]string{}, base...), safetyEnv...),
			EnvRole+"="+role, "RANK="+strconv.Itoa(r), "WORLD_SIZE="+strconv.Itoa(n),
			"LOCAL_RANK="+strconv.Itoa(r), "LOCAL_WORLD_SIZE="+strconv.Itoa(n),
			rdzv.EnvStore+"=tcp://"+store.Addr(), rdzv.EnvJob+"="+job,
			rdzv.EnvTimeout+"="+strconv.Itoa(int(timeout.Seconds()+1))+"s")
		cmd.Env = append(cmd.Env, env...)
		outs[r], errOuts[r] = &bytes.Buffer{}, &bytes.Buffer{}
		cmd.Stdout, cmd.Stderr = outs[r], errOuts[r]
		if err := cmd.Start(); err != nil {
			for _, c := range cmds[:r] {
				_ = c.Process.Kill()
				_ = c.Wait()
			}
			return Report{}, fmt.Errorf("starting rank %d: %w", r, err)
		}
		cmds[r] = cmd
	}
	rep := Report{Ranks: make([]Result, n)}
	var wg sync.WaitGroup
	var mu sync.Mutex
	for r, cmd := range cmds {
		wg.Add(1)
		go func() {
			defer wg.Done()
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			res := Result{Rank: r, PID: cmd.Process.Pid}
			var werr error
			select {
			case werr = <-done:
			case <-ctx.Done():
				_ = cmd.Process.Kill() // this child only, by its PID
				res.Killed = true
				werr = <-done
			}
			res.ExitCode = exitCode(werr)
			mu.Lock()
			res.Stdout, res.Stderr = outs[r].String(), errOuts[r].String()
			rep.Ranks[r] = res
			mu.Unlock()
		}()
	}
	wg.Wait()
	for _, x := range rep.Ranks {
		if alive(x.PID) {
			rep.Left = append(rep.Left, x.PID)
		}
	}
	return rep, nil
}

func exitCode(err error) int {
	if err == nil {
		return 0
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	return -1
}

// alive reports whether pid still exists (a reaped child does not).
func alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// cleanEnv drops the variables World sets, so an outer launcher's do not leak in.
func cleanEnv(env []string) []string {
	drop := map[string]bool{EnvRole: true, "RANK": true, "WORLD_SIZE": true, "LOCAL_RANK": true, "LOCAL_WORLD_SIZE": true,
		"MASTER_ADDR": true, "MASTER_PORT": true, rdzv.EnvStore: true, rdzv.EnvJob: true, rdzv.EnvTimeout: true,
		"SLURM_PROCID": true, "NCCL_NVLS_ENABLE": true, rdzv.EnvK8sIndex: true}
	out := make([]string, 0, len(env))
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		if !drop[k] {
			out = append(out, kv)
		}
	}
	return out
}
