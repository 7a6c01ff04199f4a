package stress_test

import (
	"os"
	"path/filepath"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/tessera-qa/tessera-qa/stress"
)

// oomRecovered checks the OOM pressure rows of a soak that must pass: the hog ran rounds,
// every one ended in a coded E_OOM and then gave its graph's alone digest.
func oomRecovered(rep stress.Report) *stress.OOMReport {
	GinkgoHelper()
	Expect(rep.Pressure).To(Equal(stress.PressureOOM))
	o := rep.OOM
	Expect(o).NotTo(BeNil())
	Expect(o.Rounds).To(BeNumerically(">=", 2), "the hog ran too few rounds to show anything")
	Expect(o.Recoveries).To(Equal(o.Rounds), "a round without a recovery: %v", rep.Failures)
	Expect(o.HeldMaxBytes).To(BeNumerically(">", 0))
	Expect(rep.Mismatches).To(BeZero(), "a neighbour's bits changed under memory pressure")
	return o
}

// cacheIntact checks the cache pressure rows of a soak that must pass.
func cacheIntact(rep stress.Report, hammers int) *stress.CacheReport {
	GinkgoHelper()
	Expect(rep.Pressure).To(Equal(stress.PressureCache))
	c := rep.Cache
	Expect(c).NotTo(BeNil())
	Expect(c.Hammers).To(Equal(hammers))
	Expect(c.Stores).To(BeNumerically(">=", 10*hammers), "the hammers hardly stored anything")
	Expect(c.Lookups).To(BeNumerically(">=", 10*hammers))
	Expect(c.Lost).To(BeZero(), "%v", rep.Failures)
	Expect(c.Wrong).To(BeZero(), "%v", rep.Failures)
	Expect(c.OpErrors).To(BeZero(), "%v", rep.Failures)
	Expect(c.FinalOK).To(BeTrue(), "the final cache file does not verify")
	Expect(c.Injected).To(HaveLen(1))
	Expect(c.Detected).To(Equal(1), "the injected corruption was not detected exactly once")
	Expect(c.KeptAside).To(BeTrue())
	// The bytes the runner left are kept beside the rebuilt file.
	corrupt, err := filepath.Glob(filepath.Join(c.Dir, "*.corrupt"))
	Expect(err).NotTo(HaveOccurred())
	Expect(corrupt).To(HaveLen(1))
	return c
}

var _ = Describe("stress pressure on the CPU", Label("cpu"), func() {
	It("fills the CPU budget 3 goroutine jobs share until E_OOM, round after round, and everyone recovers", func() {
		r, rep := soak("goroutines", 3, "4s", "--pressure", "oom")
		clean(r, rep, 3)
		o := oomRecovered(rep)
		Expect(o.CPUBudget).To(BeEquivalentTo(32 << 20))
		Expect(o.HeldMaxBytes).To(BeNumerically(">", o.CPUBudget/2), "the hog did not fill the budget")
		Expect(o.Note).To(ContainSubstring("share"))
		Expect(r.Stderr).To(ContainSubstring("OOM recoveries"))
	})

	It("runs the hog as its own process beside 2 job processes, its monitors judged like theirs", func() {
		r, rep := soak("processes", 2, "4s", "--pressure", "oom")
		clean(r, rep, 2)
		oomRecovered(rep)
		sources := map[string]bool{}
		for _, m := range rep.Monitors {
			sources[m.Source] = true
		}
		Expect(sources).To(HaveKey("hog"))
	})

	It("hammers one autotune cache from 3 processes, detects the corruption injected halfway and loses nothing", func() {
		r, rep := soak("processes", 3, "4s", "--pressure", "cache")
		clean(r, rep, 3)
		c := cacheIntact(rep, 3)
		Expect(c.JIT).To(HavePrefix("skipped: "), "the CPU has no JIT cache to share")
		sources := map[string]bool{}
		for _, m := range rep.Monitors {
			sources[m.Source] = true
		}
		Expect(sources).To(HaveKey("hammer 0"))
		Expect(r.Stderr).To(ContainSubstring("corrupted: "))
	})

	It("refuses the cache hammer outside processes mode and unknown pressures with exit 2", func() {
		for _, args := range [][]string{{"--pressure", "cache", "--mode", "goroutines"}, {"--pressure", "disk"}, {"--pressure", "oom", "--cpu-budget", "lots"}} {
			r := runBin(append([]string{"stress", "--duration", "1s"}, args...)...)
			Expect(r.Code).To(Equal(2), "%v", args)
			Expect(strings.TrimSpace(r.Stderr)).To(HavePrefix("tessera-qa: E_INPUT: "))
		}
	})
})

var _ = Describe("stress pressure on the GPU", Label("gpu"), func() {
	It("takes the GPU's memory until E_OOM beside 2 job processes; the hog and the jobs recover with their alone bits", func() {
		gpu()
		r, rep := soak("processes", 2, "8s", "--device", "cuda", "--pressure", "oom")
		clean(r, rep, 2)
		o := oomRecovered(rep)
		Expect(o.HeldMaxBytes).To(BeNumerically(">", int64(1)<<30), "the hog held less than 1 GiB of device memory")
		Expect(o.UnderOOM).To(BeNumerically(">", 0), "no graph of the hog was refused while it held the memory")
	})

	It("takes the GPU's memory until E_OOM beside 2 goroutine jobs of the same process", func() {
		gpu()
		r, rep := soak("goroutines", 2, "8s", "--device", "cuda", "--pressure", "oom")
		clean(r, rep, 2)
		oomRecovered(rep)
	})

	It("shares one fresh CUDA_CACHE_PATH among 3 job processes while 3 more hammer the autotune cache", func() {
		gpu()
		r, rep := soak("processes", 3, "8s", "--device", "cuda", "--pressure", "cache")
		clean(r, rep, 3)
		c := cacheIntact(rep, 3)
		Expect(c.JIT).To(HavePrefix("CUDA_CACHE_PATH="))
		Expect(c.JITFiles).To(BeNumerically(">", 0), "the driver wrote nothing to the shared JIT cache")
		dir := strings.TrimPrefix(strings.Fields(c.JIT)[0], "CUDA_CACHE_PATH=")
		_, err := os.Stat(dir)
		Expect(err).NotTo(HaveOccurred())
	})
})
