package report

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sort"

	"github.com/tessera-qa/tessera-qa/report/stats"
	"github.com/tessera-qa/tessera-qa/report/store"
)

// KernelDelta is one kernel's change between the baseline runs and the candidate runs of a
// profiled series (docs/profiling.md): which kernel got slower, by how much, and whether its
// launch shape, registers or fusion changed.
type KernelDelta struct {
	Kernel string  `json:"kernel"`
	Label  string  `json:"label"`
	BaseMS float64 `json:"base_ms"` // median over the baseline runs (0: the kernel is new)
	MS     float64 `json:"ms"`      // median over the candidate runs (0: the kernel is gone)
	// Delta is MS/BaseMS - 1 (+1.0: twice as slow); 0 when either side is missing.
	Delta   float64  `json:"delta"`
	Changed []string `json:"changed,omitempty"` // "grid 1x1 -> 2x1", "regs 32 -> 64", "fusion", "label ..."
}

func (d KernelDelta) String() string {
	s := fmt.Sprintf("kernel %s %s %.4g -> %.4g ms", d.Kernel, d.Label, d.BaseMS, d.MS)
	if d.BaseMS > 0 && d.MS > 0 {
		s += fmt.Sprintf(" (%+.0f%%)", 100*d.Delta)
	}
	for _, c := range d.Changed {
		s += ", " + c
	}
	return s
}

// KernelDiff compares the per-kernel breakdowns of a series between baseline and candidate
// runs, kernels matched by name (k0, k1 ... in program order); the result is sorted by the
// time each kernel added, largest first. Runs without breakdowns contribute nothing; no
// breakdown on either side gives no deltas.
func (db *DB) KernelDiff(ctx context.Context, key SeriesKey, base, cand []int64) ([]KernelDelta, error) {
	bk, err := db.st.BenchKernels(ctx, key.store(), base)
	if err != nil {
		return nil, err
	}
	ck, err := db.st.BenchKernels(ctx, key.store(), cand)
	if err != nil {
		return nil, err
	}
	if len(bk) == 0 || len(ck) == 0 {
		return nil, nil
	}
	type side struct {
		ms   []float64
		last store.KernelRow
	}
	group := func(rows []store.KernelRow) map[string]*side {
		m := map[string]*side{}
		for _, r := range rows {
			s := m[r.Kernel]
			if s == nil {
				s = &side{}
				m[r.Kernel] = s
			}
			s.ms = append(s.ms, r.MedianMS)
			s.last = r
		}
		return m
	}
	bs, cs := group(bk), group(ck)
	names := map[string]bool{}
	for n := range bs {
		names[n] = true
	}
	for n := range cs {
		names[n] = true
	}
	var out []KernelDelta
	for n := range names {
		d := KernelDelta{Kernel: n}
		b, c := bs[n], cs[n]
		if b != nil {
			d.BaseMS, d.Label = stats.Median(b.ms), b.last.Label
		}
		if c != nil {
			d.MS, d.Label = stats.Median(c.ms), c.last.Label
		}
		if b != nil && c != nil {
			if d.BaseMS > 0 {
				d.Delta = d.MS/d.BaseMS - 1
			}
			for _, f := range []struct{ name, was, now string }{
				{"label", b.last.Label, c.last.Label}, {"grid", b.last.Grid, c.last.Grid}, {"block", b.last.Block, c.last.Block},
				{"regs", fmt.Sprint(b.last.Regs), fmt.Sprint(c.last.Regs)}, {"fusion", b.last.Fusion, c.last.Fusion},
			} {
				if f.was != f.now {
					d.Changed = append(d.Changed, fmt.Sprintf("%s %s -> %s", f.name, f.was, f.now))
				}
			}
		} else if b == nil {
			d.Changed = []string{"new kernel"}
		} else {
			d.Changed = []string{"kernel gone"}
		}
		out = append(out, d)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Kernel < out[j].Kernel })
	slices.SortStableFunc(out, func(a, b KernelDelta) int { return cmp.Compare(b.MS-b.BaseMS, a.MS-a.BaseMS) })
	return out, nil
}

// runIDs maps point indexes of a series to run ids.
func runIDs(h *seriesHist, ix *runIndex, pts []int) []int64 {
	var out []int64
	for _, i := range pts {
		out = append(out, ix.runs[h.pts[i].run].ID)
	}
	return out
}
