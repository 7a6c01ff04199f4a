package training_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/tessera-qa/tessera-qa/engine/backend"
	_ "github.com/tessera-qa/tessera-qa/engine/backend/all"
	"github.com/tessera-qa/tessera-qa/engine/dist/mesh"
	"github.com/tessera-qa/tessera-qa/training"
)

func cpu() backend.Backend {
	b, err := backend.Get("cpu")
	Expect(err).NotTo(HaveOccurred())
	return b
}

func inproc(model string, steps, world int) *training.Result {
	return inprocMesh(model, "adamw", steps, world, "")
}

// inprocMesh trains with optimizer on world goroutine ranks: data parallel, or on meshText
// (dp=N,tp=M).
func inprocMesh(model, optimizer string, steps, world int, meshText string) *training.Result {
	opt, err := training.NewOptimizer(optimizer, 1e-2, cpu())
	Expect(err).NotTo(HaveOccurred())
	cfg := training.Config{Model: model, Steps: steps, Seed: 1, Backend: cpu(), Optimizer: opt}
	if meshText != "" {
		cfg.Mesh, err = mesh.ParseMesh(meshText)
		Expect(err).NotTo(HaveOccurred())
	}
	r, err := training.Inproc(context.Background(), cfg, world)
	Expect(err).NotTo(HaveOccurred())
	return r
}

// sameLosses holds r's losses to one's within 1e-4 relative: the same function of the same
// data and parameters, with a few sums in another order.
func sameLosses(r, one *training.Result, what string) {
	Expect(r.Losses).To(HaveLen(len(one.Losses)))
	for i, l := range r.Losses {
		Expect(math.Abs(l.Value-one.Losses[i].Value)/one.Losses[i].Value).To(BeNumerically("<=", 1e-4),
			"%s step %d: loss %v, one rank %v", what, i+1, l.Value, one.Losses[i].Value)
	}
}

// cli runs the tessera-qa binary's train verb, returns its exit code and parsed JSON result.
func cli(args ...string) (int, *training.Result) {
	if binErr != "" {
		Skip("no tessera-qa binary: " + binErr)
	}
	out := filepath.Join(GinkgoT().TempDir(), "result.json")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append([]string{"train", "--json", out}, args...)...)
	cmd.Stdout, cmd.Stderr = GinkgoWriter, GinkgoWriter
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	err := cmd.Run()
	code := 0
	if err != nil {
		ee, ok := err.(*exec.ExitError)
		Expect(ok).To(BeTrue(), "train did not run: %v", err)
		code = ee.ExitCode()
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			code = 128 + int(ws.Signal())
		}
	}
	// Nothing of the job may outlive it: its process group is empty.
	Expect(syscall.Kill(-cmd.Process.Pid, 0)).To(MatchError(syscall.ESRCH), "a rank of the train job outlived it")
	data, rerr := os.ReadFile(out)
	if rerr != nil {
		return code, nil
	}
	r := &training.Result{}
	Expect(json.Unmarshal(data, r)).To(Succeed())
	return code, r
}

func lossBits(r *training.Result) []string {
	out := make([]string, len(r.Losses))
	for i, l := range r.Losses {
		out[i] = l.Bits
	}
	return out
}

