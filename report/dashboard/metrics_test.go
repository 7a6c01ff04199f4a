package dashboard

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/tessera-qa/tessera-qa/report"
)

// hostileWorkload is the device of a failing stress run whose failure text is markup.
const hostileWorkload = `goroutines x2 on cpu <svg onload=alert(4)>`

// writeStressAndPartitions ingests, through the reporter's own parser, the H100 stress
// reports (the 8 x 10 minute soak twice, from two commits, so it is a series; the OOM and
// cache pressure runs once), a failing stress run with hostile names, and the Ginkgo reports
// of the partitions suite's entries and of a ptxas suite run (report/parse/testdata).
func writeStressAndPartitions(ctx context.Context, db *report.DB) error {
	at := time.Date(2026, 1, 10, 2, 0, 0, 0, time.UTC)
	in := func(path, commit string, day int) error {
		_, err := db.IngestFile(ctx, filepath.Join("..", "parse", "testdata", path), report.IngestOptions{Override: report.Meta{
			Commit: commit, Branch: "main", Event: "nightly", Machine: "h100-1", DeviceClass: "cuda/sm_90", Time: at.AddDate(0, 0, day)}})
		return err
	}
	for i, f := range []struct {
		path, commit string
	}{{"stress/soak-h100.json", "50a6001"}, {"stress/soak-h100.json", "50a6002"}, {"stress/oom-h100.json", "50a6002"},
		{"stress/cache-h100.json", "50a6002"}, {"ginkgo/partitions-standin.json", "50a6002"}, {"ginkgo/ptxas.json", "50a6002"}} {
		if err := in(f.path, f.commit, i); err != nil {
			return err
		}
	}
	bad, _ := json.Marshal(map[string]any{"schema": 1, "kind": "tessera-stress", "mode": "goroutines", "device": "cpu <svg onload=alert(4)>",
		"jobs": 2, "seed": "3", "duration_s": 60, "graphs": 10, "graphs_per_s": 0.2, "mismatches": 1, "errors": 0, "leaks": 0,
		"monitors": []any{}, "latency": []any{}, "failures": []string{hostileLog}, "artifacts": "out", "pass": false})
	_, err := db.IngestBytes(ctx, "evil-stress.json", bad, report.IngestOptions{Override: report.Meta{Commit: "badc0de", Branch: "main",
		Event: "nightly", Machine: "m1", DeviceClass: "cpu/amd64", Time: at}})
	return err
}

// kindSection is the metrics page's <section> of one kind.
func kindSection(page, kind string) string {
	return regexp.MustCompile(`(?s)<section class="metric-kind" id="` + kind + `".*?</section>`).FindString(page)
}

// groupOf is the chart group with data-group id of the workload section headed name.
func groupOf(section, name, id string) string {
	i := strings.Index(section, "<h3>"+name+"</h3>")
	if i < 0 {
		return ""
	}
	rest := section[i+len(name)+9:]
	if j := strings.Index(rest, "<h3>"); j >= 0 {
		rest = rest[:j]
	}
	return regexp.MustCompile(`(?s)<div class="chart-group" data-group="` + id + `">.*?</div>`).FindString(rest)
}

func TestStressSectionCharts(t *testing.T) {
	s, _ := openSite(t)
	stress := kindSection(render(t, s, PageMetrics), "stress")
	if !strings.Contains(stress, `data-sections="4"`) { // soak, oom, cache, the hostile run
		t.Fatalf("want 4 stress workloads:\n%.2000s", stress)
	}
	soak := "processes x8 on NVIDIA H100 80GB HBM3 sm_90 (132 SMs)"
	for id, charts := range map[string][]string{
		"health":      {"mismatches", "errors", "leaks", "graphs_per_s"},
		"leak-slopes": {"alloc_live_bytes slope", "device_used_bytes slope", "goroutines slope", "open_fds slope", "rss_bytes slope", "temp_files slope"},
		"latency":     {"latency p50 alone", "latency p50 loaded", "latency p99 alone", "latency p99 loaded"},
	} {
		g := groupOf(stress, soak, id)
		if n := strings.Count(g, `<svg class="chart"`); n != len(charts) {
			t.Errorf("soak group %s: %d charts, want %d", id, n, len(charts))
		}
		for _, c := range charts {
			if !strings.Contains(g, `aria-label="`+c+`"`) {
				t.Errorf("soak group %s lacks the chart %q", id, c)
			}
		}
		// Two runs of the soak: two points in each chart.
		if n := strings.Count(g, `<circle class="pt"`); n != 2*len(charts) {
			t.Errorf("soak group %s: %d points, want %d", id, n, 2*len(charts))
		}
	}
	if g := groupOf(stress, soak, "pressure"); g != "" {
		t.Errorf("the soak had no pressure mode but shows %q", g)
	}
	if strings.Contains(groupOf(stress, soak, "leak-slopes"), "growth") {
		t.Errorf("growth is charted among the slopes")
	}
	if g := groupOf(stress, "processes x2 &#43;oom on NVIDIA H100 80GB HBM3 sm_90 (132 SMs)", "pressure"); !strings.Contains(g, `aria-label="oom recoveries"`) {
		t.Errorf("oom workload lacks the recoveries chart: %q", g)
	}
	if g := groupOf(stress, "processes x3 &#43;cache on NVIDIA H100 80GB HBM3 sm_90 (132 SMs)", "pressure"); !strings.Contains(g, `aria-label="cache lost"`) || !strings.Contains(g, `aria-label="cache wrong"`) {
		t.Errorf("cache workload lacks lost/wrong charts: %q", g)
	}
	// The failing run's mismatch is red.
	if g := groupOf(stress, "goroutines x2 on cpu &lt;svg onload=alert(4)&gt;", "health"); !strings.Contains(g, `class="pt bad block"`) {
		t.Errorf("the failing stress run is not marked: %q", g)
	}
}

