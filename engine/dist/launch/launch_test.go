package launch

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/dist"
	"github.com/tessera-qa/tessera-qa/engine/dist/tcp"
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/internal/testdeadline"
)

// The test binary doubles as the rank program (and as a launcher, for the signal test): with
// roleVar set, TestMain runs that role instead of the tests.
const roleVar = "TESSERA_LAUNCH_TEST_ROLE"

func TestMain(m *testing.M) {
	if role := os.Getenv(roleVar); role != "" {
		os.Exit(runRole(role))
	}
	testdeadline.Main(m)
}

func runRole(role string) int {
	rank, _ := strconv.Atoi(os.Getenv("RANK"))
	switch role {
	case "exchange":
		return exchange()
	case "fail-or-hang":
		// Rank 1 fails; the others start a grandchild, ignore SIGTERM and hang, so only the
		// process-group SIGKILL ends them.
		if rank == 1 {
			time.Sleep(300 * time.Millisecond)
			fmt.Println("failing now")
			return 3
		}
		signal.Ignore(syscall.SIGTERM)
		child := exec.Command(os.Args[0])
		child.Env = append(os.Environ(), roleVar+"=sleep")
		if err := child.Start(); err != nil {
			fmt.Println("cannot start grandchild:", err)
			return 1
		}
		fmt.Printf("pid=%d child=%d\n", os.Getpid(), child.Process.Pid)
		for {
			time.Sleep(time.Hour)
		}
	case "die":
		return die()
	case "sleep":
		for {
			time.Sleep(time.Hour)
		}
	case "trap":
		ch := make(chan os.Signal, 1)
		signal.Notify(ch, syscall.SIGINT, syscall.SIGTERM)
		fmt.Printf("ready pid=%d\n", os.Getpid())
		s := <-ch
		fmt.Printf("got %s\n", s)
		return 42
	case "launcher":
		// A launcher in its own process, so the test can signal it for real.
		exit, err := Run(context.Background(), Spec{NProcPerNode: 2, Program: os.Args[0], Env: []string{roleVar + "=trap"}, Grace: 5 * time.Second})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
		return exit
	case "fail-once":
		// Rank 1 of the first attempt fails; every rank of later attempts exchanges frames.
		fmt.Printf("attempt=%s job=%s\n", os.Getenv(EnvRestartCount), os.Getenv("TESSERA_RDZV_JOB"))
		if rank == 1 && os.Getenv(EnvRestartCount) == "0" {
			return 7
		}
		return exchange()
	case "env":
		for _, k := range rankVars {
			fmt.Printf("%s=%s\n", k, os.Getenv(k))
		}
		fmt.Println("EXTRA=" + os.Getenv("EXTRA"))
		fmt.Fprintln(os.Stderr, "to stderr")
		fmt.Print("no newline at the end")
		return 0
	}
	fmt.Fprintln(os.Stderr, "unknown role", role)
	return 2
}

