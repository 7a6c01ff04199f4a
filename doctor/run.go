package doctor

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/backend/cpu"
	"github.com/tessera-qa/tessera-qa/engine/backend/cuda"
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/golden"
	"github.com/tessera-qa/tessera-qa/mig"
)

// Options configures a doctor run.
type Options struct {
	Level      int // 1 to 4; each level runs the checks of the levels below it too
	Thresholds Thresholds
	// Devices selects what is checked: "all" (the default), "cpu", "cuda", "cpu:N", "gpu:N".
	// A device named explicitly (anything but "all") that is absent sets Report.Absent.
	Devices []string
	// CPUs are the IDs of the CPU backend instances checked (default [0]).
	CPUs []int
	// Log, when set, receives a line as each check ends.
	Log func(Check)
}

// Health sources, replaced by tests.
var (
	readHealth   = mig.ReadHealth
	discoverMIG  = mig.Discover
	cudaDevices  = cuda.Devices
	openRaw      = cuda.OpenRaw
	hostname     = os.Hostname
	catalogue    = golden.Catalogue
	quickScanOps = []string{"matmul", "softmax", "layernorm"}
)

// GPUChecks names the checks each level runs on a GPU (level 1 first), as a node without a
// GPU reports them skipped.
var GPUChecks = [4][]string{
	{"nvml/reachable", "nvml/xid", "nvml/ecc-mode", "nvml/ecc", "nvml/retired-pages", "nvml/remapped-rows", "nvml/clock-events",
		"nvml/temperature", "nvml/pcie-link", "nvml/pcie-replay", "nvml/nvlink", "nvml/persistence"},
	{"memory/patterns", "bandwidth/h2d", "bandwidth/d2h", "bandwidth/d2d", "sdc/pinned-catalogue"},
	{"burn/gemm", "burn/attention", "burn/known-answer-under-load", "burn/temperature", "burn/clock-events", "burn/pcie-replay"},
	{"soak/gemm", "soak/attention", "soak/known-answer-under-load", "soak/memory-patterns"},
}

// ParseLevel reads --level (E_INPUT outside 1..4).
func ParseLevel(s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > 4 {
		return 0, errs.New(errs.Input, "doctor --level %q: want 1, 2, 3 or 4", s)
	}
	return n, nil
}

type gpuTarget struct {
	id     string
	index  int // NVML index (-1: not listed by NVML)
	health *mig.Health
	cudaOK bool
	info   cuda.DeviceInfo
	why    string // why the CUDA driver cannot run kernels on it
}

// selection is what --device asked for.
type selection struct {
	all, cpu, cuda bool
	cpus, gpus     map[int]bool
	explicit       []string
}

func parseSelection(devs []string) (selection, error) {
	s := selection{cpus: map[int]bool{}, gpus: map[int]bool{}}
	if len(devs) == 0 {
		devs = []string{"all"}
	}
	for _, d := range devs {
		for _, d := range strings.Split(d, ",") {
			d = strings.TrimSpace(d)
			switch {
			case d == "all":
				s.all = true
			case d == "cpu":
				s.cpu = true
				s.explicit = append(s.explicit, d)
			case d == "cuda" || d == "gpu":
				s.cuda = true
				s.explicit = append(s.explicit, d)
			case strings.HasPrefix(d, "cpu:") || strings.HasPrefix(d, "gpu:"):
				n, err := strconv.Atoi(d[4:])
				if err != nil || n < 0 {
					return s, errs.New(errs.Input, "doctor --device %q: want all, cpu, cuda, cpu:N or gpu:N", d)
				}
				if d[0] == 'c' {
					s.cpus[n] = true
				} else {
					s.gpus[n] = true
				}
				s.explicit = append(s.explicit, d)
			default:
				return s, errs.New(errs.Input, "doctor --device %q: want all, cpu, cuda, cpu:N or gpu:N", d)
			}
		}
	}
	return s, nil
}

func (s selection) wantCPU(id int) bool { return s.all || s.cpu || s.cpus[id] }
func (s selection) wantGPU(id int) bool { return s.all || s.cuda || s.gpus[id] }