func TestPartitionsSection(t *testing.T) {
	s, _ := openSite(t)
	part := kindSection(render(t, s, PageMetrics), "partitions")
	if !strings.Contains(part, `data-sections="2"`) || strings.Contains(part, "no data yet") {
		t.Fatalf("want the interference and golden sections:\n%.2000s", part)
	}
	if !strings.Contains(part, `data-note="partitions"`) || !strings.Contains(part, "memory bandwidth and L2 are shared") {
		t.Errorf("the partitions section does not say what green contexts share")
	}
	for _, pair := range []string{"FMA-bound (64 SMs) next to B FMA-bound", "FMA-bound (64 SMs) next to B bandwidth-bound",
		"bandwidth-bound (64 SMs) next to B FMA-bound", "bandwidth-bound (64 SMs) next to B bandwidth-bound"} {
		if !strings.Contains(part, `role="img" aria-label="A `+pair) {
			t.Errorf("no interference chart for %s", pair)
		}
	}
	if !strings.Contains(part, `data-group="interference"`) || !strings.Contains(part, `data-group="golden"`) {
		t.Errorf("the partitions charts are not grouped")
	}
	for _, sms := range []int{32, 64} {
		if !strings.Contains(part, fmt.Sprintf(`aria-label="%d SMs: specs differing from the whole GPU"`, sms)) {
			t.Errorf("no golden chart for %d SMs", sms)
		}
	}
}

func TestOverviewCountsMetricSections(t *testing.T) {
	s, _ := openSite(t)
	out := render(t, s, PageOverview)
	if !strings.Contains(out, `data-chaos="1" data-stress="4" data-partitions="2"`) {
		i := strings.Index(out, `id="chaos-stress"`)
		t.Errorf("overview counts: %.400s", out[max(i, 0):])
	}
}

func TestByteMetricsAreDrawnInMiB(t *testing.T) {
	c := metricChart("rss_bytes slope", []report.MetricRow{{Value: 3 << 20, Unit: "bytes/min"}, {Value: 5 << 20, Unit: "bytes/min"}}, 480, 220)
	if c.YLabel != "MiB/min" || !strings.Contains(c.Points[1].Title, ": 5.000 MiB/min") {
		t.Errorf("y label %q, point %q", c.YLabel, c.Points[1].Title)
	}
	for _, tk := range c.YTicks {
		if strings.Contains(tk.Label, "e+") {
			t.Errorf("tick %q", tk.Label)
		}
	}
}

func TestCompileSection(t *testing.T) {
	s, _ := openSite(t)
	c := kindSection(render(t, s, PageMetrics), "compile")
	if !strings.Contains(c, `data-sections="2"`) || strings.Contains(c, "no data yet") {
		t.Fatalf("want the catalogue and random-graph sections:\n%.2000s", c)
	}
	for _, g := range []string{"ptx-size", "registers", "spills", "ptxas-time"} {
		if !strings.Contains(c, `data-group="`+g+`"`) {
			t.Errorf("no %s chart group", g)
		}
	}
	for _, chart := range []string{"simt-stream: PTX a module", "simt-stream: registers (most)", "mma.sync: bytes spilled", "simt-transpose: ptxas a module"} {
		if !strings.Contains(c, `aria-label="`+chart) {
			t.Errorf("no chart %s", chart)
		}
	}
}
