package profiling

import (
	"strings"

	"github.com/tessera-qa/tessera-qa/report/parse"
)

// BenchDoc is the profile as a bench JSON document (`profile --json`), which `tessera-qa
// report ingest` reads: one row, series profile/GRAPH on the device class, its value the
// median step time against the calibration workload timed next to each step (a ratio, as
// design.md §8 asks), the samples one per run (each step scaled by its own calibration), and
// the per-kernel breakdown the reporter stores beside the point (so a regression of the series
// can say which kernel got slower).
func (r *Report) BenchDoc() parse.BenchReport {
	var flops, bytes int64
	var kps []parse.KernelPoint
	for _, k := range r.Kernels {
		flops += k.FLOPs
		bytes += k.Bytes
		kps = append(kps, parse.KernelPoint{Kernel: k.Name, Label: k.Label, MedianMS: max(k.MedianUS/1e3, 1e-6),
			Grid: k.Grid, Block: k.Block, FLOPs: k.FLOPs, Bytes: k.Bytes, Regs: k.Attrs["regs"], Fusion: strings.Join(k.Fusion, "; ")})
	}
	stepMS := max(median(r.StepUS)/1e3, 1e-6)
	row := parse.BenchRow{Op: "profile/" + r.Graph, DType: "mixed", Shape: []int{len(r.Kernels)}, Device: r.DeviceClass,
		EngineMS: stepMS, TFLOPS: float64(flops) / (stepMS * 1e9), GBps: float64(bytes) / (stepMS * 1e6), Kernels: kps}
	refMS := max(median(r.RefUS)/1e3, 1e-6)
	if len(r.RefUS) == len(r.StepUS) && len(r.RefUS) > 0 {
		row.RefMS, row.Ref = refMS, "calibration"
	}
	for i, s := range r.StepUS {
		v := s / 1e3
		if row.RefMS > 0 && r.RefUS[i] > 0 {
			v *= refMS * 1e3 / r.RefUS[i] // this step at the median calibration speed
		}
		row.SamplesMS = append(row.SamplesMS, max(v, 1e-6))
	}
	return parse.BenchReport{Schema: parse.BenchSchema, Kind: parse.BenchKind, DeviceClass: r.DeviceClass, Started: r.Started.UTC(),
		Env: map[string]string{"device": r.Device, "backend": r.Backend}, Rows: []parse.BenchRow{row}}
}
