package bench

import (
	"fmt"
	"io"
	"text/tabwriter"
)

// Target is a bar one bench row is held to: a speedup against torch, or, for a memory-bound
// row, a share of the run's copy bandwidth (CopyGBps). The table below is issue 14's and 26's; a run
// prints how each row it measured stands (PrintTargets), so one command shows the scoreboard.
type Target struct {
	Op, DType, Shape string
	Metric           string // MetricSpeedup or MetricCopy
	Required, Goal   float64
}

// Target metrics.
const (
	MetricSpeedup = "speedup"
	MetricCopy    = "copy"
)

// Targets is issue 14's table (docs/PERF.md) and issue 26's FFT rows (docs/spectral.md).
var Targets = []Target{
	{"copy", "f32", "8192x8192", MetricCopy, 0.85, 0.95},
	{"copy", "bf16", "8192x8192", MetricCopy, 0.85, 0.95},
	{"cast", "f32", "8192x8192", MetricCopy, 0.85, 0.95},
	{"cast", "bf16", "8192x8192", MetricCopy, 0.85, 0.95},
	{"elementwise", "f32", "8192x8192", MetricCopy, 0.85, 0.95},
	{"elementwise", "bf16", "8192x8192", MetricCopy, 0.85, 0.95},
	{"reduce_sum", "f32", "8192x8192", MetricCopy, 0.80, 0.90},
	{"reduce_max", "f32", "8192x8192", MetricCopy, 0.80, 0.90},
	{"reduce_sum_cols", "f32", "8192x8192", MetricCopy, 0.80, 0.90},
	{"reduce_max_cols", "f32", "8192x8192", MetricCopy, 0.80, 0.90},
	{"transpose", "bf16", "8192x8192", MetricCopy, 0.75, 0.90},
	{"matmul", "bf16", "4096x4096x4096", MetricSpeedup, 0.95, 1.05},
	{"matmul", "bf16", "8192x8192x8192", MetricSpeedup, 0.95, 1.05},
	{"batch_matmul", "bf16", "8x2048x2048x2048", MetricSpeedup, 0.90, 1.00},
	{"attention", "bf16", "4x16x4096x128", MetricSpeedup, 0.95, 1.05},
	{"attention_causal", "bf16", "4x16x4096x128", MetricSpeedup, 0.95, 1.05},
	{"fp8gemm", "fp8e4m3", "8192x8192x8192", MetricSpeedup, 0.80, 1.00},
	// Issue 26 names the FFTs' metric (the share of copy bandwidth) but no bar: these are the
	// reductions' bars, the other rows that read once, work on chip and write once. The
	// conv2d rows have no bar (the issue asks only for the comparison with cuDNN).
	{"fft_c2c", "f32", "16384x1024", MetricCopy, 0.80, 0.90},
	{"fft_c2c", "f32", "4096x4096", MetricCopy, 0.80, 0.90},
	{"fft_r2c", "f32", "16384x1024", MetricCopy, 0.80, 0.90},
	{"fft_r2c", "f32", "4096x4096", MetricCopy, 0.80, 0.90},
}

// Standing is one target's row in a run: its value and verdict.
type Standing struct {
	Target
	Value   float64
	Verdict string // "goal met", "met", "NOT MET", or "no result" (the row ran and failed a check)
}

// Standings lists the targets whose rows this run measured, in the table's order. A copy
// target needs the run's copy bandwidth (a copy row that passed).
func Standings(rows []Row) []Standing {
	best, _ := CopyGBps(rows)
	var out []Standing
	for _, t := range Targets {
		for _, r := range rows {
			if r.Op != t.Op || r.DType.String() != t.DType || ShapeString(r.Shape) != t.Shape {
				continue
			}
			s := Standing{Target: t, Verdict: "no result"}
			if r.Passed() {
				s.Value = r.Speedup()
				if t.Metric == MetricCopy {
					s.Value = 0
					if best > 0 {
						s.Value = r.GBps() / best
					}
				}
				switch {
				case t.Metric == MetricCopy && best == 0:
				case s.Value >= t.Goal:
					s.Verdict = "goal met"
				case s.Value >= t.Required:
					s.Verdict = "met"
				default:
					s.Verdict = "NOT MET"
				}
			}
			out = append(out, s)
		}
	}
	return out
}

// PrintTargets writes the standings of the run's rows (nothing when no row has a target).
func PrintTargets(w io.Writer, rows []Row) {
	st := Standings(rows)
	if len(st) == 0 {
		return
	}
	fmt.Fprintf(w, "\ntargets (issues 14 and 26; copy = share of the run's copy bandwidth, speedup = torch ms / engine ms):\n")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ROW\tMETRIC\tVALUE\tREQUIRED\tGOAL\tVERDICT")
	for _, s := range st {
		val := "-"
		if s.Value > 0 {
			val = fmtMetric(s.Metric, s.Value)
		}
		fmt.Fprintf(tw, "%s/%s/%s\t%s\t%s\t%s\t%s\t%s\n", s.Op, s.DType, s.Shape, s.Metric, val,
			fmtMetric(s.Metric, s.Required), fmtMetric(s.Metric, s.Goal), s.Verdict)
	}
	tw.Flush()
}

func fmtMetric(metric string, v float64) string {
	if metric == MetricCopy {
		return fmt.Sprintf("%.0f%%", 100*v)
	}
	return fmt.Sprintf("%.2fx", v)
}