// exchange is a real rank program: join from the environment, send a frame to every peer,
// check every frame received, all-reduce, print the result.
func exchange() int {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	t, err := tcp.FromEnv(ctx, 30*time.Second)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer t.Close()
	me, n := t.Rank(), t.World()
	for p := range n {
		pl := pattern(me, p)
		f := &dist.Frame{Header: dist.Header{Comm: 5, Op: dist.OpSend, DType: numerics.I8, Src: uint16(me), Count: uint64(len(pl)), CRC: dist.Checksum(pl)}, Payload: pl}
		if err := t.Send(ctx, p, f); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	for p := range n {
		f, err := t.Recv(ctx, 5, p)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		if !bytes.Equal(f.Payload, pattern(p, me)) || dist.Checksum(f.Payload) != f.CRC {
			fmt.Fprintf(os.Stderr, "frame from rank %d is wrong\n", p)
			return 1
		}
	}
	c := dist.NewComm(t, dist.Options{Timeout: 20 * time.Second})
	buf := make([]byte, 8)
	binary.LittleEndian.PutUint64(buf, uint64(float64bits(float64(me+1))))
	if err := c.AllReduce(ctx, numerics.F64, buf, buf, dist.Sum); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Printf("rank %d/%d local %s/%s sum=%g\n", me, n, os.Getenv("LOCAL_RANK"), os.Getenv("LOCAL_WORLD_SIZE"), float64frombits(binary.LittleEndian.Uint64(buf)))
	return 0
}

// die: after the mesh is up, the last rank kills itself (SIGKILL: no Close, no goodbye); the
// others, waiting for its frame, must hear E_TIMEOUT_COMM naming it within a second.
func die() int {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	t, err := tcp.FromEnv(ctx, 30*time.Second)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	victim := t.World() - 1
	if t.Rank() == victim {
		time.Sleep(200 * time.Millisecond)
		syscall.Kill(os.Getpid(), syscall.SIGKILL)
	}
	start := time.Now()
	_, err = t.Recv(ctx, 0, victim)
	took := time.Since(start) - 200*time.Millisecond
	fmt.Printf("after %s: %v\n", took.Round(time.Millisecond), err)
	if errs.CodeOf(err) != errs.TimeoutComm || !strings.Contains(err.Error(), fmt.Sprintf("rank %d", victim)) || took > time.Second {
		return 1
	}
	return 0
}

func pattern(from, to int) []byte {
	b := make([]byte, 1000+from*1000+to*77)
	r := rand.New(rand.NewPCG(uint64(from), uint64(to)))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// syncBuffer is a bytes.Buffer safe for the launcher's writers.
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

func spec(role string, n int) (Spec, *syncBuffer, *syncBuffer) {
	out, errOut := &syncBuffer{}, &syncBuffer{}
	return Spec{NProcPerNode: n, Program: os.Args[0], Env: []string{roleVar + "=" + role}, Stdout: out, Stderr: errOut,
		Timeout: 20 * time.Second, Grace: 2 * time.Second}, out, errOut
}

func TestLaunchThreeRanksExchangeFrames(t *testing.T) {
	s, out, errOut := spec("exchange", 3)
	exit, err := Run(context.Background(), s)
	if err != nil || exit != 0 {
		t.Fatalf("exit %d err %v\nstdout:\n%s\nstderr:\n%s", exit, err, out, errOut)
	}
	for r := range 3 {
		want := fmt.Sprintf("[rank %d] rank %d/3 local %d/3 sum=6\n", r, r, r)
		if !strings.Contains(out.String(), want) {
			t.Errorf("stdout lacks %q:\n%s", want, out)
		}
	}
}

func TestLaunchEnvironmentAndOutput(t *testing.T) {
	s, out, errOut := spec("env", 2)
	s.Env = append(s.Env, "EXTRA=yes", "RANK=99") // the launcher's RANK wins
	s.JobID = "job-x"
	exit, err := Run(context.Background(), s)
	if err != nil || exit != 0 {
		t.Fatalf("exit %d err %v\n%s%s", exit, err, out, errOut)
	}
	o := out.String()
	port := regexp.MustCompile(`\[rank 0\] TESSERA_RDZV=tcp://127.0.0.1:(\d+)`).FindStringSubmatch(o)
	mport := regexp.MustCompile(`\[rank 1\] MASTER_PORT=(\d+)`).FindStringSubmatch(o)
	if port == nil || mport == nil || port[1] == "0" || mport[1] == "0" || port[1] == mport[1] {
		t.Fatalf("want the store's port and a different free MASTER_PORT:\n%s", o)
	}
	for _, want := range []string{"[rank 1] RANK=1\n", "[rank 0] RANK=0\n", "[rank 1] WORLD_SIZE=2\n", "[rank 1] LOCAL_RANK=1\n",
		"[rank 0] LOCAL_WORLD_SIZE=2\n", "[rank 0] MASTER_ADDR=127.0.0.1\n", "[rank 1] TESSERA_RDZV=tcp://127.0.0.1:" + port[1] + "\n",
		"[rank 1] TESSERA_RDZV_JOB=job-x\n", "[rank 0] TESSERA_RDZV_TIMEOUT=20s\n", "[rank 0] EXTRA=yes\n",
		"[rank 1] no newline at the end\n"} {
		if !strings.Contains(o, want) {
			t.Errorf("stdout lacks %q", want)
		}
	}
	if e := errOut.String(); !strings.Contains(e, "[rank 0] to stderr\n") || !strings.Contains(e, "[rank 1] to stderr\n") {
		t.Errorf("stderr:\n%s", e)
	}
}

func TestLaunchExplicitMasterPort(t *testing.T) {
	p := freePortIn(t, 20000, 40000)
	s, out, errOut := spec("env", 1)
	s.MasterPort = p
	if exit, err := Run(context.Background(), s); exit != 0 || err != nil {
		t.Fatalf("exit %d err %v\n%s", exit, err, errOut)
	}
	for _, want := range []string{fmt.Sprintf("TESSERA_RDZV=tcp://127.0.0.1:%d\n", p), fmt.Sprintf("MASTER_PORT=%d\n", p+1)} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("stdout lacks %q:\n%s", want, out)
		}
	}
}

