package doctor_test

import (
	"context"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"slices"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/tessera-qa/tessera-qa/doctor"
	"github.com/tessera-qa/tessera-qa/engine/backend/cpu"
	"github.com/tessera-qa/tessera-qa/engine/backend/cuda"
	"github.com/tessera-qa/tessera-qa/engine/failpoint"
	"github.com/tessera-qa/tessera-qa/mig"
)

func check(r doctor.Report, dev, name string) doctor.Check {
	for _, c := range r.Checks {
		if c.Device == dev && c.Name == name {
			return c
		}
	}
	return doctor.Check{Verdict: "absent"}
}

var _ = Describe("Recorded NVML sessions", Label("cpu"), func() {
	DescribeTable("give the documented verdict",
		func(fixture string, verdict doctor.Verdict, dev, name string, v doctor.Verdict, reason string) {
			GinkgoT().Setenv(mig.ReplayEnv, filepath.Join("..", "..", "mig", "testdata", "nvml-health", fixture))
			r, err := doctor.Run(context.Background(), doctor.Options{Level: 1, Devices: []string{"cuda"}})
			Expect(err).NotTo(HaveOccurred())
			Expect(r.Verdict).To(Equal(verdict), "%+v", r.Failed())
			c := check(r, dev, name)
			Expect(c.Verdict).To(Equal(v))
			Expect(c.Reason).To(ContainSubstring(reason))
		},
		Entry("healthy H100", "h100-healthy.json", doctor.Pass, "gpu:0", "nvml/remapped-rows", doctor.Pass, "none pending"),
		Entry("healthy H200", "h200-healthy.json", doctor.Pass, "gpu:0", "nvml/ecc", doctor.Pass, "no double-bit"),
		Entry("pending row remap", "h100-row-remap-pending.json", doctor.Fail, "gpu:0", "nvml/remapped-rows", doctor.Fail, "pending"),
		Entry("double-bit ECC error", "h100-dbe.json", doctor.Fail, "gpu:0", "nvml/ecc", doctor.Fail, "double-bit"),
		Entry("thermal throttling", "h200-thermal-throttle.json", doctor.Fail, "gpu:0", "nvml/clock-events", doctor.Fail, "HW thermal"),
		Entry("XID 79", "h100-xid79.json", doctor.Fail, "gpu:1", "nvml/xid", doctor.Fail, "fallen off the bus"),
		Entry("PCIe width degraded", "h100-pcie-x8.json", doctor.Fail, "gpu:0", "nvml/pcie-link", doctor.Fail, "x8, below x16"),
		Entry("an NVML without the remap call", "h100-old-nvml.json", doctor.Pass, "gpu:0", "nvml/remapped-rows", doctor.Skipped, "absent"),
	)
})

var _ = Describe("SDC scan", Label("cpu"), func() {
	It("finds every device bit for bit as pinned (SDC)", func() {
		targets := []doctor.Target{{ID: "cpu:0", Backend: &cpu.Backend{}}, {ID: "cpu:1", Backend: &cpu.Backend{ID: failpoint.SDCDevice}}}
		for _, c := range doctor.ScanSDC(context.Background(), targets, doctor.SDCOptions{}) {
			Expect(c.Verdict).To(Equal(doctor.Pass), "%s: %s", c.Device, c.Reason)
			Expect(c.SDC).To(BeEmpty())
		}
	})
})

var _ = Describe("Level 2 on this machine", func() {
	It("is a complete report: CPU checks pass, GPU checks skipped with the reason", Label("cpu"), func() {
		if _, err := cuda.Devices(); err == nil {
			Skip("a GPU is here: the gpu-labelled spec covers it")
		}
		GinkgoT().Setenv(mig.ReplayEnv, "")
		os.Unsetenv(mig.ReplayEnv)
		r, err := doctor.Run(context.Background(), doctor.Options{Level: 2})
		Expect(err).NotTo(HaveOccurred())
		Expect(r.Verdict).To(Equal(doctor.Pass))
		Expect(r.ExitCode()).To(Equal(0))
		for _, lv := range doctor.GPUChecks[:2] {
			for _, n := range lv {
				c := check(r, "gpu", n)
				Expect(c.Verdict).To(Equal(doctor.Skipped), n)
				Expect(c.Reason).To(ContainSubstring("no GPU on this node"))
			}
		}
		for _, n := range []string{"memory/patterns", "bandwidth/d2d", "sdc/pinned-catalogue", "known-answer/quick"} {
			Expect(check(r, "cpu:0", n).Verdict).To(Equal(doctor.Pass), n)
		}
		b, err := json.Marshal(r)
		Expect(err).NotTo(HaveOccurred())
		var back map[string]any
		Expect(json.Unmarshal(b, &back)).To(Succeed())
		Expect(back["format"]).To(Equal(doctor.ReportFormat))
		Expect(slices.Sorted(maps.Keys(back))).To(Equal([]string{"checks", "devices", "format", "host", "level", "nvml_source", "seconds", "started", "summary", "thresholds_source", "thresholds_version", "verdict", "version"}))
	})

	It("runs levels 1 and 2 on the GPU with the SKU's thresholds", Label("gpu"), func() {
		devs, err := cuda.Devices()
		if err != nil {
			Skip("no GPU: " + err.Error())
		}
		r, err := doctor.Run(context.Background(), doctor.Options{Level: 2, Devices: []string{"cuda"}})
		Expect(err).NotTo(HaveOccurred())
		for _, c := range r.Checks {
			GinkgoWriter.Printf("%s %s %s %s\n", c.Verdict, c.Device, c.Name, c.Reason)
		}
		Expect(len(r.Devices)).To(BeNumerically(">=", len(devs)))
		Expect(r.Verdict).NotTo(Equal(doctor.Fail), "%+v", r.Failed())
	})
})
