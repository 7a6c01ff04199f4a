package chaos_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/tessera-qa/tessera-qa/chaos"
	"github.com/tessera-qa/tessera-qa/chaos/container"
	_ "github.com/tessera-qa/tessera-qa/engine/backend/all"
)

// The suite's collectives bound: silences longer than this are detected. Short, so that hangs
// and partitions are found fast; long enough for a loaded CI machine.
const commTimeout = 2 * time.Second

// cliResult is the part of `tessera-qa chaos --json` the specs read.
type cliResult struct {
	Passed        bool            `json:"passed"`
	BitsIdentical bool            `json:"bits_identical"`
	Summary       chaos.Summary   `json:"summary"`
	Scenarios     []*chaos.Report `json:"scenarios"`
}

// runCLI runs tessera-qa with args (in its own process group), returns the exit code, stdout
// and stderr, and checks that nothing of the job outlived it.
func runCLI(env []string, args ...string) (int, string, string) {
	if binErr != "" {
		Skip("no tessera-qa binary: " + binErr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	cmd.Env = append(os.Environ(), env...)
	cmd.Dir = GinkgoT().TempDir()
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	err := cmd.Run()
	code := 0
	if err != nil {
		var ee *exec.ExitError
		Expect(errors.As(err, &ee)).To(BeTrue(), "tessera-qa did not run: %v", err)
		code = ee.ExitCode()
	}
	Expect(syscall.Kill(-cmd.Process.Pid, 0)).To(MatchError(syscall.ESRCH), "a process of the chaos job outlived it")
	GinkgoWriter.Printf("$ tessera-qa %s\n%s\n%s\n", strings.Join(args, " "), out.String(), lastLines(errb.String(), 15))
	return code, out.String(), errb.String()
}

func lastLines(s string, n int) string {
	ls := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(ls[max(0, len(ls)-n):], "\n")
}

func parse(js string) *cliResult {
	r := &cliResult{}
	Expect(json.Unmarshal([]byte(js), r)).To(Succeed(), "chaos --json -: %s", js)
	return r
}

// killedAndRecovered checks a one-scenario --kill-rank run's JSON: it passed with the
// fault-free run's bits after one restart, the kill detected as a silent rank. It returns the
// fault's result.
func killedAndRecovered(js string) chaos.FaultResult {
	GinkgoHelper()
	r := parse(js)
	Expect(r.Passed).To(BeTrue())
	Expect(r.BitsIdentical).To(BeTrue())
	Expect(r.Scenarios).To(HaveLen(1))
	rep := r.Scenarios[0]
	Expect(rep.BitsIdentical).To(BeTrue(), "final parameters %s, fault-free %s", rep.Digest, rep.RefDigest)
	Expect(rep.Restarts).To(Equal(1))
	Expect(rep.Faults).To(HaveLen(1))
	f := rep.Faults[0]
	Expect(f.Fault).To(Equal("rank/kill"))
	Expect(f.Outcome).To(Equal("detected"))
	Expect(f.DetectedBy).To(Equal("E_TIMEOUT_COMM"))
	Expect(f.Recovered).To(BeTrue())
	return f
}

// execute runs a scenario through package chaos with the suite's binary as the rank program
// and checks that every rank process it started is gone.
func execute(sc *chaos.Scenario) *chaos.Report {
	if sc.Transport != "inproc" && binErr != "" {
		Skip("no tessera-qa binary: " + binErr)
	}
	if sc.CommTimeout == 0 {
		sc.CommTimeout = chaos.Duration(commTimeout)
	}
	dir := GinkgoT().TempDir()
	rep, err := chaos.Execute(context.Background(), sc, chaos.Options{Dir: dir, Program: bin, Args: []string{"chaos"}, Log: GinkgoWriter})
	Expect(err).NotTo(HaveOccurred())
	GinkgoWriter.Println(rep.Table())
	evs, err := chaos.ReadHistory(dir)
	Expect(err).NotTo(HaveOccurred())
	for _, e := range evs {
		if e.Kind == chaos.KindRankStart {
			Expect(syscall.Kill(e.PID, 0)).To(MatchError(syscall.ESRCH), "rank process %d (%s, attempt %d) outlived the run", e.PID, e.Detail, e.Attempt)
		}
	}
	return rep
}

func expectRecovered(rep *chaos.Report) {
	Expect(rep.Violations).To(BeEmpty())
	Expect(rep.Passed).To(BeTrue())
	Expect(rep.Finished).To(BeTrue())
	Expect(rep.BitsIdentical).To(BeTrue(), "final parameters %s, fault-free %s", rep.Digest, rep.RefDigest)
	for _, f := range rep.Faults {
		Expect(f.Outcome).To(Or(Equal("detected"), Equal("tolerated"), HavePrefix("masked")), "%s %s", f.ID, f.Fault)
		if strings.HasPrefix(f.Expected, "detect") && f.Outcome == "detected" {
			Expect(f.TTD).To(BeNumerically("<=", 5), "%s %s: time to detect", f.ID, f.Fault)
			Expect(f.Recovered).To(BeTrue(), "%s %s", f.ID, f.Fault)
			Expect(f.TTR).To(BeNumerically("<=", 30), "%s %s: time to recover", f.ID, f.Fault)
		}
	}
}

var _ = Describe("tessera-qa chaos", Label("chaos"), func() {
	It("kills rank 1 of 3 mid-run, detects it, recovers with identical bits and exits 0 (--json -)", func() {
		code, out, _ := runCLI(nil, "chaos", "--kill-rank", "1", "--world", "3", "--workload", "train:mlp", "--json", "-")
		Expect(code).To(Equal(0))
		f := killedAndRecovered(out)
		Expect(f.LostSteps).To(Equal(5), "killed after step 35, resumed from checkpoint 30")
	})

	It("kills a rank of a tensor-parallel transformer block (--mesh dp=2,tp=2), detects it and recovers with identical bits", func() {
		code, out, _ := runCLI(nil, "chaos", "--kill-rank", "2", "--mesh", "dp=2,tp=2", "--workload", "train:transformer-block",
			"--steps", "20", "--checkpoint-every", "5", "--json", "-")
		Expect(code).To(Equal(0))
		killedAndRecovered(out)
	})

	It("names a fail-slow rank (rank/slow@1:10) as a straggler, with its time to detect, and keeps the bits; its --profile trace ranks it slowest", func() {
		code, out, _ := runCLI(nil, "chaos", "--faults", "rank/slow@1:10", "--world", "3", "--profile", "--json", "-")
		Expect(code).To(Equal(0))
		r := parse(out)
		Expect(r.Passed).To(BeTrue())
		Expect(r.Scenarios).To(HaveLen(1))
		rep := r.Scenarios[0]
		Expect(rep.BitsIdentical).To(BeTrue())
		Expect(rep.Restarts).To(Equal(0), "a slow rank fails nothing")
		f := rep.Faults[0]
		Expect(f.Outcome).To(Equal("detected"))
		Expect(f.DetectedBy).To(Equal("E_STRAGGLER"))
		Expect(f.DetectRank).To(Equal(1))
		Expect(f.TTD).To(BeNumerically(">", 0))
		Expect(f.TTD).To(BeNumerically("<", 2), "the watch needs a few windows of steps, not the whole slow spell")
		Expect(rep.Profiles).To(HaveLen(1))
		p := rep.Profiles[0]
		Expect(p.Error).To(BeEmpty())
		Expect(p.Slices).To(BeNumerically(">", 0), "trace %s", p.Trace)
		Expect(p.Ranks).To(HaveLen(3))
		Expect(p.Ranks[0].Rank).To(Equal(1), "the slowed rank does the most work a step: %+v", p.Ranks)
	})

	It("passes seeded random fault schedules (--schedule random --count 10 --seed 1)", func() {
		randomSchedules(10)
	})

	It("passes the nightly size: 100 random fault schedules", Label("slow"), func() {
		if os.Getenv("TESSERA_CHAOS_NIGHTLY") == "" {
			Skip("the nightly size (about 5 minutes): set TESSERA_CHAOS_NIGHTLY=1")
		}
		randomSchedules(100)
	})

	It("fails (exit 1) when a planted bug lets a corrupted frame through: the checker sees the bits change", func() {
		code, out, _ := runCLI(nil, "chaos", "--faults", "net/corrupt@1:12", "--world", "3", "--plant", "accept-bad-checksum", "--json", "-")
		Expect(code).To(Equal(1))
		r := parse(out)
		Expect(r.Passed).To(BeFalse())
		Expect(r.Scenarios[0].Violations).To(ContainElement(HavePrefix("silent corruption")))
		Expect(r.Scenarios[0].Faults[0].Outcome).To(Equal("NOT DETECTED"))
	})

	It("runs the same command as every task of a Slurm job: each task an agent, rank 1's kills itself, agent 0 checks", func() {
		if binErr != "" {
			Skip("no tessera-qa binary: " + binErr)
		}
		dir := GinkgoT().TempDir()
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		const tasks = 3
		port := strconv.Itoa(freePort()) // srun derives it from the job id; here the OS picks it
		cmds := make([]*exec.Cmd, tasks)
		outs := make([]*strings.Builder, tasks)
		for i := range tasks {
			cmds[i] = exec.CommandContext(ctx, bin, "chaos", "--kill-rank", "1", "--artifacts", filepath.Join(dir, "art"), "--json", filepath.Join(dir, fmt.Sprintf("task%d.json", i)))
			cmds[i].Env = append(os.Environ(), "SLURM_PROCID="+strconv.Itoa(i), "SLURM_NTASKS=3", "SLURM_LOCALID="+strconv.Itoa(i),
				"SLURM_JOB_ID=4242", "SLURM_NODELIST=localhost", "MASTER_ADDR=127.0.0.1", "MASTER_PORT="+port)
			outs[i] = &strings.Builder{}
			cmds[i].Stdout, cmds[i].Stderr = outs[i], outs[i]
			cmds[i].SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
			Expect(cmds[i].Start()).To(Succeed())
		}
		for i := range tasks {
			err := cmds[i].Wait()
			GinkgoWriter.Printf("task %d:\n%s\n", i, lastLines(outs[i].String(), 20))
			Expect(err).NotTo(HaveOccurred(), "task %d", i)
			Expect(syscall.Kill(-cmds[i].Process.Pid, 0)).To(MatchError(syscall.ESRCH), "a process of task %d outlived it", i)
		}
		data, err := os.ReadFile(filepath.Join(dir, "task0.json"))
		Expect(err).NotTo(HaveOccurred())
		r := parse(string(data))
		Expect(r.Passed).To(BeTrue())
		Expect(r.Scenarios[0].Restarts).To(Equal(1))
		Expect(r.Scenarios[0].Faults[0].DetectedBy).To(Equal("E_TIMEOUT_COMM"))
	})
})

// Every fault kind that can act on this machine, once, on process ranks over tcp (world 4).
var _ = Describe("every fault kind on process ranks (tcp, world 4)", Label("chaos"), func() {
	run := chaos.Run{Transport: "tcp", World: 4, CommTimeout: commTimeout, Backend: "cpu", Root: os.Geteuid() == 0, CheckEvery: 10}
	for _, f := range chaos.Catalogue() {
		step := 25
		switch f.(type) {
		case *chaos.CheckpointCorrupt, *chaos.TornWrite:
			step = 30
		}
		It(fmt.Sprintf("%s at step %d of rank 2", f.Name(), step), func() {
			if err := f.Available(run); err != nil {
				Skip(err.Error())
			}
			rep := execute(&chaos.Scenario{Name: "kind/" + f.Name(), World: 4, Faults: []chaos.Injection{{Fault: f, Rank: 2, Step: step}}})
			expectRecovered(rep)
			Expect(rep.Faults[0].Outcome).To(Equal(map[bool]string{true: "detected", false: "tolerated"}[f.Expect(run).Detect != nil]))
		})
	}

	It("recovers the transformer block from a kill with identical bits", func() {
		rep := execute(&chaos.Scenario{Name: "kind/transformer-kill", World: 4, Workload: "train:transformer-block", Steps: 30,
			Faults: []chaos.Injection{{Fault: &chaos.Kill{}, Rank: 3, Step: 17}}})
		expectRecovered(rep)
		Expect(rep.Restarts).To(Equal(1))
	})
})

// The faults on frames, on goroutine ranks (the in-process transport): the agent restarts
// the group itself.
var _ = Describe("the frame faults on goroutine ranks (inproc, world 3)", Label("chaos"), func() {
	for _, f := range []chaos.Fault{&chaos.Drop{}, &chaos.Corrupt{}, &chaos.Duplicate{}, &chaos.Delay{}, &chaos.Partition{}, &chaos.NaN{}} {
		It(f.Name(), func() {
			rep := execute(&chaos.Scenario{Name: "inproc/" + f.Name(), Transport: "inproc", World: 3, Steps: 30, CheckpointEvery: 5,
				Faults: []chaos.Injection{{Fault: f, Rank: 1, Step: 12}}})
			expectRecovered(rep)
			Expect(rep.Faults[0].Outcome).To(Equal("detected"))
			Expect(rep.Restarts).To(Equal(1))
		})
	}
})

// The Fourier neural operator (issue 26) on a tensor-parallel mesh, kept cheap: goroutine
// ranks, 12 steps; a corrupted frame must be detected, never applied, and the group recovered
// from its checkpoint with the fault-free run's bits.
var _ = Describe("the fno on a dp=2,tp=2 mesh (inproc)", Label("chaos"), func() {
	It("recovers from a corrupted frame with identical bits", func() {
		rep := execute(&chaos.Scenario{Name: "inproc/fno-corrupt", Transport: "inproc", Mesh: "dp=2,tp=2", Workload: "train:fno",
			Steps: 12, CheckpointEvery: 4, Faults: []chaos.Injection{{Fault: &chaos.Corrupt{}, Rank: 1, Step: 6}}})
		expectRecovered(rep)
		Expect(rep.Faults[0].Outcome).To(Equal("detected"))
		Expect(rep.Restarts).To(Equal(1))
	})
})

// The named regression scenarios.
var _ = Describe("regression scenarios (tcp, world 3)", Label("chaos"), func() {
	for _, sc := range chaos.Regressions(3) {
		It(sc.Name, func() {
			expectRecovered(execute(sc))
		})
	}
})

func freePort() int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	Expect(err).NotTo(HaveOccurred())
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// The ranks as containers on a private Docker network: node loss, a frozen node, a node cut
// off the network. The agent acts through the Docker API, which takes a moment: the runs are
// long enough (100 steps) for the fault to land before the job could end.
var _ = Describe("ranks as containers (Docker)", Label("chaos", "docker"), Ordered, func() {
	var l *container.Launcher
	var dir string
	BeforeAll(func() {
		if err := container.Available(context.Background()); err != nil {
			Skip("no Docker daemon answers: " + err.Error())
		}
		if binErr != "" {
			Skip("no tessera-qa binary: " + binErr)
		}
		dir = GinkgoT().TempDir()
		var err error
		l, err = container.New(context.Background(), bin, dir)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func() {
			l.Close()
			// Nothing of the scenarios is left: no container of the image, no network.
			out, _ := exec.Command("/usr/bin/docker", "ps", "-aq", "--filter", "ancestor="+l.Image).CombinedOutput()
			Expect(strings.TrimSpace(string(out))).To(BeEmpty(), "containers left behind")
			out, _ = exec.Command("/usr/bin/docker", "network", "ls", "-q", "--filter", "name="+l.Net.Name).CombinedOutput()
			Expect(strings.TrimSpace(string(out))).To(BeEmpty(), "network left behind")
		})
	})
	for _, f := range []chaos.Fault{&chaos.NodeKill{}, &chaos.NodePause{}, &chaos.NodeDisconnect{}} {
		It(f.Name()+" of rank 1 of 3 at step 15", func() {
			sc := &chaos.Scenario{Name: "container/" + f.Name(), World: 3, Steps: 100, CommTimeout: chaos.Duration(commTimeout),
				Faults: []chaos.Injection{{Fault: f, Rank: 1, Step: 15}}}
			rep, err := chaos.Execute(context.Background(), sc, chaos.Options{Dir: filepath.Join(dir, strings.ReplaceAll(f.Name(), "/", "-")),
				Program: "/tessera-qa", Args: []string{"chaos"}, Launcher: l, StoreListen: l.StoreListen(), Log: GinkgoWriter})
			Expect(err).NotTo(HaveOccurred())
			GinkgoWriter.Println(rep.Table())
			expectRecovered(rep)
			Expect(rep.Faults[0].Outcome).To(Equal("detected"))
			Expect(rep.Restarts).To(Equal(1))
		})
	}
})

// randomSchedules runs n seeded random schedules through the CLI and checks the summary
// against the bounds.
func randomSchedules(n int) {

	code, out, _ := runCLI(nil, "chaos", "--schedule", "random", "--count", strconv.Itoa(n), "--seed", "1",
		"--world", "3", "--comm-timeout", commTimeout.String(), "--json", "-")
	r := parse(out)
	for _, rep := range r.Scenarios {
		Expect(rep.Violations).To(BeEmpty(), rep.Scenario)
	}
	Expect(code).To(Equal(0))
	Expect(r.Summary.Runs).To(Equal(n))
	Expect(r.Summary.SilentCorruptions).To(BeZero())
	Expect(r.Summary.Hangs).To(BeZero())
	Expect(r.Summary.Undetected).To(BeZero())
	Expect(r.Summary.TTD.P95).To(BeNumerically("<=", 5))
	Expect(r.Summary.TTR.P95).To(BeNumerically("<=", 30))
	if f := os.Getenv("TESSERA_CI_OUT"); f != "" {
		os.WriteFile(filepath.Join(f, fmt.Sprintf("chaos-random-%d.json", n)), []byte(out), 0o644)
	}
}
