package parse

import (
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/tessera-qa/tessera-qa/report/store"
)

// BenchSchema is the version of the bench JSON (docs/reporter.md).
const BenchSchema = 1

// maxKernels bounds a profiled point's per-kernel breakdown.
const maxKernels = 4096

// BenchKind marks a bench JSON document.
const BenchKind = "tessera-bench"

// BenchReport is what `tessera-qa bench` writes and `report ingest` reads: one run of
// benchmarks, each row measured side by side with a reference (torch) in the same process.
type BenchReport struct {
	Schema      int               `json:"schema"`
	Kind        string            `json:"kind"` // BenchKind
	Commit      string            `json:"commit,omitempty"`
	Branch      string            `json:"branch,omitempty"`
	Machine     string            `json:"machine,omitempty"`
	DeviceClass string            `json:"device_class,omitempty"`
	Started     time.Time         `json:"started,omitempty"`
	Env         map[string]string `json:"env,omitempty"`
	Rows        []BenchRow        `json:"rows"`
}

// BenchRow is one benchmark measurement.
type BenchRow struct {
	Op     string `json:"op"`
	DType  string `json:"dtype"`
	Shape  []int  `json:"shape"`
	Device string `json:"device"` // device class the series belongs to ("cuda/sm_90")
	// EngineMS, RefMS: medians of the repetitions; RefMS is 0 when no reference ran.
	EngineMS float64 `json:"engine_ms"`
	RefMS    float64 `json:"ref_ms"`
	// Ratio = EngineMS / RefMS (lower is better; 1.25 is 25% slower than the reference).
	Ratio  float64 `json:"ratio"`
	TFLOPS float64 `json:"tflops"`
	GBps   float64 `json:"gbps"`
	// SamplesMS: the engine's per-repetition times, when recorded; they make the
	// Mann-Whitney comparison of one run meaningful.
	SamplesMS []float64 `json:"samples_ms,omitempty"`
	Ref       string    `json:"ref,omitempty"` // "torch"
	// Kernels is the point's per-kernel breakdown, when it was profiled (profile --json,
	// docs/profiling.md): which kernel took the time, with its launch shape and fusion.
	Kernels []KernelPoint `json:"kernels,omitempty"`
}

// KernelPoint is one kernel of a profiled benchmark point.
type KernelPoint struct {
	Kernel   string  `json:"kernel"` // k0, k1 ... in program order
	Label    string  `json:"label"`  // MatMul[4x16x8]
	MedianMS float64 `json:"median_ms"`
	Grid     []int   `json:"grid"`
	Block    []int   `json:"block"`
	FLOPs    int64   `json:"flops"`
	Bytes    int64   `json:"bytes"`
	Regs     int64   `json:"regs,omitempty"` // registers per thread (CUDA)
	Fusion   string  `json:"fusion,omitempty"`
}

// ShapeString is the series' shape: dims joined by 'x' ("scalar" for none).
func ShapeString(dims []int) string {
	if len(dims) == 0 {
		return "scalar"
	}
	s := make([]string, len(dims))
	for i, d := range dims {
		s[i] = strconv.Itoa(d)
	}
	return strings.Join(s, "x")
}

func parseBench(file string, data []byte, doc bool) (*Report, error) {
	var rep BenchReport
	var err error
	if doc {
		err = decodeStrict(file, data, &rep)
	} else {
		err = decodeStrict(file, data, &rep.Rows)
		rep.Schema, rep.Kind = BenchSchema, BenchKind
	}
	if err != nil {
		return nil, err
	}
	c := NewChecker(file)
	if rep.Schema != BenchSchema || rep.Kind != BenchKind {
		c.failf("bench schema %d kind %q, this build reads schema %d kind %q", rep.Schema, clip(rep.Kind), BenchSchema, BenchKind)
		return nil, c.err
	}
	if len(rep.Rows) == 0 {
		c.failf("no bench rows")
		return nil, c.err
	}
	if len(rep.Rows) > MaxRows {
		c.failf("%d bench rows (limit %d)", len(rep.Rows), MaxRows)
		return nil, c.err
	}
	p := &Report{Kind: "bench"}
	for _, v := range []string{rep.Commit, rep.Branch, rep.Machine, rep.DeviceClass} {
		c.ident("header", "commit/branch/machine/device_class", v, false)
	}
	env := map[string]string{}
	for k, v := range rep.Env {
		env[c.ident("env", "key", k, true)] = text(v)
	}
	p.Batch.Run = store.RunRow{Commit: rep.Commit, Branch: rep.Branch, Machine: rep.Machine, DeviceClass: rep.DeviceClass,
		Started: rep.Started, Env: jsonString(env)}
	classes := map[string]int{}
	for i, r := range rep.Rows {
		row, ok := benchRow(c, "row "+strconv.Itoa(i), r)
		if !ok {
			return nil, c.err
		}
		classes[row.Key.Device]++
		p.Batch.Bench = append(p.Batch.Bench, row)
	}
	if p.Batch.Run.DeviceClass == "" {
		p.Batch.Run.DeviceClass = mostCommon(classes)
	}
	return p, nil
}