var _ = Describe("the reference training workload", func() {
	for _, model := range training.Models {
		It("learns: the "+model+"'s loss falls by half in 50 steps", func() {
			r := inproc(model, 50, 1)
			Expect(r.Losses).To(HaveLen(50))
			Expect(r.Losses[49].Value).To(BeNumerically("<", r.Losses[0].Value/2))
		})
		It("gives the "+model+" the same loss curve and final digest bit for bit, run after run", func() {
			a, b := inproc(model, 20, 1), inproc(model, 20, 1)
			Expect(lossBits(b)).To(Equal(lossBits(a)))
			Expect(b.Digest).To(Equal(a.Digest))
		})
	}

	It("gives data-parallel goroutine ranks the same bits run after run, and every rank the same parameters", func() {
		a, b := inproc("mlp", 20, 2), inproc("mlp", 20, 2)
		Expect(a.World).To(Equal(2))
		Expect(lossBits(b)).To(Equal(lossBits(a)))
		Expect(b.Digest).To(Equal(a.Digest))
	})

	for _, model := range training.Models {
		It("trains the "+model+" on data-parallel ranks as one rank trains it on the whole batch (dp=2 and dp=4: every loss within 1e-4)", func() {
			one := inproc(model, 10, 1)
			for _, world := range []int{2, 4} {
				r := inproc(model, 10, world)
				Expect(r.World).To(Equal(world))
				sameLosses(r, one, fmt.Sprintf("dp=%d", world))
			}
		})
	}

	// SGD, not AdamW: AdamW's step barely depends on the gradient's scale, so a mesh that
	// averaged its weight gradients over dp where it must sum them would still track one rank.
	It("trains the transformer block tensor-parallel on dp=2,tp=2 as one rank trains it on the whole batch (SGD; every loss within 1e-4)", func() {
		one := inprocMesh("transformer-block", "sgd", 10, 1, "")
		r := inprocMesh("transformer-block", "sgd", 10, 4, "dp=2,tp=2")
		Expect(r.Mesh).To(Equal("dp=2,tp=2"))
		sameLosses(r, one, "dp=2,tp=2")
	})

	It("gives `train --model mlp --steps 50 --seed 1` the same curve and digest twice", func() {
		_, a := cli("--model", "mlp", "--steps", "50", "--seed", "1")
		_, b := cli("--model", "mlp", "--steps", "50", "--seed", "1")
		Expect(a).NotTo(BeNil())
		Expect(lossBits(b)).To(Equal(lossBits(a)))
		Expect(b.Digest).To(Equal(a.Digest))
	})

	It("gives `--mesh dp=2` over tcp the same curve and digest twice, and the in-process ranks' bits", func() {
		args := []string{"--model", "mlp", "--steps", "50", "--seed", "1", "--mesh", "dp=2"}
		code, a := cli(append(args, "--transport", "tcp")...)
		Expect(code).To(Equal(0))
		_, b := cli(append(args, "--transport", "tcp")...)
		_, c := cli(append(args, "--transport", "inproc")...)
		Expect(a.World).To(Equal(2))
		Expect(lossBits(b)).To(Equal(lossBits(a)))
		Expect(b.Digest).To(Equal(a.Digest))
		Expect(c.Digest).To(Equal(a.Digest), "the transport moves bytes; it must not change the sum")
	})

	It("gives `--mesh dp=2 --transport shm` (process ranks, shared-memory rings) the in-process ranks' curve and digest", func() {
		args := []string{"--model", "mlp", "--steps", "50", "--seed", "1", "--mesh", "dp=2"}
		code, a := cli(append(args, "--transport", "shm")...)
		Expect(code).To(Equal(0))
		_, c := cli(append(args, "--transport", "inproc")...)
		Expect(a.World).To(Equal(2))
		Expect(a.Transport).To(Equal("shm"), "the frames must have gone through the rings, not a fallback")
		Expect(c.Transport).To(Equal("inproc"))
		Expect(lossBits(a)).To(Equal(lossBits(c)))
		Expect(a.Digest).To(Equal(c.Digest), "the transport moves bytes; it must not change the sum")
	})

	It("trains the transformer block tensor-parallel on a dp=2,tp=2 mesh: process ranks over tcp give the goroutine ranks' bits, twice", func() {
		args := []string{"--model", "transformer-block", "--steps", "20", "--seed", "1", "--mesh", "dp=2,tp=2"}
		code, a := cli(append(args, "--transport", "tcp")...)
		Expect(code).To(Equal(0))
		_, b := cli(append(args, "--transport", "tcp")...)
		_, c := cli(append(args, "--transport", "inproc")...)
		Expect(a.World).To(Equal(4))
		Expect(a.Mesh).To(Equal("dp=2,tp=2"))
		Expect(lossBits(b)).To(Equal(lossBits(a)))
		Expect(b.Digest).To(Equal(a.Digest))
		Expect(lossBits(c)).To(Equal(lossBits(a)))
		Expect(c.Digest).To(Equal(a.Digest), "the transport moves bytes; it must not change the sum")
		one := inproc("transformer-block", 20, 1)
		for i := range one.Losses {
			Expect(a.Losses[i].Value).To(BeNumerically("~", one.Losses[i].Value, 1e-4*one.Losses[i].Value),
				"step %d: the mesh computes the one-rank step's function; only the order of a few sums differs", i+1)
		}
	})

	// Issue 26: the Fourier neural operator, output channels over tp; small and short (CI).
	It("trains the fno tensor-parallel on a dp=2,tp=2 mesh: tcp process ranks give the same bits twice and the goroutine ranks' bits", func() {
		args := []string{"--model", "fno", "--steps", "6", "--seed", "1", "--mesh", "dp=2,tp=2"}
		code, a := cli(append(args, "--transport", "tcp")...)
		Expect(code).To(Equal(0))
		_, b := cli(append(args, "--transport", "tcp")...)
		_, c := cli(append(args, "--transport", "inproc")...)
		Expect(a.Mesh).To(Equal("dp=2,tp=2"))
		Expect(lossBits(b)).To(Equal(lossBits(a)))
		Expect(b.Digest).To(Equal(a.Digest))
		Expect(lossBits(c)).To(Equal(lossBits(a)))
		Expect(c.Digest).To(Equal(a.Digest), "the transport moves bytes; it must not change the sum")
		sameLosses(a, inproc("fno", 6, 1), "fno dp=2,tp=2")
		GinkgoWriter.Printf("fno dp=2,tp=2: last loss %v bits %s, digest %s\n", a.Losses[5].Value, a.Losses[5].Bits, a.Digest)
	})

	It("ends a dp=2 tcp run killed by SIGKILL at step 30 and resumed with the uninterrupted run's digest", func() {
		dir := GinkgoT().TempDir()
		args := []string{"--model", "mlp", "--steps", "50", "--seed", "1", "--mesh", "dp=2", "--transport", "tcp",
			"--checkpoint-dir", dir, "--checkpoint-every", "10"}
		code, killed := cli(append(args, "--kill-at-step", "30")...)
		Expect(code).NotTo(Equal(0), "the killed run must fail")
		Expect(killed).To(BeNil())
		_, resumed := cli(append(args, "--resume")...)
		Expect(resumed.StartStep).To(Equal(30))
		Expect(resumed.Losses).To(HaveLen(20))
		_, whole := cli(args[:10]...)
		Expect(resumed.Digest).To(Equal(whole.Digest))
		Expect(lossBits(resumed)).To(Equal(lossBits(whole)[30:]))
	})

	It("falls back to the previous checkpoint when the newest is corrupted, and still ends with the same digest", func() {
		dir := GinkgoT().TempDir()
		args := []string{"--model", "mlp", "--steps", "30", "--seed", "1", "--checkpoint-dir", dir, "--checkpoint-every", "10"}
		_, first := cli(append(args, "--kill-at-step", "20")...)
		Expect(first).To(BeNil())
		f := filepath.Join(dir, "step-00000020", "rank-0.npz")
		data, err := os.ReadFile(f)
		Expect(err).NotTo(HaveOccurred())
		data[len(data)/2] ^= 0x10
		Expect(os.WriteFile(f, data, 0o644)).To(Succeed())
		_, resumed := cli(append(args, "--resume")...)
		Expect(resumed.StartStep).To(Equal(10))
		Expect(resumed.Notices).To(ContainElement(ContainSubstring("falling back to step 10")))
		_, whole := cli(args[:6]...)
		Expect(resumed.Digest).To(Equal(whole.Digest))
	})
})
