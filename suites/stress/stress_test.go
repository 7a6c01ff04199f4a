package stress_test

import (
	"encoding/json"
	"github.com/tessera-qa/tessera-qa/suites/internal/qabin"
	"strconv"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/tessera-qa/tessera-qa/stress"
)

type result = qabin.Result

// runBin runs the suite's tessera-qa with args, bounded by one minute (SIGTERM, then SIGKILL
// after 5 s).
func runBin(args ...string) result {
	GinkgoHelper()
	if bin == "" {
		Skip("no tessera-qa binary: " + binErr)
	}
	r, err := qabin.Run(bin, nil, time.Minute, 5*time.Second, args...)
	Expect(err).NotTo(HaveOccurred())
	return r
}

// leftovers lists the processes still running the suite's binary.
func leftovers() []string { return qabin.Leftovers(bin) }

func noneLeft() {
	GinkgoHelper()
	Eventually(leftovers).WithTimeout(5 * time.Second).WithPolling(100 * time.Millisecond).Should(BeEmpty())
}

func report(data string) stress.Report {
	GinkgoHelper()
	var rep stress.Report
	Expect(json.Unmarshal([]byte(data), &rep)).To(Succeed(), "not a stress report:\n%s", data)
	return rep
}

func soak(mode string, jobs int, d string, extra ...string) (result, stress.Report) {
	GinkgoHelper()
	args := append([]string{"stress", "--jobs", itoa(jobs), "--mode", mode, "--duration", d, "--interval", "50ms",
		"--graphs-per-job", "3", "--out", GinkgoT().TempDir(), "--json", "-"}, extra...)
	r := runBin(args...)
	noneLeft()
	return r, report(r.Stdout)
}

func itoa(n int) string { return strconv.Itoa(n) }

// clean checks a soak that must pass: every job ran, every result had its alone bits, no
// monitor leaked, and each job's latencies are there.
func clean(r result, rep stress.Report, jobs int) {
	GinkgoHelper()
	Expect(r.Code).To(Equal(0), "stderr:\n%s", r.Stderr)
	Expect(rep.Pass).To(BeTrue(), "failures: %v", rep.Failures)
	Expect(rep.Mismatches).To(BeZero())
	Expect(rep.Errors).To(BeZero())
	Expect(rep.LeakCount).To(BeZero())
	Expect(rep.Latency).To(HaveLen(jobs))
	for _, l := range rep.Latency {
		Expect(l.Graphs).To(BeNumerically(">", 0), "job %d ran nothing", l.Job)
		Expect(l.AloneP50).To(BeNumerically(">", 0))
	}
	monitors := map[string]bool{}
	for _, m := range rep.Monitors {
		monitors[m.Monitor] = true
		Expect(m.Samples).To(BeNumerically(">=", stress.MinSamples), "%s of %s judged on too few samples", m.Monitor, m.Source)
	}
	Expect(monitors).To(HaveKey(stress.MonRSS))
	Expect(monitors).To(HaveKey(stress.MonGoroutines))
	Expect(monitors).To(HaveKey(stress.MonFDs))
	Expect(monitors).To(HaveKey(stress.MonTempFiles))
	Expect(r.Stderr).To(ContainSubstring("stress: "), "no live progress")
}