// Run checks the node at o.Level. Bad options are E_INPUT; everything the node does wrong is
// a check in the report.
func Run(ctx context.Context, o Options) (Report, error) {
	if o.Level < 1 || o.Level > 4 {
		return Report{}, errs.New(errs.Input, "doctor: level %d, want 1 to 4", o.Level)
	}
	if o.Thresholds.Format == "" {
		o.Thresholds = DefaultThresholds()
	}
	sel, err := parseSelection(o.Devices)
	if err != nil {
		return Report{}, err
	}
	if len(o.CPUs) == 0 {
		o.CPUs = []int{0}
	}
	start := time.Now()
	host, _ := hostname()
	r := Report{Format: ReportFormat, Version: ReportVersion, Level: o.Level, Host: host, Started: start.UTC().Format(time.RFC3339),
		ThresholdsVersion: o.Thresholds.Version, ThresholdsSource: o.Thresholds.Source, NVMLSource: "none", Devices: []Device{}, Checks: []Check{}}
	add := func(cs ...Check) {
		for _, c := range cs {
			r.Checks = append(r.Checks, c)
			if o.Log != nil {
				o.Log(c)
			}
		}
	}

	// Level 1, node: software and deployment.
	health, herr := readHealth()
	if herr == nil {
		r.NVMLSource = health.Source
		add(Check{Name: "software/nvml", Level: 1, Device: "node", Verdict: Pass,
			Reason: fmt.Sprintf("NVML %s, driver %s, %d GPUs (%s)", health.NVMLVersion, health.Driver, len(health.GPUs), health.Source)})
	} else {
		add(Check{Name: "software/nvml", Level: 1, Device: "node", Verdict: Skipped, Reason: "no NVML, so no NVIDIA driver here: " + errs.Line(herr)})
	}
	devs, cerr := cudaDevices()
	if cerr == nil {
		add(Check{Name: "software/libcuda", Level: 1, Device: "node", Verdict: Pass, Reason: fmt.Sprintf("libcuda.so.1 loads; %d CUDA devices", len(devs))})
	} else {
		add(Check{Name: "software/libcuda", Level: 1, Device: "node", Verdict: Skipped, Reason: "the CUDA driver cannot run here: " + errs.Line(cerr)})
	}
	switch {
	case herr == nil && cerr == nil && !strings.HasPrefix(health.Source, "replay:"):
		nv, cu := len(health.GPUs), len(devs)
		c := Check{Name: "software/driver-agree", Level: 1, Device: "node", Values: map[string]float64{"nvml_gpus": float64(nv), "cuda_devices": float64(cu)}}
		if os.Getenv("CUDA_VISIBLE_DEVICES") == "" && nv != cu {
			c.Verdict, c.Reason = Fail, fmt.Sprintf("NVML lists %d GPUs, the CUDA driver %d (a GPU the driver cannot open)", nv, cu)
		} else {
			c.Verdict, c.Reason = Pass, fmt.Sprintf("NVML and libcuda agree: %d GPUs, %d CUDA devices", nv, cu)
		}
		add(c)
	default:
		add(Check{Name: "software/driver-agree", Level: 1, Device: "node", Verdict: Skipped, Reason: "needs both NVML and libcuda on this node"})
	}
	if herr == nil && !strings.HasPrefix(health.Source, "replay:") {
		gpus, src, err := discoverMIG(ctx)
		c := Check{Name: "software/mig", Level: 1, Device: "node"}
		if err != nil {
			c.Verdict, c.Reason = Skipped, errs.Line(err)
		} else {
			var modes []string
			for _, g := range gpus {
				modes = append(modes, fmt.Sprintf("gpu:%d MIG %s, %d partitions", g.Index, g.MIGMode, len(g.Partitions)))
			}
			c.Verdict, c.Reason = Pass, fmt.Sprintf("%s (%s)", strings.Join(modes, "; "), src)
		}
		add(c)
	}

	// The GPUs: NVML's list, joined with the CUDA driver's by UUID.
	var gpus []*gpuTarget
	if herr == nil {
		for i := range health.GPUs {
			h := &health.GPUs[i]
			g := &gpuTarget{id: fmt.Sprintf("gpu:%d", h.Index), index: h.Index, health: h, why: "the CUDA driver does not list it"}
			if cerr != nil {
				g.why = errs.Message(cerr)
			}
			for _, d := range devs {
				if d.UUID == h.UUID && h.UUID != "" {
					g.cudaOK, g.info, g.why = true, d, ""
				}
			}
			gpus = append(gpus, g)
		}
	} else if cerr == nil {
		for _, d := range devs {
			gpus = append(gpus, &gpuTarget{id: fmt.Sprintf("gpu:%d", d.Ordinal), index: -1, cudaOK: true, info: d})
		}
	}
	var cpus []Target
	for _, id := range o.CPUs {
		if sel.wantCPU(id) {
			cpus = append(cpus, Target{ID: fmt.Sprintf("cpu:%d", id), Backend: &cpu.Backend{ID: id}})
		}
	}
	for _, t := range cpus {
		sku, ok := o.Thresholds.SKUFor("cpu", t.Backend.Device())
		d := Device{ID: t.ID, Backend: "cpu", Name: t.Backend.Device(), Class: t.Backend.DeviceClass(), Available: true}
		if ok {
			d.SKU = sku.Name
		}
		r.Devices = append(r.Devices, d)
	}
	var chosen []*gpuTarget
	for _, g := range gpus {
		n := g.index
		if n < 0 {
			n = g.info.Ordinal
		}
		if !sel.wantGPU(n) {
			continue
		}
		chosen = append(chosen, g)
		d := Device{ID: g.id, Backend: "cuda", Available: g.cudaOK}
		if g.health != nil {
			d.Name, d.UUID = g.health.Name, g.health.UUID
		}
		if g.cudaOK {
			d.Name, d.UUID, d.Class = g.info.Name, g.info.UUID, "cuda/"+g.info.Arch()
		}
		if sku, ok := o.Thresholds.SKUFor("gpu", d.Name); ok {
			d.SKU = sku.Name
		}
		r.Devices = append(r.Devices, d)
	}
	// Absent devices asked for by name.
	var absent []string
	for id := range sel.gpus {
		if !slices.ContainsFunc(chosen, func(g *gpuTarget) bool { return g.id == fmt.Sprintf("gpu:%d", id) }) {
			absent = append(absent, fmt.Sprintf("gpu:%d", id))
		}
	}
	for id := range sel.cpus {
		if !slices.Contains(o.CPUs, id) {
			absent = append(absent, fmt.Sprintf("cpu:%d", id))
		}
	}
	if sel.cuda && len(chosen) == 0 {
		absent = append(absent, "cuda (no GPU: "+reasonNoGPU(herr, cerr)+")")
	}
	if sel.cuda && o.Level >= 2 && len(chosen) > 0 && !slices.ContainsFunc(chosen, func(g *gpuTarget) bool { return g.cudaOK }) {
		absent = append(absent, "cuda (level 2 runs kernels; the CUDA driver cannot: "+chosen[0].why+")")
	}
	slices.Sort(absent)
	r.Absent = strings.Join(absent, ", ")
	if !sel.all && !sel.cuda && len(sel.gpus) == 0 {
		// only CPUs asked for
	} else if len(chosen) == 0 {
		why := "no GPU on this node: " + reasonNoGPU(herr, cerr)
		for lv := 1; lv <= o.Level; lv++ {
			for _, n := range GPUChecks[lv-1] {
				add(Check{Name: n, Level: lv, Device: "gpu", Verdict: Skipped, Reason: why})
			}
		}
	}

	// Level 1, per device.
	for _, g := range chosen {
		if g.health == nil {
			add(Check{Name: "nvml/health", Level: 1, Device: g.id, Verdict: Skipped, Reason: "no NVML health for a GPU NVML does not list"})
			continue
		}
		sku, ok := o.Thresholds.SKUFor("gpu", g.health.Name)
		add(NVMLChecks(*g.health, sku, ok, false)...)
	}
	for _, c := range ScanSDC(ctx, cpus, SDCOptions{Specs: quickSpecs(), Level: 1, Name: "known-answer/quick"}) {
		add(c)
	}
	if o.Level >= 2 {
		level2(ctx, o, cpus, chosen, add)
	}
	if o.Level >= 3 {
		level3(ctx, o, cpus, chosen, add, 3)
	}
	if o.Level >= 4 {
		level3(ctx, o, cpus, chosen, add, 4)
	}
	r.Seconds = time.Since(start).Seconds()
	r.finish()
	return r, nil
}

