package parse_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/harness"
	"github.com/tessera-qa/tessera-qa/report/parse"
	"github.com/tessera-qa/tessera-qa/report/store"
	"github.com/tessera-qa/tessera-qa/stress"
)

const h100 = "NVIDIA H100 80GB HBM3 sm_90 (132 SMs)"

func stressFile(t *testing.T, name string) *parse.Report {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "stress", name))
	if err != nil {
		t.Fatal(err)
	}
	p, err := parse.Parse(name, data)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// metricsOf indexes a batch's metrics by "section: metric".
func metricsOf(t *testing.T, b *store.Batch, kind string) map[string]store.MetricRow {
	t.Helper()
	out := map[string]store.MetricRow{}
	for _, m := range b.Metrics {
		if m.Kind != kind {
			t.Errorf("metric %s: kind %q, want %q", m.Metric, m.Kind, kind)
		}
		out[m.Name+": "+m.Metric] = m
	}
	return out
}

// The 8 x 10 minute soak on the H100 (written before stress.Report had its marker).
func TestStressSoakReport(t *testing.T) {
	p := stressFile(t, "soak-h100.json")
	if p.Kind != "stress" || len(p.Batch.Results) != 1 {
		t.Fatalf("kind %q, %d results", p.Kind, len(p.Batch.Results))
	}
	w := "processes x8 on " + h100
	r := p.Batch.Results[0]
	if r.Suite != parse.StressSuite || r.Case != w || r.Verdict != harness.VerdictPass || r.DeviceClass != "cuda" || r.Reason != "" {
		t.Errorf("result %+v", r)
	}
	ms := metricsOf(t, &p.Batch, parse.StressMetric)
	for metric, want := range map[string]float64{
		"graphs_per_s": 6580.679554462264, "mismatches": 0, "leaks": 0,
		// Worst over the 8 job processes: job 1's device memory rose during warm-up.
		"device_used_bytes slope": 608609.385412715, "device_used_bytes growth": 2420113408,
		"rss_bytes slope": 54746.369145078956, "rss_bytes growth": 1110016,
		// Job 3 has the highest loaded p99; its four numbers go together.
		"latency p99 loaded": 2.366054, "latency p99 alone": 346.54497, "latency p50 loaded": 1.178285, "latency p50 alone": 0.290622,
	} {
		got, ok := ms[w+": "+metric]
		if !ok || got.Value != want || got.Verdict != harness.VerdictPass {
			t.Errorf("%s = %+v (present %v), want %g pass", metric, got, ok, want)
		}
	}
	if n := ms[w+": device_used_bytes slope"].Note; !strings.Contains(n, "worst: job 1") || !strings.Contains(n, "8 sources, 0 leaking") {
		t.Errorf("slope note %q", n)
	}
	if n := ms[w+": latency p99 loaded"].Note; !strings.Contains(n, "job 3 of 8") {
		t.Errorf("latency note %q", n)
	}
	if u := ms[w+": rss_bytes slope"].Unit; u != "bytes/min" {
		t.Errorf("rss slope unit %q", u)
	}
	for k := range ms {
		if strings.HasPrefix(strings.TrimPrefix(k, w+": "), "oom") || strings.Contains(k, "cache") {
			t.Errorf("a run without pressure has %s", k)
		}
	}
}

func TestStressPressureReports(t *testing.T) {
	oom := metricsOf(t, &stressFile(t, "oom-h100.json").Batch, parse.StressMetric)
	if m := oom["processes x2 +oom on "+h100+": oom recoveries"]; m.Value != 49 || m.Note != "of 49 rounds" || m.Verdict != harness.VerdictPass {
		t.Errorf("oom recoveries %+v", m)
	}
	cache := metricsOf(t, &stressFile(t, "cache-h100.json").Batch, parse.StressMetric)
	for _, metric := range []string{"cache lost", "cache wrong"} {
		if m, ok := cache["processes x3 +cache on "+h100+": "+metric]; !ok || m.Value != 0 || !strings.Contains(m.Note, "200 entries") {
			t.Errorf("%s %+v", metric, m)
		}
	}
}

