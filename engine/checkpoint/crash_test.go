//go:build unix

package checkpoint

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/errs"
)

// The helper process is this test binary re-executed with these variables set.
const (
	helperDirEnv   = "TESSERA_CKPT_HELPER_DIR"
	helperPhaseEnv = "TESSERA_CKPT_HELPER_PHASE"
	helperRankEnv  = "TESSERA_CKPT_HELPER_RANK"
	crashSeed      = 42
	crashWorld     = 2
	crashElems     = 64 << 10 // 256 KiB of f32 per rank: several 64 KiB buffer flushes
)

// TestHelperProcess saves step 10 of a 2-rank world (goroutine ranks) cleanly, then saves
// step 20 and SIGKILLs itself when the given rank reaches the given phase. It runs only as
// the child of TestCrashPointsSIGKILL.
func TestHelperProcess(t *testing.T) {
	dir := os.Getenv(helperDirEnv)
	if dir == "" {
		t.Skip("helper process for TestCrashPointsSIGKILL")
	}
	phase := os.Getenv(helperPhaseEnv)
	rank, _ := strconv.Atoi(os.Getenv(helperRankEnv))
	var armed atomic.Bool
	crashHook = func(p string, r int) {
		if armed.Load() && p == phase && r == rank {
			fmt.Fprintf(os.Stderr, "helper: reached %s on rank %d, sending SIGKILL\n", p, r)
			syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {} // never returns: the signal ends the process
		}
	}
	mustSaveWorld(t, dir, 0, crashSeed, 10, crashWorld, crashElems)
	armed.Store(true)
	mustSaveWorld(t, dir, 0, crashSeed, 20, crashWorld, crashElems)
	fmt.Fprintf(os.Stderr, "helper: step 20 saved without reaching %s on rank %d\n", phase, rank)
	os.Exit(3)
}

// runHelper runs the helper process and returns its stderr once it is gone; it fails the test
// unless the helper died of SIGKILL. It never leaves the child running.
func runHelper(t *testing.T, dir, phase string, rank int) string {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), helperDirEnv+"="+dir, helperPhaseEnv+"="+phase, helperRankEnv+"="+strconv.Itoa(rank))
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		<-done
		t.Fatalf("helper still running after 60 s (killed it); output:\n%s", stderr.String())
	}
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		t.Fatalf("helper: %v, want death by SIGKILL; output:\n%s", err, stderr.String())
	}
	ws, ok := exit.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("helper ended with %v, want SIGKILL; output:\n%s", err, stderr.String())
	}
	want := fmt.Sprintf("reached %s on rank %d", phase, rank)
	if !strings.Contains(stderr.String(), want) {
		t.Fatalf("helper was killed but did not report %q; output:\n%s", want, stderr.String())
	}
	return stderr.String()
}

func crashStates(step int) []State {
	out := make([]State, crashWorld)
	for r := range out {
		out[r] = testState(crashSeed, step, r, crashElems)
	}
	return out
}

func TestCrashPointsSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("re-executes the test binary")
	}
	cases := []struct {
		phase string
		rank  int
		step  int // what a load must return after the crash
	}{
		{phaseTempHalf, 1, 10},
		{phaseTempHalf, 0, 10},
		{phaseTempSynced, 1, 10},
		{phaseTempSynced, 0, 10},
		{phaseRenamed, 1, 10},
		{phaseRenamed, 0, 10},
		{phaseBarrierPassed, 0, 10},
		{phaseManifestTemp, 0, 10},
		{phaseManifestRename, 0, 20},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%s/rank-%d", c.phase, c.rank), func(t *testing.T) {
			dir := t.TempDir()
			runHelper(t, dir, c.phase, c.rank)

			// Right after the crash: the newest committed step, bit for bit, every rank, and
			// the crashed save's leftovers are silent (pending, not corrupt).
			ls := mustLoad(t, dir, crashStates(c.step))
			for r, l := range ls {
				if len(l.Notices) != 0 {
					t.Fatalf("rank %d notices %q", r, l.Notices)
				}
			}
			infos, err := List(dir)
			if err != nil {
				t.Fatal(err)
			}
			want20 := Pending
			if c.step == 20 {
				want20 = Committed
			}
			if len(infos) != 2 || infos[0].Status != Committed || infos[1].Step != 20 || infos[1].Status != want20 {
				t.Fatalf("List after the crash: %+v", infos)
			}
			if c.phase == phaseTempHalf {
				tmp, _ := filepath.Glob(filepath.Join(dir, StepDirName(20), "."+RankFileName(c.rank)+".tmp-*"))
				full, err := os.Stat(filepath.Join(dir, StepDirName(10), RankFileName(c.rank)))
				if len(tmp) != 1 || err != nil {
					t.Fatalf("temporary files %v (want 1), %v", tmp, err)
				}
				// Half written: some of the bytes, not all (step 10's file has the same size).
				if part, err := os.Stat(tmp[0]); err != nil || part.Size() < full.Size()/3 || part.Size() >= full.Size() {
					t.Fatalf("temporary file %s: %v bytes of %d", tmp[0], part.Size(), full.Size())
				}
			}

			// The run resumes: the next save commits, removes the leftovers and keeps 1.
			next := 20
			if c.step == 20 {
				next = 30
				res := saveWorld(t, dir, 1, crashStates(20))
				if errs.CodeOf(res[0]) != errs.Input {
					t.Fatalf("saving the committed step 20 again: %v, want E_INPUT", res[0])
				}
			}
			for r, err := range saveWorld(t, dir, 1, crashStates(next)) {
				if err != nil {
					t.Fatalf("resume: save step %d rank %d: %v", next, r, err)
				}
			}
			mustLoad(t, dir, crashStates(next))
			if infos, _ := List(dir); len(infos) != 1 || infos[0].Step != next || infos[0].Status != Committed {
				t.Fatalf("List after resuming with Keep 1: %+v", infos)
			}
			if d := dotNames(t, dir); len(d) != 0 {
				t.Fatalf("leftovers after resuming: %v", d)
			}
		})
	}
}