var pidLine = regexp.MustCompile(`\[rank (\d+)\] pid=(\d+) child=(\d+)`)

// One rank exits 3 while the others hang ignoring SIGTERM, each with a grandchild: the
// launcher exits 3, and no process of the job is left.
func TestLaunchFailureTearsDownEverything(t *testing.T) {
	s, out, errOut := spec("fail-or-hang", 3)
	s.Grace = 500 * time.Millisecond
	start := time.Now()
	exit, err := Run(context.Background(), s)
	if err != nil || exit != 3 {
		t.Fatalf("exit %d err %v, want 3\n%s%s", exit, err, out, errOut)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("took %s", d)
	}
	ms := pidLine.FindAllStringSubmatch(out.String(), -1)
	if len(ms) != 2 {
		t.Fatalf("want pid lines of ranks 0 and 2:\n%s", out)
	}
	for _, m := range ms {
		for _, p := range m[2:] {
			pid, _ := strconv.Atoi(p)
			if Alive(pid) {
				t.Errorf("process %d (rank %s or its child) outlived the launcher", pid, m[1])
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	}
	if e := errOut.String(); !strings.Contains(e, "[launch] rank 1 exited with code 3; terminating the other ranks") || !strings.Contains(e, "killing them") {
		t.Errorf("launcher log:\n%s", e)
	}
}

// SIGTERM and SIGINT to the launcher reach every rank; the launcher exits with their code.
func TestLaunchForwardsSignals(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			cmd := exec.Command(os.Args[0])
			cmd.Env = append(os.Environ(), roleVar+"=launcher")
			stdout, _ := cmd.StdoutPipe()
			var stderr syncBuffer
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer cmd.Process.Kill()
			lines := make(chan string, 100)
			go func() {
				sc := bufio.NewScanner(stdout)
				for sc.Scan() {
					lines <- sc.Text()
				}
				close(lines)
			}()
			var all []string
			var pids []int
			timeout := time.After(20 * time.Second)
			for len(pids) < 2 {
				select {
				case l, ok := <-lines:
					if !ok {
						t.Fatalf("launcher ended early: %v\n%s", all, stderr.String())
					}
					all = append(all, l)
					if _, p, ok := strings.Cut(l, "ready pid="); ok {
						pid, _ := strconv.Atoi(p)
						pids = append(pids, pid)
					}
				case <-timeout:
					t.Fatalf("ranks not ready: %v", all)
				}
			}
			cmd.Process.Signal(sig)
			for l := range lines {
				all = append(all, l)
			}
			err := cmd.Wait()
			if code := cmd.ProcessState.ExitCode(); code != 42 {
				t.Errorf("launcher exit %d (%v), want the ranks' 42\n%v\n%s", code, err, all, stderr.String())
			}
			for r := range 2 {
				want := fmt.Sprintf("[rank %d] got %s", r, sig.String())
				if !strings.Contains(strings.Join(all, "\n"), want) {
					t.Errorf("no %q in %v", want, all)
				}
			}
			for _, pid := range pids {
				if Alive(pid) {
					t.Errorf("rank process %d outlived the launcher", pid)
				}
			}
		})
	}
}

// Signals passed in (as the CLI's tests do) work the same; a second one kills at once.
func TestLaunchSignalsChannelAndSecondSignalKills(t *testing.T) {
	s, out, errOut := spec("fail-or-hang", 2)
	s.Env = []string{roleVar + "=sleep"}
	s.Grace = time.Minute
	sigs := make(chan os.Signal, 2)
	s.Signals = sigs
	go func() {
		time.Sleep(300 * time.Millisecond)
		sigs <- syscall.SIGTERM
		time.Sleep(200 * time.Millisecond)
		sigs <- syscall.SIGINT // the ranks ignore nothing here: SIGTERM already ended them
	}()
	start := time.Now()
	exit, err := Run(context.Background(), s)
	if err != nil || exit != 128+int(syscall.SIGTERM) {
		t.Fatalf("exit %d err %v\n%s%s", exit, err, out, errOut)
	}
	if time.Since(start) > 10*time.Second {
		t.Errorf("took %s", time.Since(start))
	}
	if !strings.Contains(errOut.String(), "[launch] terminated: forwarding it to the ranks") {
		t.Errorf("log:\n%s", errOut)
	}
}

func TestLaunchContextEndTearsDown(t *testing.T) {
	s, _, errOut := spec("sleep", 2)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	exit, err := Run(ctx, s)
	if errs.CodeOf(err) != errs.Timeout || exit == 0 {
		t.Fatalf("exit %d err %v\n%s", exit, err, errOut)
	}
}

