package doctor

import (
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/backend"
	"github.com/tessera-qa/tessera-qa/engine/backend/cuda"
	"github.com/tessera-qa/tessera-qa/engine/compiler"
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
	"github.com/tessera-qa/tessera-qa/harness"
	"github.com/tessera-qa/tessera-qa/mig"
)

//go:embed burnpins.json
var burnPinsJSON []byte

// burnPins are the burn workloads' pinned output digests per device class (burnpins.json).
func burnPins() map[string]map[string]string {
	var m map[string]json.RawMessage
	out := map[string]map[string]string{}
	if json.Unmarshal(burnPinsJSON, &m) != nil {
		return out
	}
	for k, v := range m {
		var d map[string]string
		if json.Unmarshal(v, &d) == nil {
			out[k] = d
		}
	}
	return out
}

// burnGraphs are the burn-in's workloads: a square GEMM and an attention, sized for the kind
// of device (a CPU interprets Tile IR, so its sizes are small).
func burnGraphs(gpu bool) (gemm, attn string, flops float64) {
	n, s, d := 128, 64, 32
	if gpu {
		n, s, d = 4096, 2048, 128
	}
	gemm = fmt.Sprintf("graph burn_gemm {\n  input %%a: f32[%d,%d]\n  input %%b: f32[%d,%d]\n  %%c: f32[%d,%d] = matmul(%%a, %%b)\n  output %%c\n}", n, n, n, n, n, n)
	attn = fmt.Sprintf("graph burn_attention {\n  input %%q: f32[4,%d,%d]\n  input %%k: f32[4,%d,%d]\n  input %%v: f32[4,%d,%d]\n  %%o = attention(%%q, %%k, %%v)\n  output %%o\n}", s, d, s, d, s, d)
	return gemm, attn, 2 * float64(n) * float64(n) * float64(n)
}

type workload struct {
	name  string
	prog  *compiler.Program
	in    map[string]*tensor.Tensor
	flops float64
}

func prepare(name, text string, flops float64) (workload, error) {
	g, err := graph.Parse(text, name+".tg")
	if err != nil {
		return workload{}, err
	}
	p, err := compiler.Compile(g, compiler.Options{})
	if err != nil {
		return workload{}, err
	}
	in, err := harness.RandomInputs(g, 25, nil)
	if err != nil {
		return workload{}, err
	}
	return workload{name: name, prog: p, in: in, flops: flops}, nil
}

// burnResult is one workload's burn on one device.
type burnResult struct {
	runs, mismatches int
	first            []string // the first run's digests
	seconds          float64
	err              error
}

// burn runs every workload in turn on b until d has passed (at least once each), comparing
// each run's digests with the first run's, as gpu-burn compares each GEMM with the previous.
func burn(ctx context.Context, b backend.Backend, ws []workload, d time.Duration) []burnResult {
	out := make([]burnResult, len(ws))
	first := make([][]string, len(ws))
	end := time.Now().Add(d)
	for round := 0; round == 0 || time.Now().Before(end); round++ {
		if ctx.Err() != nil {
			break
		}
		for i, w := range ws {
			if out[i].err != nil {
				continue
			}
			t := time.Now()
			res := runOnce(b, w.prog, w.in)
			out[i].seconds += time.Since(t).Seconds()
			if res.err != nil {
				out[i].err = res.err
				continue
			}
			out[i].runs++
			if first[i] == nil {
				first[i], out[i].first = res.digests, res.digests
			} else if !slices.Equal(first[i], res.digests) {
				out[i].mismatches++
			}
		}
	}
	return out
}

