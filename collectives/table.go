package collectives

import (
	"fmt"
	"io"
	"strings"
)

// PrintTable writes rows as nccl-tests prints them: one block per op, transport, mode and
// world, with the size, count, type, redop, root, then time, algbw, busbw and #wrong out of
// place and in place; then the first 12 hex digits of the row's digest, and gloo's time,
// busbw and the ratio when --vs gloo measured them.
func PrintTable(w io.Writer, rows []Row) {
	gloo, dev, host := false, false, false
	for _, r := range rows {
		gloo = gloo || r.GlooTimeUS > 0
		dev = dev || r.CopyGBs > 0
		host = host || r.HostEqual != nil
	}
	var group string
	for _, r := range rows {
		g := fmt.Sprintf("%s|%s|%s|%d", r.Op, r.Transport, r.Mode, r.World)
		if g != group {
			if group != "" {
				fmt.Fprintln(w)
			}
			group = g
			bits := "bits guaranteed run to run and across transports"
			if !r.BitsGuaranteed {
				bits = "bits not guaranteed"
			}
			fmt.Fprintf(w, "# %s  transport %s  mode %s  world %d  (%s)\n", r.Op, r.Transport, r.Mode, r.World, bits)
			extra, units := "", ""
			if gloo {
				extra, units = "  gloo(us) gloo-busbw   ratio   ratio", "               (GB/s)   (oop)    (ip)"
			}
			if dev {
				extra, units = extra+"       copy bus/copy", units+"     (GB/s)"
			}
			if host {
				extra, units = extra+"  host", units+"  bits"
			}
			fmt.Fprintln(w, "#"+strings.Repeat(" ", 61)+"out-of-place"+strings.Repeat(" ", 23)+"in-place")
			head := func(cols ...any) {
				fmt.Fprintln(w, strings.TrimRight(fmt.Sprintf("# %10s %13s %9s %7s %6s %9s %7s %7s %6s %9s %7s %7s %6s  %-12s%s", cols...), " "))
			}
			head("size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw", "#wrong", "digest", extra)
			head("(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "", "", units)
		}
		line := fmt.Sprintf("  %10d %13d %9s %7s %6d %9s %7s %7s %6d %9s %7s %7s %6d  %-12s",
			r.Bytes, r.Count, r.DType, r.RedOp, r.Root, us(r.TimeUS), bw(r.AlgBWGBs, r.TimeUS), bw(r.BusBWGBs, r.TimeUS), r.Wrong,
			us(r.TimeUSIP), bw(r.AlgBWGBsIP, r.TimeUSIP), bw(r.BusBWGBsIP, r.TimeUSIP), r.WrongIP, short(r.Digest))
		if gloo {
			line += fmt.Sprintf("  %8s %10s %7s %7s", us(r.GlooTimeUS), bw(r.GlooBusBWGBs, r.GlooTimeUS), ratio(r.Ratio), ratio(r.RatioIP))
		}
		if dev {
			line += fmt.Sprintf("  %9s %8s", bw(r.CopyGBs, r.CopyUS), ratio(r.BusOverCopy))
		}
		if host {
			eq := "-"
			if r.HostEqual != nil {
				eq = "same"
				if !*r.HostEqual {
					eq = "DIFF"
				}
			}
			line += fmt.Sprintf("  %4s", eq)
		}
		if !r.OK {
			line += "  FAIL: " + r.Note
		}
		fmt.Fprintln(w, strings.TrimRight(line, " "))
	}
}

func us(v float64) string {
	switch {
	case v <= 0:
		return "-"
	case v < 1e4:
		return fmt.Sprintf("%.2f", v)
	}
	return fmt.Sprintf("%.0f", v)
}

func bw(v, t float64) string {
	if t <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.3f", v)
}

func ratio(v float64) string {
	if v <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.2fx", v)
}

// PrintSummary writes nccl-tests' closing lines (out of bounds values, average bus
// bandwidth) and this harness's: rows passed, the cross-row checks, failures, the verdict.
func PrintSummary(w io.Writer, rep *Report) {
	var wrong, failed int64
	var bus float64
	timed := 0
	for _, r := range rep.Rows {
		wrong += r.Wrong + r.WrongIP + r.SplitWrong
		if !r.OK {
			failed++
		}
		if r.TimeUS > 0 && r.Bytes > 0 {
			bus += r.BusBWGBs
			timed++
		}
	}
	ok := "OK"
	if wrong > 0 {
		ok = "FAILED"
	}
	fmt.Fprintf(w, "\n# Out of bounds values : %d %s\n", wrong, ok)
	if timed > 0 {
		fmt.Fprintf(w, "# Avg bus bandwidth    : %.3f GB/s (out of place, %d timed rows)\n", bus/float64(timed), timed)
	}
	fmt.Fprintf(w, "# %d rows: %d passed, %d failed (seed %d, %d iterations after %d warm-up)\n",
		len(rep.Rows), int64(len(rep.Rows))-failed, failed, rep.Seed, rep.Iters, rep.Warmup)
	for _, c := range rep.Checks {
		verdict := "ok"
		if !c.Passed {
			verdict = "FAILED"
		}
		fmt.Fprintf(w, "# check %s: %s\n", c.Name, verdict)
		for i, d := range c.Detail {
			if i == 10 {
				fmt.Fprintf(w, "#   ... and %d more\n", len(c.Detail)-10)
				break
			}
			fmt.Fprintf(w, "#   %s\n", d)
		}
	}
	printModeCost(w, rep.ModeCost)
	if rep.DeviceClass != "" && !strings.HasPrefix(rep.DeviceClass, "cpu/") {
		fmt.Fprintf(w, "# device: %s; times are CUDA events; copy = a device-to-device copy of the row's bytes on rank 0's GPU in the same run (bus/copy = busbw / copy bandwidth)\n", rep.DeviceClass)
	}
	if rep.Gloo != "" {
		fmt.Fprintf(w, "# gloo: %s; ratio = our busbw / gloo's (above 1: faster than gloo), out of place and in place; gloo's all_reduce is in place, its input restored outside the clock as our in-place one is: the in-place ratio is like with like\n", rep.Gloo)
	}
	for _, n := range rep.Notes {
		fmt.Fprintf(w, "# note: %s\n", n)
	}
	listed := 0
	for _, r := range rep.Rows {
		if r.OK {
			continue
		}
		if listed == 20 {
			fmt.Fprintf(w, "#   ... and %d more failing rows\n", failed-20)
			break
		}
		listed++
		fmt.Fprintf(w, "# FAIL %s (%s): %s\n", r.Key(), r.Transport, r.Note)
	}
	if rep.Passed {
		fmt.Fprintln(w, "PASS")
	} else {
		fmt.Fprintln(w, "FAIL")
	}
}

// printModeCost writes one line per op, dtype, reduction, world, transport and mode: the time
// ratios over the base mode, size by size.
func printModeCost(w io.Writer, mc []ModeCost) {
	var order []string
	lines := map[string][]string{}
	for _, m := range mc {
		k := fmt.Sprintf("# %s vs %s time: %s %s %s, %d ranks, %s:", m.Mode, m.Base, m.Op, m.DType, m.RedOp, m.World, m.Transport)
		if _, ok := lines[k]; !ok {
			order = append(order, k)
		}
		lines[k] = append(lines[k], fmt.Sprintf("%dB %.2fx", m.Bytes, m.Ratio))
	}
	for _, k := range order {
		fmt.Fprintln(w, k, strings.Join(lines[k], ", "))
	}
}
