package doctor

import (
	"fmt"
	"strings"

	"github.com/tessera-qa/tessera-qa/mig"
)

// NVMLChecks judges one GPU's NVML health fields against its SKU's limits (level 1). stress
// selects the limits that apply under load (the PCIe replay limit). Every field NVML did not
// give is a skipped check naming why; a lost GPU fails every check that needed it.
func NVMLChecks(g mig.Health, sku SKU, haveSKU bool, stress bool) []Check {
	dev := fmt.Sprintf("gpu:%d", g.Index)
	var out []Check
	add := func(name string, v Verdict, reason string, vals map[string]float64) {
		out = append(out, Check{Name: "nvml/" + name, Level: 1, Device: dev, Verdict: v, Reason: reason, Values: vals})
	}
	skip := func(name, field string) {
		r, ok := g.Skipped[field]
		if !ok {
			r = "NVML gave no " + field
		}
		add(name, Skipped, r, nil)
	}
	noSKU := func(name, limit string) bool {
		if !haveSKU {
			add(name, Skipped, fmt.Sprintf("no SKU in the thresholds matches %q", g.Name), nil)
			return true
		}
		return false
	}
	if g.Lost {
		add("reachable", Fail, "NVML answers GPU_IS_LOST: the GPU fell off the bus (XID 79's state); reset or drain the node", nil)
	} else {
		add("reachable", Pass, "NVML answers for the GPU", nil)
	}
	// XID critical errors: 79 (fallen off the bus), 48 (DBE), 63/64 (row remap), 94/95
	// (contained/uncontained ECC), 92 (high SBE rate), 74 (NVLink) are node faults.
	if g.XIDs != nil {
		if len(g.XIDs) == 0 {
			add("xid", Pass, "no XID critical-error event while doctor listened", nil)
		} else {
			v := Warn
			var names []string
			for _, x := range g.XIDs {
				names = append(names, fmt.Sprintf("%d (%s)", x, xidMeaning(x)))
				if fatalXID(x) {
					v = Fail
				}
			}
			add("xid", v, "XID events: "+strings.Join(names, ", "), map[string]float64{"events": float64(len(g.XIDs))})
		}
	} else {
		skip("xid", "xid")
	}
	if g.ECCEnabled != nil {
		if *g.ECCEnabled {
			add("ecc-mode", Pass, "ECC is on", nil)
		} else {
			add("ecc-mode", Warn, "ECC is off: memory errors go undetected", nil)
		}
	} else {
		skip("ecc-mode", "ecc_mode")
	}
	if e := g.ECC; e != nil {
		vals := map[string]float64{"volatile_sbe": float64(e.VolatileSBE), "volatile_dbe": float64(e.VolatileDBE),
			"aggregate_sbe": float64(e.AggregateSBE), "aggregate_dbe": float64(e.AggregateDBE), "limit_volatile_sbe_warn": sku.ECCSBEVolatileWarn}
		switch {
		case e.VolatileDBE > 0:
			add("ecc", Fail, fmt.Sprintf("%d double-bit (uncorrectable) ECC errors since the driver loaded", e.VolatileDBE), vals)
		case e.AggregateDBE > 0:
			add("ecc", Warn, fmt.Sprintf("%d double-bit ECC errors over the GPU's life, none since the driver loaded", e.AggregateDBE), vals)
		case haveSKU && sku.ECCSBEVolatileWarn > 0 && float64(e.VolatileSBE) >= sku.ECCSBEVolatileWarn:
			add("ecc", Warn, fmt.Sprintf("%d single-bit ECC errors since the driver loaded (warn at %v)", e.VolatileSBE, sku.ECCSBEVolatileWarn), vals)
		default:
			add("ecc", Pass, fmt.Sprintf("no double-bit ECC errors; %d single-bit since the driver loaded", e.VolatileSBE), vals)
		}
	} else {
		skip("ecc", "ecc")
	}
	if p := g.RetiredPages; p != nil {
		n := float64(p.SBE + p.DBE)
		vals := map[string]float64{"sbe": float64(p.SBE), "dbe": float64(p.DBE), "limit_fail": sku.RetiredPagesFail}
		switch {
		case haveSKU && sku.RetiredPagesFail > 0 && n >= sku.RetiredPagesFail:
			add("retired-pages", Fail, fmt.Sprintf("%v pages retired (fail at %v): return the GPU", n, sku.RetiredPagesFail), vals)
		case p.Pending:
			add("retired-pages", Warn, "a page retirement waits for a reboot", vals)
		default:
			add("retired-pages", Pass, fmt.Sprintf("%v pages retired, none pending", n), vals)
		}
	} else {
		skip("retired-pages", "retired_pages")
	}
	if r := g.RemappedRows; r != nil {
		vals := map[string]float64{"correctable": float64(r.Correctable), "uncorrectable": float64(r.Uncorrectable),
			"pending": b2f(r.Pending), "failure": b2f(r.Failure)}
		switch {
		case r.Failure:
			add("remapped-rows", Fail, "a row remap failed (no spare row left): return the GPU", vals)
		case r.Pending:
			add("remapped-rows", Fail, "a row remap is pending: reset the GPU before trusting its memory", vals)
		default:
			add("remapped-rows", Pass, fmt.Sprintf("%d rows remapped (%d uncorrectable), none pending or failed", r.Correctable+r.Uncorrectable, r.Uncorrectable), vals)
		}
	} else {
		skip("remapped-rows", "remapped_rows")
	}
	if m := g.ClockEvents; m != nil {
		vals := map[string]float64{"mask": float64(*m)}
		var hw, sw []string
		for _, b := range []struct {
			bit  uint64
			name string
			hw   bool
		}{{mig.ClockEventHWThermal, "HW thermal slowdown", true}, {mig.ClockEventHWPowerBrake, "HW power brake", true},
			{mig.ClockEventHWSlowdown, "HW slowdown", true}, {mig.ClockEventSWThermal, "SW thermal slowdown", false},
			{mig.ClockEventSWPowerCap, "SW power cap", false}} {
			if *m&b.bit != 0 {
				if b.hw {
					hw = append(hw, b.name)
				} else {
					sw = append(sw, b.name)
				}
			}
		}
		switch {
		case len(hw) > 0:
			add("clock-events", Fail, "clocks held down by "+strings.Join(append(hw, sw...), ", "), vals)
		case len(sw) > 0:
			add("clock-events", Warn, "clocks held down by "+strings.Join(sw, ", "), vals)
		default:
			add("clock-events", Pass, "no thermal or power clock events", vals)
		}
	} else {
		skip("clock-events", "clock_events")
	}
	if t := g.TemperatureC; t != nil {
		if !noSKU("temperature", "") {
			vals := map[string]float64{"celsius": float64(*t), "limit_warn": sku.TemperatureWarnC, "limit_fail": sku.TemperatureFailC}
			switch {
			case sku.TemperatureFailC > 0 && float64(*t) >= sku.TemperatureFailC:
				add("temperature", Fail, fmt.Sprintf("%d C (fail at %v C)", *t, sku.TemperatureFailC), vals)
			case sku.TemperatureWarnC > 0 && float64(*t) >= sku.TemperatureWarnC:
				add("temperature", Warn, fmt.Sprintf("%d C (warn at %v C)", *t, sku.TemperatureWarnC), vals)
			default:
				add("temperature", Pass, fmt.Sprintf("%d C", *t), vals)
			}
		}
	} else {
		skip("temperature", "temperature")
	}
	if p := g.PCIe; p != nil {
		if !noSKU("pcie-link", "") {
			vals := map[string]float64{"gen": float64(p.Gen), "width": float64(p.Width), "max_gen": float64(p.MaxGen),
				"max_width": float64(p.MaxWidth), "limit_min_gen": sku.PCIeMinGen, "limit_min_width": sku.PCIeMinWidth}
			switch {
			case sku.PCIeMinWidth > 0 && float64(p.Width) < sku.PCIeMinWidth:
				add("pcie-link", Fail, fmt.Sprintf("PCIe link x%d, below x%v (the slot or riser trained degraded; max x%d)", p.Width, sku.PCIeMinWidth, p.MaxWidth), vals)
			case sku.PCIeMinGen > 0 && float64(p.Gen) < sku.PCIeMinGen:
				// An idle link steps down its generation to save power: a warning, not a fault.
				add("pcie-link", Warn, fmt.Sprintf("PCIe gen %d, below gen %v (idle links step down; rerun under load)", p.Gen, sku.PCIeMinGen), vals)
			default:
				add("pcie-link", Pass, fmt.Sprintf("PCIe gen %d x%d", p.Gen, p.Width), vals)
			}
		}
		if p.Replays == nil {
			skip("pcie-replay", "pcie_replay")
		} else if !noSKU("pcie-replay", "") {
			limit := sku.PCIeReplayFail
			if stress {
				limit = sku.PCIeReplayFailStress
			}
			vals := map[string]float64{"replays": float64(*p.Replays), "limit_fail": limit}
			if limit > 0 && float64(*p.Replays) > limit {
				add("pcie-replay", Fail, fmt.Sprintf("%d PCIe replays (fail above %v)", *p.Replays, limit), vals)
			} else {
				add("pcie-replay", Pass, fmt.Sprintf("%d PCIe replays", *p.Replays), vals)
			}
		}
	} else {
		skip("pcie-link", "pcie")
	}
	if g.NVLinks != nil && len(g.NVLinks) > 0 {
		var total uint64
		for _, l := range g.NVLinks {
			total += l.Replay + l.Recovery + l.CRCFlit + l.CRCData
		}
		vals := map[string]float64{"links": float64(len(g.NVLinks)), "errors": float64(total), "limit_warn": sku.NVLinkErrorsWarn, "limit_fail": sku.NVLinkErrorsFail}
		switch {
		case haveSKU && sku.NVLinkErrorsFail > 0 && float64(total) >= sku.NVLinkErrorsFail:
			add("nvlink", Fail, fmt.Sprintf("%d NVLink errors over %d links (fail at %v)", total, len(g.NVLinks), sku.NVLinkErrorsFail), vals)
		case haveSKU && sku.NVLinkErrorsWarn > 0 && float64(total) >= sku.NVLinkErrorsWarn:
			add("nvlink", Warn, fmt.Sprintf("%d NVLink errors over %d links", total, len(g.NVLinks)), vals)
		default:
			add("nvlink", Pass, fmt.Sprintf("%d NVLink errors over %d links", total, len(g.NVLinks)), vals)
		}
	} else {
		skip("nvlink", "nvlink")
	}
	if g.Persistence != nil {
		if *g.Persistence {
			add("persistence", Pass, "persistence mode on", nil)
		} else {
			add("persistence", Warn, "persistence mode off: the driver unloads between jobs (slow starts, lost state)", nil)
		}
	} else {
		skip("persistence", "persistence")
	}
	return out
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// fatalXID: XIDs after which a node is not to be trusted until reset.
func fatalXID(x uint64) bool {
	switch x {
	case 48, 63, 64, 74, 79, 92, 94, 95, 119, 120:
		return true
	}
	return false
}

func xidMeaning(x uint64) string {
	switch x {
	case 13:
		return "graphics engine exception"
	case 31:
		return "GPU memory page fault"
	case 43:
		return "GPU stopped processing"
	case 45:
		return "preemptive cleanup"
	case 48:
		return "double-bit ECC error"
	case 63:
		return "row remap recorded"
	case 64:
		return "row remap failed"
	case 74:
		return "NVLink error"
	case 79:
		return "GPU has fallen off the bus"
	case 92:
		return "high single-bit ECC rate"
	case 94:
		return "contained ECC error"
	case 95:
		return "uncontained ECC error"
	case 119, 120:
		return "GSP error"
	}
	return "see NVIDIA's XID catalogue"
}