var _ = Describe("stress on the CPU", Label("cpu"), func() {
	It("runs 3 processes for 4 s with every result equal to its alone run and no leak", func() {
		r, rep := soak("processes", 3, "4s")
		clean(r, rep, 3)
		sources := map[string]bool{}
		for _, m := range rep.Monitors {
			sources[m.Source] = true
		}
		Expect(sources).To(HaveLen(3), "one set of monitors per worker process")
	})

	It("runs 3 goroutine jobs for 3 s with every result equal to its alone run and no leak", func() {
		r, rep := soak("goroutines", 3, "3s")
		clean(r, rep, 3)
	})

	It("runs 2 processes of training jobs for 3 s with every run's parameters and losses equal to its alone run", func() {
		r, rep := soak("processes", 2, "3s", "--workload", "train")
		clean(r, rep, 2)
	})

	It("catches a planted leak of a buffer per graph with the RSS monitor and exits 1", func() {
		r, rep := soak("processes", 1, "4s", "--plant", stress.PlantLeak)
		Expect(r.Code).To(Equal(1), "stderr:\n%s", r.Stderr)
		Expect(rep.Pass).To(BeFalse())
		Expect(rep.Mismatches).To(BeZero(), "a leak is not a wrong result")
		var rss *stress.Leak
		for i, m := range rep.Monitors {
			if m.Monitor == stress.MonRSS {
				rss = &rep.Monitors[i]
			}
		}
		Expect(rss).NotTo(BeNil())
		Expect(rss.Leak).To(BeTrue(), "%+v", *rss)
		Expect(rss.Growth).To(BeNumerically(">", rss.Allowance))
		Expect(rss.Slope).To(BeNumerically(">", 0))
		Expect(r.Stderr).To(ContainSubstring("LEAK"))
	})

	It("refuses bad usage with exit 2 and one coded line", func() {
		for _, args := range [][]string{{"--jobs", "0"}, {"--mode", "streams"}, {"--duration", "0s"}} {
			r := runBin(append([]string{"stress"}, args...)...)
			Expect(r.Code).To(Equal(2), "%v", args)
			Expect(strings.TrimSpace(r.Stderr)).To(HavePrefix("tessera-qa: E_INPUT: "))
			Expect(strings.Count(strings.TrimSpace(r.Stderr), "\n")).To(BeZero())
		}
	})
})

// gpu is the device line of the cuda backend, or Skip with why there is none.
func gpu() string {
	GinkgoHelper()
	ok, dev, why := cudaBackend()
	if !ok {
		Skip(why)
	}
	return dev
}

// cudaBackend is the cuda backend's entry of `devices --json`: available, device, or why not.
func cudaBackend() (bool, string, string) {
	GinkgoHelper()
	r := runBin("devices", "--json", "-")
	Expect(r.Code).To(Equal(0))
	var ds []struct {
		Backend, Device, Reason, Kind, Name string
		Available                           bool
		MIGMode                             string `json:"mig_mode"`
	}
	Expect(json.Unmarshal([]byte(r.Stdout), &ds)).To(Succeed())
	for _, d := range ds {
		if d.Backend == "cuda" && d.Kind == "" {
			return d.Available, d.Device, "no GPU: " + d.Reason
		}
	}
	return false, "", "the cuda backend is not compiled in"
}

var _ = Describe("stress on the GPU", Label("gpu"), func() {
	It("exits 3 with E_NO_DEVICE for --device cuda where there is no GPU", func() {
		if ok, dev, _ := cudaBackend(); ok {
			Skip("a GPU is present (" + dev + "): exit 3 cannot be shown here")
		}
		r := runBin("stress", "--device", "cuda", "--duration", "1s")
		Expect(r.Code).To(Equal(3))
		Expect(r.Stderr).To(HavePrefix("tessera-qa: E_NO_DEVICE: "))
	})

	It("runs 2 processes on the GPU for 5 s with every result equal to its alone run and no leak", func() {
		gpu()
		r, rep := soak("processes", 2, "5s", "--device", "cuda")
		clean(r, rep, 2)
		monitors := map[string]bool{}
		for _, m := range rep.Monitors {
			monitors[m.Monitor] = true
		}
		Expect(monitors).To(HaveKey(stress.MonDeviceUsed))
		Expect(monitors).To(HaveKey(stress.MonAllocLive))
	})

	It("lists each MIG instance as a device", func() {
		dev := gpu()
		r := runBin("devices", "--json", "-")
		var ds []struct {
			Kind    string `json:"kind"`
			UUID    string `json:"uuid"`
			Profile string `json:"profile"`
			MIGMode string `json:"mig_mode"`
			Visible string `json:"cuda_visible_devices"`
		}
		Expect(json.Unmarshal([]byte(r.Stdout), &ds)).To(Succeed())
		var migs, gpus int
		for _, d := range ds {
			switch d.Kind {
			case "gpu":
				gpus++
				if d.MIGMode == "disabled" || d.MIGMode == "unsupported" {
					Skip("MIG disabled on " + dev)
				}
			case "mig":
				migs++
				Expect(d.UUID).To(HavePrefix("MIG-"))
				Expect(d.Visible).To(Equal(d.UUID))
				Expect(d.Profile).NotTo(BeEmpty())
			}
		}
		Expect(migs+gpus).To(BeNumerically(">", 0), "a GPU is present but devices lists no partition:\n%s", r.Stderr)
	})
})
