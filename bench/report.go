package bench

import (
	"fmt"
	"github.com/tessera-qa/tessera-qa/report/parse"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// Report is the JSON document `tessera-qa bench --json` writes. Its shape is defined once, by
// the reader (`tessera-qa report ingest`, report/parse), so writer and reader cannot
// drift apart. A row's Ratio is engine_ms / ref_ms, the reporter's convention (lower is
// better); the printed table shows its inverse, the speedup.
type (
	Report  = parse.BenchReport
	JSONRow = parse.BenchRow
)

// Schema and Kind of the bench JSON.
const (
	ReportSchema = parse.BenchSchema
	ReportKind   = parse.BenchKind
)

// Meta is what a report says about the run besides its rows.
type Meta struct {
	Machine string
	Started time.Time
	Device  Device
	Oracle  string // Describe()
	Torch   string // version
	Opt     Options
	Command string
}

// NewReport builds the bench JSON: one row per timed case; the cases that failed or errored
// are listed in env["failed"] (the rows carry measurements only).
func NewReport(m Meta, rows []Row) Report {
	env := map[string]string{
		"device": m.Device.Name, "driver": m.Device.Driver, "oracle": m.Oracle, "torch": m.Torch,
		"reps": strconv.Itoa(m.Opt.Reps), "warmup": strconv.Itoa(m.Opt.Warmup), "seed": strconv.FormatUint(m.Opt.Seed, 10),
		"l2_flush_bytes": strconv.Itoa(2 * max(m.Device.L2Bytes, 1<<20)), "command": m.Command,
	}
	rep := Report{Schema: ReportSchema, Kind: ReportKind, Machine: m.Machine, DeviceClass: m.Device.Class, Started: m.Started.UTC(), Env: env}
	var failed []string
	for _, r := range rows {
		if !r.Passed() {
			failed = append(failed, r.Case.String()+": "+short(r.Verdict()))
			continue
		}
		rep.Rows = append(rep.Rows, JSONRow{Op: r.Op, DType: r.DType.String(), Shape: r.Shape, Device: m.Device.Class,
			EngineMS: r.EngineMS, RefMS: r.TorchMS, Ratio: r.EngineMS / r.TorchMS, TFLOPS: r.TFLOPS(), GBps: r.GBps(),
			SamplesMS: r.EngineSamples, Ref: "torch"})
	}
	if len(failed) > 0 {
		env["failed"] = strings.Join(failed, "; ")
	}
	for k, v := range env {
		if v == "" {
			delete(env, k)
		}
	}
	return rep
}

// CopyGBps is the best copy bandwidth measured in the run (engine copy kernel or torch's
// clone, bytes read plus bytes written): what the memory-bound rows are held against.
func CopyGBps(rows []Row) (best float64, who string) {
	for _, r := range rows {
		if r.Op != "copy" || !r.Passed() {
			continue
		}
		if g := r.GBps(); g > best {
			best, who = g, "engine copy "+r.DType.String()
		}
		if g := r.TorchGBps(); g > best {
			best, who = g, "torch clone "+r.DType.String()
		}
	}
	return best, who
}

// memoryBound: ops with no flop count, whose floor is moving their bytes.
func memoryBound(r Row) bool { return r.Flops == 0 && r.Op != "copy" }

// PrintTable writes the human report: a header saying what was measured and how, one line
// per case, the copy bandwidth line and the failures in full.
func PrintTable(w io.Writer, m Meta, rows []Row) {
	fmt.Fprintf(w, "bench --vs torch on %s; %s\n", m.Device.Name, m.Oracle)
	fmt.Fprintf(w, "median of %d reps after %d warm-up runs, CUDA events, L2 flushed (%d MiB written) before every rep; inputs seed %d\n",
		m.Opt.Reps, m.Opt.Warmup, 2*max(m.Device.L2Bytes, 1<<20)>>20, m.Opt.Seed)
	fmt.Fprintf(w, "SPEEDUP = torch ms / engine ms (>1: the engine is faster); TFLOP/S, GB/S: the engine's (GB/s counts each input read and the output written once)\n")
	fmt.Fprintf(w, "each side's reps run in rounds that alternate which side goes first; ± = (p90 - p10) / median of that side's reps\n\n")
	best, who := CopyGBps(rows)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "OP\tDTYPE\tSHAPE\tPATH\tENGINE_MS\t±\tTORCH_MS\t±\tTFLOP/S\tGB/S\t%COPY\tSPEEDUP\tCHECK\t")
	for _, r := range rows {
		check := "pass"
		if !r.Passed() {
			check = strings.SplitN(r.Verdict(), ":", 2)[0]
		}
		pct := "-"
		if memoryBound(r) && best > 0 && r.Timed() {
			pct = fmt.Sprintf("%.0f%%", 100*r.GBps()/best)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", r.Op, r.DType, ShapeString(r.Shape), orDash(r.Path),
			num(r.EngineMS, 4), spread(r.EngineSamples), num(r.TorchMS, 4), spread(r.TorchSamples), num(r.TFLOPS(), 1), num(r.GBps(), 0), pct, speed(r), check)
	}
	tw.Flush()
	if best > 0 {
		fmt.Fprintf(w, "\ncopy bandwidth (best device-to-device copy in this run, read+write): %.0f GB/s (%s); %%COPY = GB/S over it\n", best, who)
	}
	PrintTargets(w, rows)
	for _, r := range rows {
		if !r.Passed() {
			fmt.Fprintf(w, "%s: %s\n", r.Case, r.Verdict())
		}
	}
}

// spread prints Spread as a percentage ("-" without samples).
func spread(samples []float64) string {
	if len(samples) == 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f%%", 100*Spread(samples))
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func num(v float64, prec int) string {
	if v <= 0 {
		return "-"
	}
	if prec == 0 {
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
	if v >= 100 {
		return strconv.FormatFloat(v, 'f', 1, 64)
	}
	return strconv.FormatFloat(v, 'g', prec, 64)
}

func speed(r Row) string {
	if !r.Timed() {
		return "-"
	}
	return fmt.Sprintf("%.2fx", r.Speedup())
}
