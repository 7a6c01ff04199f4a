package profiling

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
)

// Top returns the k kernels with the highest median latency (all for k <= 0), slowest first;
// ties keep program order.
func (r *Report) Top(k int) []Kernel {
	ks := slices.Clone(r.Kernels)
	slices.SortStableFunc(ks, func(a, b Kernel) int { return cmp.Compare(b.MedianUS, a.MedianUS) })
	if k > 0 && k < len(ks) {
		ks = ks[:k]
	}
	return ks
}

// Latency formats microseconds the way the summary prints them: 2.3us, 1.25ms, 3.1s.
func Latency(us float64) string {
	switch {
	case us >= 1e6:
		return fmt.Sprintf("%.3gs", us/1e6)
	case us >= 1e3:
		return fmt.Sprintf("%.3gms", us/1e3)
	}
	return fmt.Sprintf("%.3gus", us)
}

// Line is one kernel's summary line: MatMul[128x128x64] latency=2.3us gflops=... gbps=...
func (k Kernel) Line() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s latency=%s gflops=%.3g gbps=%.3g flops=%d bytes=%d grid=%v block=%v",
		k.Label, Latency(k.MedianUS), k.GFLOPs, k.GBps, k.FLOPs, k.Bytes, k.Grid, k.Block)
	if occ, ok := k.Attrs["occupancy_pct"]; ok {
		fmt.Fprintf(&b, " occupancy=%d%% (theoretical)", occ)
	}
	for _, a := range []string{"regs", "shared_bytes", "local_bytes"} {
		if v, ok := k.Attrs[a]; ok {
			fmt.Fprintf(&b, " %s=%d", a, v)
		}
	}
	return b.String()
}

// WriteSummary prints the top-k kernels, the compile passes and the fusion trace.
func (r *Report) WriteSummary(w io.Writer, top int) error {
	if len(r.Kernels) == 0 {
		return errNoKernels
	}
	fmt.Fprintf(w, "profile of %s on %s (%s), %d runs, step median %s, %d kernels, run buffers %d bytes\n",
		r.Graph, r.Backend, r.Device, len(r.StepUS), Latency(median(r.StepUS)), len(r.Kernels), r.RunBytes)
	var sum float64
	for _, k := range r.Kernels {
		sum += k.MedianUS
	}
	fmt.Fprintf(w, "%-4s %6s  %s\n", "kern", "share", "summary")
	for _, k := range r.Top(top) {
		share := 0.0
		if sum > 0 {
			share = 100 * k.MedianUS / sum
		}
		fmt.Fprintf(w, "%-4s %5.1f%%  %s\n", k.Name, share, k.Line())
		fmt.Fprintf(w, "            nodes %s\n", strings.Join(k.Nodes, " "))
		for _, f := range k.Fusion {
			fmt.Fprintf(w, "            fusion %s\n", f)
		}
	}
	fmt.Fprintf(w, "compile %s:", Latency(us(r.CompileDur)))
	for _, p := range r.Passes {
		fmt.Fprintf(w, " %s=%s", p.Name, Latency(us(p.Dur)))
	}
	fmt.Fprintln(w)
	return nil
}

// roundUS keeps durations in the JSON readable.
func roundUS(d time.Duration) float64 { return float64(d.Round(time.Nanosecond).Nanoseconds()) / 1e3 }
