package partitions_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strings"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/tessera-qa/tessera-qa/engine/backend/cuda"
	"github.com/tessera-qa/tessera-qa/engine/compiler/ptx"
	"github.com/tessera-qa/tessera-qa/engine/failpoint"
	"github.com/tessera-qa/tessera-qa/golden"
	"github.com/tessera-qa/tessera-qa/mig/green"
	"github.com/tessera-qa/tessera-qa/stress"
)

// catalogueOn runs the golden catalogue in a child process placed on an SM partition of sms
// SMs (0: the whole GPU), with extra environment.
func catalogueOn(sms int, env ...string) golden.DigestSet {
	GinkgoHelper()
	if sms > 0 {
		env = append(env, fmt.Sprintf("TESSERA_CUDA_SMS=%d", sms))
	} else {
		env = append(env, "TESSERA_CUDA_SMS=")
	}
	for _, e := range env {
		k, v, _ := strings.Cut(e, "=")
		GinkgoT().Setenv(k, v) // DigestsFromChild passes this process's environment on
	}
	set, err := golden.DigestsFromChild(5*time.Minute, os.Args[0], "-test.run=^TestPartitions$")
	Expect(err).NotTo(HaveOccurred())
	for k, e := range set.Errors {
		if strings.Contains(e, ptx.NotLowered) { // a declared gap (tessera-qa ops --coverage), not a partition's fault
			delete(set.Errors, k)
		}
	}
	Expect(set.Errors).To(BeEmpty(), "catalogue errors on %d SMs", sms)
	Expect(set.Digests).NotTo(BeEmpty(), "the child ran no spec on %d SMs", sms)
	return set
}

// differ lists the specs whose digests differ between a and b (and those only one has).
func differ(a, b golden.DigestSet) []string {
	var out []string
	for k, da := range a.Digests {
		if db, ok := b.Digests[k]; !ok || strings.Join(da, ",") != strings.Join(db, ",") {
			out = append(out, k)
		}
	}
	for k := range b.Digests {
		if _, ok := a.Digests[k]; !ok {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

func first(xs []string, n int) []string { return xs[:min(n, len(xs))] }

var _ = Describe("the engine on SM partitions", Label("gpu"), Ordered, func() {
	var whole golden.DigestSet
	var quarter, half int

	BeforeAll(func() {
		sms := needGPU()
		var err error
		quarter, err = green.Plan(sms, 4, 0)
		Expect(err).NotTo(HaveOccurred())
		half, err = green.Plan(sms, 2, 0)
		Expect(err).NotTo(HaveOccurred())
		whole = catalogueOn(0)
	})

	It("gives the golden catalogue's bits on 1/4, 1/2 and the whole GPU", func() {
		for _, sms := range []int{quarter, half} {
			set := catalogueOn(sms)
			d := differ(whole, set)
			AddReportEntry("golden on partitions", goldenEntry{Specs: len(whole.Digests), SMs: sms, Differing: len(d), SameBits: len(d) == 0})
			Expect(d).To(BeEmpty(), "E_NONDETERMINISTIC: %d of %d specs differ between %d SMs and the whole GPU, e.g. %v",
				len(d), len(whole.Digests), sms, first(d, 5))
		}
	})

	It("gives the same bits on a partition while another process loads the whole GPU", func() {
		cmd := exec.Command(os.Args[0], "-test.run=^TestPartitions$")
		cmd.Env = append(os.Environ(), childEnv+"=load", "TESSERA_CUDA_SMS=")
		cmd.Stderr = GinkgoWriter
		out, err := cmd.StdoutPipe()
		Expect(err).NotTo(HaveOccurred())
		Expect(cmd.Start()).To(Succeed())
		pid := cmd.Process.Pid
		exited := make(chan struct{})
		go func() { _ = cmd.Wait(); close(exited) }()
		DeferCleanup(func() {
			_ = cmd.Process.Kill()
			select {
			case <-exited:
			case <-time.After(30 * time.Second):
				Fail(fmt.Sprintf("E_TIMEOUT: load process %d not reaped 30 s after SIGKILL", pid))
			}
			Expect(errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)).To(BeTrue(), "load process %d still exists", pid)
		})
		ready := make(chan string, 1)
		go func() {
			l, _ := bufio.NewReader(out).ReadString('\n')
			ready <- l
		}()
		select {
		case l := <-ready:
			Expect(l).To(HavePrefix("LOADING"), "load child: %s", l)
		case <-time.After(2 * time.Minute):
			Fail("E_TIMEOUT: the load process did not start loading within 2 minutes")
		}
		set := catalogueOn(quarter)
		select {
		case <-exited:
			Fail("the load process ended before the catalogue did: the catalogue ran without load")
		default:
		}
		d := differ(whole, set)
		Expect(d).To(BeEmpty(), "E_NONDETERMINISTIC: %d specs differ on %d SMs under load, e.g. %v", len(d), quarter, first(d, 5))
	})

	It("catches a planted reduction tiling that depends on the SM count", func() {
		if !failpoint.Compiled {
			Skip("needs a failpoints build: go test -c -tags failpoints ./suites/partitions")
		}
		env := failpoint.EnvVar + "=" + failpoint.CUDAReduceTileFromSMs
		a, b := catalogueOn(0, env), catalogueOn(quarter, env)
		Expect(differ(catalogueOn(0, env), a)).To(BeEmpty(), "the planted fault must repeat on one device")
		d := differ(a, b)
		Expect(d).NotTo(BeEmpty(), "the SM-count-dependent tiling went unseen")
		AddReportEntry("partitions", fmt.Sprintf("planted %s: %d specs differ between %d SMs and the whole GPU, e.g. %v",
			failpoint.CUDAReduceTileFromSMs, len(d), quarter, first(d, 3)))
	})
})

// loadGPU is the "load" child: stress jobs on every SM of the GPU, in lanes of their own, until
// the parent kills it (or 5 minutes pass). It prints LOADING when the soak's first progress
// line comes, that is once the jobs run.
func loadGPU(fail func(error) int) int {
	b := cuda.New(0)
	if err := b.Available(); err != nil {
		return fail(err)
	}
	dir, err := os.MkdirTemp("", "partitions-load-")
	if err != nil {
		return fail(err)
	}
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	_, err = stress.Run(ctx, stress.Options{Mode: stress.ModeStreams, Jobs: 4, Backend: b, Duration: 5 * time.Minute,
		Seed: 3, PerJob: 4, Reps: 1, OutDir: dir, Progress: &announce{}})
	if err != nil {
		return fail(err)
	}
	return 0
}

// announce prints LOADING on stdout at the first progress line and drops the lines.
type announce struct{ said bool }

func (a *announce) Write(p []byte) (int, error) {
	if !a.said {
		a.said = true
		fmt.Println("LOADING")
	}
	return len(p), nil
}