func TestLaunchBadInput(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	busy := ln.Addr().(*net.TCPAddr).Port
	for _, c := range []struct {
		name string
		mod  func(*Spec)
		exit int
		code errs.Code
		says string
	}{
		{"nproc 0", func(s *Spec) { s.NProcPerNode = 0 }, 2, errs.Input, "--nproc-per-node 0"},
		{"node rank", func(s *Spec) { s.NNodes, s.NodeRank, s.MasterPort, s.MasterAddr = 2, 2, 1234, "h" }, 2, errs.Input, "--node-rank 2 outside --nnodes 2"},
		{"multi-node port", func(s *Spec) { s.NNodes, s.MasterAddr = 2, "h" }, 2, errs.Input, "--master-port is required"},
		{"port range", func(s *Spec) { s.MasterPort = 70000 }, 2, errs.Input, "--master-port 70000"},
		{"port top", func(s *Spec) { s.MasterPort = 65535 }, 2, errs.Input, "the port above it"},
		{"no program", func(s *Spec) { s.Program = "" }, 2, errs.Input, "no program"},
		{"missing program", func(s *Spec) { s.Program = "/nonexistent/prog" }, 2, errs.Input, `program "/nonexistent/prog"`},
		{"bad env", func(s *Spec) { s.Env = []string{"NOEQUALS"} }, 2, errs.Input, "KEY=VALUE"},
		{"port in use", func(s *Spec) { s.MasterPort = busy }, 3, errs.CommInit, fmt.Sprintf("127.0.0.1:%d", busy)},
	} {
		s, _, _ := spec("exchange", 2)
		c.mod(&s)
		exit, err := Run(context.Background(), s)
		if exit != c.exit || errs.CodeOf(err) != c.code || !strings.Contains(err.Error(), c.says) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: exit %d err %v; want exit %d, one %s line saying %q", c.name, exit, err, c.exit, c.code, c.says)
		}
	}
}

// The same rank program under torchrun-style variables set by hand, and under Slurm's.
func TestRanksJoinWithoutTheLauncher(t *testing.T) {
	port := freePortIn(t, 20000, 40000)
	jobID := port - 20000 + 20000*7 // SlurmPort(jobID) == port
	for _, mode := range []string{"torchrun", "slurm"} {
		t.Run(mode, func(t *testing.T) {
			var cmds []*exec.Cmd
			var outs []*syncBuffer
			for r := range 3 {
				cmd := exec.Command(os.Args[0])
				base := childEnv(os.Environ(), nil) // without the variables a launcher sets
				if mode == "torchrun" {
					base = append(base, "RANK="+strconv.Itoa(r), "WORLD_SIZE=3", "MASTER_ADDR=127.0.0.1", "MASTER_PORT="+strconv.Itoa(port))
				} else {
					base = append(base, "SLURM_PROCID="+strconv.Itoa(r), "SLURM_NTASKS=3", "SLURM_LOCALID="+strconv.Itoa(r),
						"SLURM_NODEID=0", "SLURM_TASKS_PER_NODE=3", "SLURM_NODELIST=localhost", "SLURM_JOB_ID="+strconv.Itoa(jobID), "SLURM_STEP_ID=0")
				}
				cmd.Env = append(base, roleVar+"=exchange", "TESSERA_RDZV_TIMEOUT=20s")
				out := &syncBuffer{}
				cmd.Stdout, cmd.Stderr = out, out
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				cmds, outs = append(cmds, cmd), append(outs, out)
			}
			for r, cmd := range cmds {
				if err := cmd.Wait(); err != nil {
					t.Errorf("rank %d: %v\n%s", r, err, outs[r])
				}
				if !strings.Contains(outs[r].String(), "sum=6") {
					t.Errorf("rank %d output:\n%s", r, outs[r])
				}
			}
		})
	}
}