func reasonNoGPU(herr, cerr error) string {
	var parts []string
	if herr != nil {
		parts = append(parts, errs.Message(herr))
	}
	if cerr != nil {
		parts = append(parts, errs.Message(cerr))
	}
	if len(parts) == 0 {
		return "none listed"
	}
	return strings.Join(parts, "; ")
}

// quickSpecs are level 1's known-answer cases: the pinned catalogue's cases of a few ops.
func quickSpecs() []golden.Spec {
	var out []golden.Spec
	for _, s := range catalogue() {
		if slices.Contains(quickScanOps, s.Op) {
			out = append(out, s)
		}
	}
	return out
}

// gpuTargets are the chosen GPUs the CUDA driver can run kernels on; the others get a
// skipped check named name each.
func gpuRunnable(chosen []*gpuTarget, level int, names []string, add func(...Check)) []*gpuTarget {
	var ok []*gpuTarget
	for _, g := range chosen {
		if g.cudaOK {
			ok = append(ok, g)
			continue
		}
		for _, n := range names {
			add(Check{Name: n, Level: level, Device: g.id, Verdict: Skipped, Reason: "cannot run kernels: " + g.why})
		}
	}
	return ok
}

func level2(ctx context.Context, o Options, cpus []Target, chosen []*gpuTarget, add func(...Check)) {
	for _, t := range cpus {
		sku, ok := o.Thresholds.SKUFor("cpu", t.Backend.Device())
		if !ok {
			add(Check{Name: "memory/patterns", Level: 2, Device: t.ID, Verdict: Skipped, Reason: "no cpu SKU in the thresholds"})
			continue
		}
		n := int(sku.MemtestBytes)
		if n <= 0 {
			add(Check{Name: "memory/patterns", Level: 2, Device: t.ID, Verdict: Skipped, Reason: "SKU " + sku.Name + " sets memtest_bytes 0"})
		} else {
			res, err := memtestHost(ctx, make([]byte, n), max(int(sku.MemtestPasses), 1))
			add(memtestCheck("memory/patterns", 2, t.ID, res, err))
		}
		for _, name := range []string{"bandwidth/h2d", "bandwidth/d2h"} {
			add(Check{Name: name, Level: 2, Device: t.ID, Verdict: Skipped, Reason: "the CPU backend has no host-device link"})
		}
		add(bandwidthCheck("bandwidth/d2d", 2, t.ID, hostCopyGBps(max(n, 1<<20)), sku.D2DMinGBps, sku.Name))
	}
	names := []string{"memory/patterns", "bandwidth/h2d", "bandwidth/d2h", "bandwidth/d2d", "sdc/pinned-catalogue"}
	var gpuT []Target
	for _, g := range gpuRunnable(chosen, 2, names, add) {
		sku, _ := o.Thresholds.SKUFor("gpu", g.info.Name)
		raw, err := openRaw(g.info.Ordinal)
		if err != nil {
			for _, n := range names[:4] {
				add(Check{Name: n, Level: 2, Device: g.id, Verdict: Fail, Code: string(errs.CodeOf(err)), Reason: errs.Line(err)})
			}
			continue
		}
		b := cuda.New(g.info.Ordinal)
		st, err := b.Stats()
		free := g.info.TotalMem / 2
		if err == nil && st.DeviceFree > 0 {
			free = st.DeviceFree
		}
		res, err := gpuMemtest(ctx, raw, free, sku.MemtestFraction, sku.MemtestBytes, max(int(sku.MemtestPasses), 1))
		add(memtestCheck("memory/patterns", 2, g.id, res, err))
		h2d, d2h, d2d, err := gpuBandwidth(ctx, raw, 256<<20, 10)
		if err != nil {
			for _, n := range names[1:4] {
				add(Check{Name: n, Level: 2, Device: g.id, Verdict: Fail, Code: string(errs.CodeOf(err)), Reason: errs.Line(err)})
			}
		} else {
			add(bandwidthCheck("bandwidth/h2d", 2, g.id, h2d, sku.H2DMinGBps, sku.Name),
				bandwidthCheck("bandwidth/d2h", 2, g.id, d2h, sku.D2HMinGBps, sku.Name),
				bandwidthCheck("bandwidth/d2d", 2, g.id, d2d, sku.D2DMinGBps, sku.Name))
		}
		gpuT = append(gpuT, Target{ID: g.id, Backend: b})
	}
	add(ScanSDC(ctx, append(slices.Clone(cpus), gpuT...), SDCOptions{Level: 2})...)
}

// hostCopyGBps is copy() bandwidth over n bytes, read plus write, best of 4.
func hostCopyGBps(n int) float64 {
	a, b := make([]byte, n), make([]byte, n)
	for i := range a {
		a[i] = byte(i)
	}
	best := 0.0
	for range 4 {
		t := time.Now()
		copy(b, a)
		if s := time.Since(t).Seconds(); s > 0 {
			best = max(best, float64(2*n)/s/1e9)
		}
	}
	runtime.KeepAlive(b)
	return best
}