// failedRun is what stress.Run writes for a run with a mismatch and a leak.
func failedRun() stress.Report {
	return stress.Report{Schema: stress.ReportSchema, Kind: stress.ReportKind, Mode: stress.ModeGoroutines, Device: "cpu linux/amd64 x2 (GOMAXPROCS 2)",
		Jobs: 2, Seed: 7, DurationS: 60, Graphs: 100, GraphsPerSec: 1.5, Mismatches: 1, LeakCount: 1,
		Monitors: []stress.Leak{{Monitor: "goroutines", Source: "process", Samples: 40, Growth: 30, Slope: 0.5, Allowance: 16, Leak: true},
			{Monitor: "rss_bytes", Source: "process", Samples: 40, Growth: -4096, Slope: -100, Allowance: 1 << 26}},
		Latency:  []stress.JobLatency{{Job: 0, AloneP50: 1, AloneP99: 2, LoadedP50: 3, LoadedP99: 4}, {Job: 1, AloneP50: 1, AloneP99: 2, LoadedP50: 2, LoadedP99: 9}},
		Failures: []string{"E_NONDETERMINISTIC: job 1 graph 3 differs from its alone digest"},
		Replays:  []string{"out/replays/job1-3.json"}, Cache: &stress.CacheReport{Hammers: 2, Entries: 5, Lost: 1}}
}

func TestStressFailuresReachTheStore(t *testing.T) {
	data, _ := json.Marshal(failedRun())
	p, err := parse.Parse("stress.json", data)
	if err != nil {
		t.Fatal(err)
	}
	r := p.Batch.Results[0]
	w := "goroutines x2 on cpu linux/amd64 x2 (GOMAXPROCS 2)"
	if r.Case != w || r.Verdict != harness.VerdictFail || r.DeviceClass != "cpu" || !strings.Contains(r.Reason, "job 1 graph 3") ||
		r.ErrorCode != string(errs.Nondeterministic) || r.Replay != "out/replays/job1-3.json" || r.Seed != "7" {
		t.Errorf("result %+v", r)
	}
	ms := metricsOf(t, &p.Batch, parse.StressMetric)
	for metric, want := range map[string]struct {
		v       float64
		verdict string
	}{
		"mismatches": {1, "fail"}, "leaks": {1, "fail"}, "goroutines slope": {0.5, "fail"}, "goroutines growth": {30, "fail"},
		// A shrinking monitor is kept negative; it did not leak, so it carries the run's verdict.
		"rss_bytes slope": {-100, "fail"}, "rss_bytes growth": {-4096, "fail"},
		"latency p99 loaded": {9, "fail"}, "latency p50 loaded": {2, "fail"}, "cache lost": {1, "fail"}, "cache wrong": {0, "fail"},
	} {
		if m := ms[w+": "+metric]; m.Value != want.v || m.Verdict != want.verdict {
			t.Errorf("%s = %+v, want %g %s", metric, m, want.v, want.verdict)
		}
	}
}

func TestStressReportsAreChecked(t *testing.T) {
	for name, bad := range map[string]func(*stress.Report){
		"newer schema":       func(r *stress.Report) { r.Schema = 2 },
		"no jobs":            func(r *stress.Report) { r.Jobs = 0 },
		"no device":          func(r *stress.Report) { r.Device = "" },
		"control characters": func(r *stress.Report) { r.Mode = "go\x01routines" },
		"negative latency":   func(r *stress.Report) { r.Latency[1].LoadedP99 = -1 },
		"negative count":     func(r *stress.Report) { r.Mismatches = -1 },
		"huge slope":         func(r *stress.Report) { r.Monitors[0].Slope = -1e300 },
		"nameless monitor":   func(r *stress.Report) { r.Monitors[0].Monitor = "" },
		"negative cache":     func(r *stress.Report) { r.Cache.Wrong = -1 },
	} {
		r := failedRun()
		bad(&r)
		data, _ := json.Marshal(r)
		_, err := parse.Parse("stress.json", data)
		if c := errs.CodeOf(err); c != errs.Input && c != errs.Parse {
			t.Errorf("%s: accepted or wrong code: %v", name, err)
		}
	}
}

// The train workload (stress --workload train) is another series than the graphs of the same
// mode and jobs, once the report names it.
func TestStressWorkloadNamesTheSection(t *testing.T) {
	for workload, want := range map[string]string{"": "processes x2 on cpu", "graphs": "processes x2 on cpu", "train": "processes x2 train on cpu"} {
		doc := `{"schema":1,"kind":"tessera-stress","mode":"processes","workload":"` + workload + `","device":"cpu","jobs":2,` +
			`"graphs_per_s":1,"mismatches":0,"monitors":[],"latency":[],"pass":true}`
		p, err := parse.Parse("stress.json", []byte(doc))
		if err != nil {
			t.Fatal(err)
		}
		if got := p.Batch.Results[0].Case; got != want {
			t.Errorf("workload %q: case %q, want %q", workload, got, want)
		}
	}
}