// A rank process killed mid-job: every other rank's pending receive from it fails promptly
// with E_TIMEOUT_COMM naming it (run without the launcher, which would tear the job down).
func TestKilledRankProcessIsNamedPromptly(t *testing.T) {
	port := freePortIn(t, 20000, 40000)
	var cmds []*exec.Cmd
	var outs []*syncBuffer
	for r := range 3 {
		cmd := exec.Command(os.Args[0])
		cmd.Env = append(childEnv(os.Environ(), nil), roleVar+"=die", "RANK="+strconv.Itoa(r), "WORLD_SIZE=3",
			"MASTER_ADDR=127.0.0.1", "MASTER_PORT="+strconv.Itoa(port), "TESSERA_RDZV_TIMEOUT=20s")
		out := &syncBuffer{}
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds, outs = append(cmds, cmd), append(outs, out)
	}
	for r, cmd := range cmds {
		err := cmd.Wait()
		if r == 2 {
			if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || ws.Signal() != syscall.SIGKILL {
				t.Errorf("rank 2 was not killed: %v\n%s", err, outs[r])
			}
			continue
		}
		if err != nil || !strings.Contains(outs[r].String(), "E_TIMEOUT_COMM") || !strings.Contains(outs[r].String(), "rank 2 (127.0.0.1:") {
			t.Errorf("rank %d: %v\n%s", r, err, outs[r])
		}
		t.Logf("rank %d: %s", r, strings.TrimSpace(outs[r].String()))
	}
}

func freePortIn(t *testing.T, lo, hi int) int {
	for range 200 {
		p := lo + rand.IntN(hi-lo)
		ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err == nil {
			ln.Close()
			return p
		}
	}
	t.Fatal("no free port")
	return 0
}

func TestLaunchRestartsAFailedGroup(t *testing.T) {
	s, out, errOut := spec("fail-once", 3)
	s.MaxRestarts = 2
	s.JobID = "restart-test"
	s.Grace = 500 * time.Millisecond
	var mu sync.Mutex
	var evs []Event
	s.Events = func(e Event) { mu.Lock(); evs = append(evs, e); mu.Unlock() }
	exit, err := Run(context.Background(), s)
	if err != nil || exit != 0 {
		t.Fatalf("exit %d err %v\nstdout:\n%s\nstderr:\n%s", exit, err, out, errOut)
	}
	// Attempt 0 and attempt 1 each started 3 ranks; one restart between them, after every rank
	// of attempt 0 ended.
	var kinds []string
	for _, e := range evs {
		kinds = append(kinds, fmt.Sprintf("%s@%d", e.Kind, e.Attempt))
	}
	restart := slices.IndexFunc(evs, func(e Event) bool { return e.Kind == Restarting })
	if restart < 0 || evs[restart].Attempt != 1 || evs[restart].Rank != 1 || evs[restart].Code != 7 {
		t.Fatalf("no restart event for rank 1's exit 7: %v", kinds)
	}
	for _, e := range evs[:restart] {
		if e.Attempt != 0 {
			t.Errorf("event of attempt %d before the restart: %v", e.Attempt, kinds)
		}
	}
	if n := strings.Count(strings.Join(kinds, " "), "rank_exited@0"); n != 3 {
		t.Errorf("%d ranks of attempt 0 ended before the restart, want 3: %v", n, kinds)
	}
	for _, e := range evs[restart+1:] {
		if e.Attempt != 1 {
			t.Errorf("event of attempt %d after the restart: %v", e.Attempt, kinds)
		}
	}
	o := out.String()
	for _, want := range []string{"attempt=0 job=" + s.JobID + "-a0", "attempt=1 job=" + s.JobID + "-a1", "sum=6"} {
		if !strings.Contains(o, want) {
			t.Errorf("stdout lacks %q:\n%s", want, o)
		}
	}
	if !strings.Contains(errOut.String(), "restarting the group (restart 1 of 2)") {
		t.Errorf("no restart line:\n%s", errOut)
	}
}

func TestLaunchGivesUpAfterMaxRestarts(t *testing.T) {
	s, out, errOut := spec("fail-or-hang", 2)
	s.MaxRestarts = 1
	s.Grace = 300 * time.Millisecond
	restarts, gaveUp := 0, 0
	s.Events = func(e Event) {
		switch e.Kind {
		case Restarting:
			restarts++
		case GivingUp:
			gaveUp++
		}
	}
	exit, err := Run(context.Background(), s)
	if err != nil || exit != 3 {
		t.Fatalf("exit %d err %v, want 3\nstdout:\n%s\nstderr:\n%s", exit, err, out, errOut)
	}
	if restarts != 1 || gaveUp != 1 {
		t.Errorf("%d restarts and %d give-ups, want 1 and 1", restarts, gaveUp)
	}
	if !strings.Contains(errOut.String(), "no restart left (--max-restarts 1)") {
		t.Errorf("no give-up line:\n%s", errOut)
	}
}

func TestLaunchRefusesNegativeRestarts(t *testing.T) {
	s, _, _ := spec("env", 1)
	s.MaxRestarts = -1
	if exit, err := Run(context.Background(), s); exit != 2 || errs.CodeOf(err) != errs.Input {
		t.Fatalf("exit %d err %v", exit, err)
	}
}