func benchRow(c *Checker, where string, r BenchRow) (store.BenchRow, bool) {
	c.ident(where, "op", r.Op, true)
	c.ident(where, "dtype", r.DType, true)
	c.ident(where, "device", r.Device, true)
	c.ident(where, "ref", r.Ref, false)
	if len(r.Shape) > 8 {
		c.failf("%s: shape has %d dims (limit 8)", where, len(r.Shape))
	}
	for _, d := range r.Shape {
		if d < 0 || d > 1<<40 {
			c.failf("%s: shape dim %d out of range", where, d)
		}
	}
	for _, f := range []struct {
		name string
		v    float64
	}{{"engine_ms", r.EngineMS}, {"ref_ms", r.RefMS}, {"ratio", r.Ratio}, {"tflops", r.TFLOPS}, {"gbps", r.GBps}} {
		c.num(where, f.name, f.v)
	}
	if r.EngineMS <= 0 {
		c.failf("%s: engine_ms must be > 0, got %g", where, r.EngineMS)
	}
	if len(r.SamplesMS) > maxSamples {
		c.failf("%s: %d samples (limit %d)", where, len(r.SamplesMS), maxSamples)
	}
	for _, s := range r.SamplesMS {
		if c.num(where, "samples_ms", s); s == 0 {
			c.failf("%s: samples_ms holds a zero time", where)
		}
	}
	ratio := r.Ratio
	if r.RefMS > 0 {
		want := r.EngineMS / r.RefMS
		if ratio == 0 {
			ratio = want
		} else if math.Abs(ratio-want) > 0.01*want {
			c.failf("%s: ratio %g does not match engine_ms/ref_ms = %g", where, ratio, want)
		}
	}
	if len(r.Kernels) > maxKernels {
		c.failf("%s: %d kernels (limit %d)", where, len(r.Kernels), maxKernels)
	}
	var kernels []store.KernelRow
	for j, k := range r.Kernels {
		kw := where + " kernel " + strconv.Itoa(j)
		c.ident(kw, "kernel", k.Kernel, true)
		c.ident(kw, "label", k.Label, false)
		c.num(kw, "median_ms", k.MedianMS)
		if k.MedianMS <= 0 || k.FLOPs < 0 || k.Bytes < 0 || k.Regs < 0 {
			c.failf("%s: median_ms must be > 0 and flops, bytes, regs >= 0", kw)
		}
		kernels = append(kernels, store.KernelRow{Kernel: k.Kernel, Label: k.Label, MedianMS: k.MedianMS,
			Grid: ShapeString(k.Grid), Block: ShapeString(k.Block), FLOPs: k.FLOPs, Bytes: k.Bytes, Regs: k.Regs, Fusion: text(k.Fusion)})
	}
	if c.err != nil {
		return store.BenchRow{}, false
	}
	row := store.BenchRow{Kernels: kernels, Key: store.SeriesKey{Benchmark: r.Op, Device: r.Device, DType: r.DType, Shape: ShapeString(r.Shape)},
		EngineMS: r.EngineMS, RefMS: r.RefMS, Ratio: ratio, TFLOPS: r.TFLOPS, GBps: r.GBps}
	// The series value: the ratio to the reference measured in the same run when there is
	// one (design.md §8: ratios, never absolute times across runs), else milliseconds.
	scale := 1.0
	if r.RefMS > 0 {
		row.Unit, row.Value, scale = "ratio", ratio, 1/r.RefMS
	} else {
		row.Unit, row.Value = "ms", r.EngineMS
	}
	for _, s := range r.SamplesMS {
		row.Samples = append(row.Samples, s*scale)
	}
	return row, true
}
