package autotune_test

import (
	"os"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/tessera-qa/tessera-qa/engine/autotune"
	"github.com/tessera-qa/tessera-qa/engine/backend"
	_ "github.com/tessera-qa/tessera-qa/engine/backend/all"
	"github.com/tessera-qa/tessera-qa/engine/compiler"
	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
	"github.com/tessera-qa/tessera-qa/harness"
	"github.com/tessera-qa/tessera-qa/job"
)

// A matmul and a row softmax: two kernel kinds with config spaces, small enough that eight
// candidates each tune in seconds.
const tuneGraph = `graph tune {
  input %a: f32[192,256]
  input %b: f32[256,320]
  %c: f32[192,320] = matmul(%a, %b)
  %p = softmax(%c) {axis=-1}
  output %p
}`

// counting wraps a timer and counts the programs it was asked to time.
type counting struct {
	autotune.Timer
	calls int
}

func (c *counting) Time(p *compiler.Program, kernel int, in map[string]*tensor.Tensor, reps int) ([]float64, error) {
	c.calls++
	return c.Timer.Time(p, kernel, in, reps)
}

// fixedClock is a timer that measures nothing: every candidate takes 1 ms.
type fixedClock struct{}

func (fixedClock) Clock() string { return "fixed test clock" }
func (fixedClock) Time(_ *compiler.Program, _ int, _ map[string]*tensor.Tensor, reps int) ([]float64, error) {
	out := make([]float64, reps)
	for i := range out {
		out[i] = 1
	}
	return out, nil
}

var _ = Describe("the autotuner on the GPU", Label("gpu", "nightly"), Ordered, func() {
	var (
		b      backend.Backend
		timer  autotune.Timer
		dev    autotune.Device
		cache  *autotune.Cache
		g      *graph.Graph
		inputs map[string]*tensor.Tensor
		first  autotune.Report
		chosen map[string]compiler.Schedule
	)
	tuner := func(t autotune.Timer, d autotune.Device) *autotune.Tuner {
		return &autotune.Tuner{Timer: t, Runner: b, Device: d, Cache: cache, MaxCandidates: 8}
	}

	BeforeAll(func() {
		var err error
		if b, err = backend.Get("cuda"); err != nil {
			Skip("cuda backend not compiled in: " + err.Error())
		}
		if err := b.Available(); err != nil {
			Skip("cuda unavailable: " + err.Error())
		}
		timer, dev, err = job.TuneClock(b)
		Expect(err).NotTo(HaveOccurred())
		cache, err = autotune.OpenCache(GinkgoT().TempDir())
		Expect(err).NotTo(HaveOccurred())
		g, err = graph.Parse(tuneGraph, "tune.tg")
		Expect(err).NotTo(HaveOccurred())
		inputs, err = harness.RandomInputs(g, 7, nil)
		Expect(err).NotTo(HaveOccurred())
	})

	It("times candidates with CUDA events and keeps one whose outputs match the default schedule's", func() {
		var err error
		chosen, first, err = tuner(timer, dev).Tune(g, inputs)
		Expect(err).NotTo(HaveOccurred())
		Expect(strings.ToLower(first.Clock)).To(ContainSubstring("cuda"))
		Expect(first.Device.Arch).To(HavePrefix("sm_"))
		tuned := 0
		for _, k := range first.Kernels {
			if k.Skipped != "" {
				continue
			}
			tuned++
			Expect(k.CacheHit).To(BeFalse(), "kernel %s", k.Key)
			Expect(k.Measured).To(BeNumerically(">=", 2), "kernel %s measured %d of %d candidates (rejected %v)", k.Key, k.Measured, k.Candidates, k.Rejected)
			Expect(k.BestMs).To(BeNumerically(">", 0))
			Expect(k.BestMs).To(BeNumerically("<=", k.DefaultMs), "kernel %s: the default is a candidate, the best cannot be slower", k.Key)
		}
		Expect(tuned).To(BeNumerically(">=", 2), "both the matmul and the softmax kernel have spaces")
		// The chosen schedules compute what the default ones do, on the GPU.
		def, err := compiler.Compile(g, compiler.Options{})
		Expect(err).NotTo(HaveOccurred())
		best, err := compiler.Compile(g, compiler.Options{Configs: chosen})
		Expect(err).NotTo(HaveOccurred())
		Expect(best.ScheduleHash).To(Equal(first.ScheduleHash))
		want, err := b.Run(def, inputs)
		Expect(err).NotTo(HaveOccurred())
		got, err := b.Run(best, inputs)
		Expect(err).NotTo(HaveOccurred())
		Expect(autotune.CompareOutputs(got, want)).To(Succeed())
	})

	It("measures nothing when the cache holds this device's choices, and returns them unchanged", func() {
		c := &counting{Timer: timer}
		again, rep, err := tuner(c, dev).Tune(g, inputs)
		Expect(err).NotTo(HaveOccurred())
		Expect(c.calls).To(BeZero(), "a cache hit times nothing")
		for i, k := range rep.Kernels {
			if k.Skipped != "" {
				continue
			}
			Expect(k.CacheHit).To(BeTrue(), "kernel %s", k.Key)
			Expect(k.Measured).To(BeZero())
			Expect(k.Chosen).To(Equal(first.Kernels[i].Chosen), "kernel %s: identical hardware picks the same config", k.Key)
		}
		Expect(again).To(Equal(chosen))
		Expect(rep.ScheduleHash).To(Equal(first.ScheduleHash))
	})

	It("gives another device its own entries and leaves this device's file untouched", func() {
		mine, err := os.ReadFile(cache.Path(dev))
		Expect(err).NotTo(HaveOccurred())
		other := dev
		other.SMCount--
		other.Name = "the same GPU with one SM fewer (a MIG slice, say)"
		Expect(cache.Path(other)).NotTo(Equal(cache.Path(dev)))
		_, rep, err := tuner(fixedClock{}, other).Tune(g, inputs)
		Expect(err).NotTo(HaveOccurred())
		for _, k := range rep.Kernels {
			Expect(k.CacheHit).To(BeFalse(), "kernel %s: another device must not reuse this one's entries", k.Key)
		}
		after, err := os.ReadFile(cache.Path(dev))
		Expect(err).NotTo(HaveOccurred())
		Expect(after).To(Equal(mine))
		theirs, err := cache.Entries(other)
		Expect(err).NotTo(HaveOccurred())
		Expect(theirs).NotTo(BeEmpty())
	})
})