// watch samples NVML every period until stop, keeping the hottest reading, every clock-event
// reason seen and the last PCIe replay count of the GPU with NVML index idx.
func watch(idx int, period time.Duration, stop <-chan struct{}) func() (mig.Health, int) {
	var mu sync.Mutex
	agg := mig.Health{Index: idx, Skipped: map[string]string{}}
	samples := 0
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(period)
		defer tick.Stop()
		for {
			if r, err := readHealth(); err == nil {
				for _, g := range r.GPUs {
					if g.Index != idx {
						continue
					}
					mu.Lock()
					samples++
					agg.Name, agg.Lost = g.Name, agg.Lost || g.Lost
					if g.TemperatureC != nil && (agg.TemperatureC == nil || *g.TemperatureC > *agg.TemperatureC) {
						t := *g.TemperatureC
						agg.TemperatureC = &t
					}
					if g.ClockEvents != nil {
						m := *g.ClockEvents
						if agg.ClockEvents != nil {
							m |= *agg.ClockEvents
						}
						agg.ClockEvents = &m
					}
					if g.PCIe != nil {
						p := *g.PCIe
						agg.PCIe = &p
					}
					for k, v := range g.Skipped {
						agg.Skipped[k] = v
					}
					mu.Unlock()
				}
			}
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()
	return func() (mig.Health, int) {
		<-done
		mu.Lock()
		defer mu.Unlock()
		return agg, samples
	}
}

// level3 is the burn-in (level 3) or the soak (level 4) on every device.
func level3(ctx context.Context, o Options, cpus []Target, chosen []*gpuTarget, add func(...Check), level int) {
	prefix := "burn"
	if level == 4 {
		prefix = "soak"
	}
	type dev struct {
		t     Target
		sku   SKU
		gpu   *gpuTarget
		haveS bool
	}
	var ds []dev
	for _, t := range cpus {
		s, ok := o.Thresholds.SKUFor("cpu", t.Backend.Device())
		ds = append(ds, dev{t: t, sku: s, haveS: ok})
	}
	names := []string{prefix + "/gemm", prefix + "/attention", prefix + "/known-answer-under-load"}
	for _, g := range gpuRunnable(chosen, level, names, add) {
		s, ok := o.Thresholds.SKUFor("gpu", g.info.Name)
		ds = append(ds, dev{t: Target{ID: g.id, Backend: cuda.New(g.info.Ordinal)}, sku: s, gpu: g, haveS: ok})
	}
	for _, d := range ds {
		secs := d.sku.BurnSeconds
		if level == 4 {
			secs = d.sku.SoakSeconds
		}
		if !d.haveS || secs <= 0 {
			for _, n := range names {
				add(Check{Name: n, Level: level, Device: d.t.ID, Verdict: Skipped, Reason: fmt.Sprintf("no %s duration for this device in the thresholds", prefix)})
			}
			continue
		}
		dur := time.Duration(secs * float64(time.Second))
		gemmText, attnText, flops := burnGraphs(d.gpu != nil)
		gemm, err1 := prepare("gemm", gemmText, flops)
		attn, err2 := prepare("attention", attnText, 0)
		if err := errorsJoin(err1, err2); err != nil {
			add(Check{Name: names[0], Level: level, Device: d.t.ID, Verdict: Fail, Code: string(errs.CodeOf(err)), Reason: errs.Line(err)})
			continue
		}
		stop := make(chan struct{})
		var sampled func() (mig.Health, int)
		if d.gpu != nil && d.gpu.index >= 0 {
			sampled = watch(d.gpu.index, 500*time.Millisecond, stop)
		}
		start := time.Now()
		// The known-answer scan runs beside the burn, on the same device, until the burn ends.
		scanCh := make(chan []Check, 1)
		bctx, cancel := context.WithTimeout(ctx, dur+10*time.Minute)
		go func() {
			var last []Check
			rounds := 0
			for rounds == 0 || time.Since(start) < dur {
				last = ScanSDC(bctx, []Target{d.t}, SDCOptions{Level: level, Name: names[2]})
				rounds++
				if last[0].Verdict != Pass {
					break
				}
			}
			last[0].Reason = fmt.Sprintf("scan %d beside the burn: %s", rounds, last[0].Reason)
			if last[0].Values == nil {
				last[0].Values = map[string]float64{}
			}
			last[0].Values["rounds"] = float64(rounds)
			scanCh <- last
		}()
		res := burn(bctx, d.t.Backend, []workload{gemm, attn}, dur)
		scan := <-scanCh
		cancel()
		close(stop)
		pinned := burnPins()[d.t.Backend.DeviceClass()]
		for i, w := range []workload{gemm, attn} {
			r := res[i]
			pin, havePin := pinned[w.name]
			c := Check{Name: prefix + "/" + w.name, Level: level, Device: d.t.ID, Seconds: r.seconds,
				Values: map[string]float64{"runs": float64(r.runs), "mismatches": float64(r.mismatches)}}
			tflops := 0.0
			if w.flops > 0 && r.seconds > 0 {
				tflops = w.flops * float64(r.runs) / r.seconds / 1e12
				c.Values["tflops"], c.Values["limit_min_tflops"] = tflops, d.sku.GEMMMinTFLOPS
			}
			switch {
			case r.err != nil:
				c.Verdict, c.Code, c.Reason = Fail, string(errs.CodeOf(r.err)), errs.Line(r.err)
			case r.mismatches > 0:
				c.Verdict, c.Code = Fail, string(errs.SDC)
				c.Reason = fmt.Sprintf("%s: %d of %d runs under load gave other bits than the first", errs.SDC, r.mismatches, r.runs)
			case havePin && len(r.first) == 1 && r.first[0] != pin:
				c.Verdict, c.Code = Fail, string(errs.SDC)
				c.Reason = fmt.Sprintf("%s: device %s, %s: every run gave digest %.16s, pinned %.16s for %s", errs.SDC, d.t.ID, w.name, r.first[0], pin, d.t.Backend.DeviceClass())
			case w.flops > 0 && d.sku.GEMMMinTFLOPS > 0 && tflops < d.sku.GEMMMinTFLOPS:
				c.Verdict, c.Reason = Fail, fmt.Sprintf("%.2f TFLOPS, below the %s minimum %.1f", tflops, d.sku.Name, d.sku.GEMMMinTFLOPS)
			default:
				c.Verdict = Pass
				c.Reason = fmt.Sprintf("%d runs over %.1fs, every one bit for bit as the first", r.runs, time.Since(start).Seconds())
				if havePin {
					c.Reason += " and as pinned for " + d.t.Backend.DeviceClass()
				} else {
					c.Reason += " (no pinned digest for " + d.t.Backend.DeviceClass() + " in burnpins.json: compared with the first run only)"
				}
				if tflops > 0 {
					c.Reason += fmt.Sprintf(", %.3f TFLOPS", tflops)
				}
			}
			add(c)
		}
		add(scan...)
		if sampled != nil {
			h, n := sampled()
			for _, c := range NVMLChecks(h, d.sku, d.haveS, true) {
				switch c.Name {
				case "nvml/temperature", "nvml/clock-events", "nvml/pcie-replay":
					c.Name, c.Level = prefix+"/"+c.Name[len("nvml/"):], level
					c.Reason += fmt.Sprintf(" (under load, %d NVML samples)", n)
					add(c)
				}
			}
		} else if d.gpu == nil {
			add(Check{Name: prefix + "/temperature", Level: level, Device: d.t.ID, Verdict: Skipped, Reason: "the CPU backend reports no temperature or clocks"})
		}
		if level == 4 {
			passes := max(int(d.sku.MemtestPassesLong), 1)
			if d.gpu == nil {
				res, err := memtestHost(ctx, make([]byte, max(int(d.sku.MemtestBytes), 1<<20)), passes)
				add(memtestCheck("soak/memory-patterns", 4, d.t.ID, res, err))
			} else if raw, err := openRaw(d.gpu.info.Ordinal); err != nil {
				add(Check{Name: "soak/memory-patterns", Level: 4, Device: d.t.ID, Verdict: Fail, Reason: errs.Line(err)})
			} else {
				free := d.gpu.info.TotalMem / 2
				if st, err := cuda.New(d.gpu.info.Ordinal).Stats(); err == nil && st.DeviceFree > 0 {
					free = st.DeviceFree
				}
				res, err := gpuMemtest(ctx, raw, free, d.sku.MemtestFraction, d.sku.MemtestBytes, passes)
				add(memtestCheck("soak/memory-patterns", 4, d.t.ID, res, err))
			}
		}
	}
	if level == 3 {
		runnable := 0
		for _, g := range chosen {
			if g.cudaOK {
				runnable++
			}
		}
		reason := fmt.Sprintf("%d GPUs on this node: pairwise collectives need two", runnable)
		if runnable >= 2 {
			reason = fmt.Sprintf("%d GPUs: pairwise busbw between local GPUs is not built yet (docs/health.md, open work)", runnable)
		}
		add(Check{Name: "collectives/pairs", Level: 3, Device: "node", Verdict: Skipped, Reason: reason})
		parts := 0
		for _, g := range chosen {
			if g.cudaOK && g.info.MIG == "enabled" {
				parts++
			}
		}
		reason = "no GPU with MIG enabled: no partitions to isolate"
		if parts > 0 {
			reason = "MIG partition isolation is the partitions suite's (suites/partitions), not run by doctor yet"
		}
		add(Check{Name: "partitions/isolation", Level: 3, Device: "node", Verdict: Skipped, Reason: reason})
	}
}

func errorsJoin(a, b error) error {
	if a != nil {
		return a
	}
	return b
}
