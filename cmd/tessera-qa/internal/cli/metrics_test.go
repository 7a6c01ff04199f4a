package cli

import (
	"bytes"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/tessera-qa/tessera-qa/chaos"
	"github.com/tessera-qa/tessera-qa/metrics"
)

// lockedBuffer is a bytes.Buffer that a running verb writes while the test reads.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}
func (l *lockedBuffer) String() string { l.mu.Lock(); defer l.mu.Unlock(); return l.b.String() }

func scrape(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		t.Fatalf("scrape %s: %v", url, err)
	}
	defer resp.Body.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("scrape %s is not Prometheus text: %v", url, err)
	}
	return fams
}

// A scrape while `stress --duration 3s --metrics-addr 127.0.0.1:0` runs returns the documented
// series: graphs checked (rising), mismatches 0, the leak monitors' readings and slopes, the
// run's info; the address is printed on stderr.
func TestStressServesMetricsWhileItRuns(t *testing.T) {
	stderr := &lockedBuffer{}
	done := make(chan int, 1)
	go func() {
		var out bytes.Buffer
		done <- Main([]string{"stress", "--jobs", "2", "--duration", "3s", "--interval", "100ms", "--metrics-addr", "127.0.0.1:0", "--out", t.TempDir()}, strings.NewReader(""), &out, stderr)
	}()
	addrRE := regexp.MustCompile(`metrics: serving (http://127\.0\.0\.1:\d+/metrics)`)
	deadline := time.Now().Add(60 * time.Second)
	var url string
	var fams map[string]*dto.MetricFamily
	for time.Now().Before(deadline) {
		if m := addrRE.FindStringSubmatch(stderr.String()); m != nil {
			url = m[1]
			fams = scrape(t, url)
			if f := fams[metrics.GraphsChecked]; f != nil && f.Metric[0].GetCounter().GetValue() > 0 && fams[metrics.LeakSlope] != nil {
				break
			}
		}
		select {
		case code := <-done:
			t.Fatalf("stress ended (exit %d) before a scrape saw graphs:\n%s", code, stderr.String())
		case <-time.After(100 * time.Millisecond):
		}
	}
	if url == "" || fams[metrics.GraphsChecked] == nil {
		t.Fatalf("no scrape with graphs before the deadline:\n%s", stderr.String())
	}
	for _, name := range []string{metrics.GraphsChecked, metrics.Mismatches, metrics.Errors, metrics.LeakSlope, metrics.MonitorValue, metrics.RunInfo} {
		if fams[name] == nil {
			t.Errorf("series %s missing; have %v", name, keys(fams))
		}
	}
	if v := fams[metrics.Mismatches].Metric[0].GetCounter().GetValue(); v != 0 {
		t.Errorf("mismatches %v in a clean run", v)
	}
	monitors := map[string]bool{}
	for _, m := range fams[metrics.LeakSlope].Metric {
		for _, l := range m.Label {
			if l.GetName() == "monitor" {
				monitors[l.GetValue()] = true
			}
		}
	}
	if !monitors["rss_bytes"] || !monitors["goroutines"] {
		t.Errorf("leak monitors %v", monitors)
	}
	if code := <-done; code != 0 {
		t.Fatalf("stress exit %d:\n%s", code, stderr.String())
	}
	if _, err := http.Get(url); err == nil {
		t.Errorf("still serving after the run ended")
	}
}

func keys(m map[string]*dto.MetricFamily) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func TestMetricsAddrRefusedIsInput(t *testing.T) {
	cli(t, "stress", "--duration", "1s", "--metrics-addr", "256.0.0.1:x").want(t, 2, "E_INPUT")
}

// chaos runs feed TTD/TTR and checked runs; training steps feed step time per rank.
func TestChaosAndTrainSeries(t *testing.T) {
	m, err := metrics.Serve("127.0.0.1:0", "test")
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	observeChaos(m, &chaos.Report{BitsIdentical: true, Faults: []chaos.FaultResult{{Fault: "rank/kill", TTD: 0.4, TTR: 2.5}, {Fault: "net/drop", TTD: 0.2}}})
	observeChaos(m, &chaos.Report{BitsIdentical: false})
	steps := 0
	p := timedSteps(m, 3, func(int, float64) { steps++ })
	for i := range 4 {
		p(i, 0.5)
	}
	fams := scrape(t, m.URL())
	if steps != 4 {
		t.Errorf("the wrapped progress ran %d times", steps)
	}
	count := func(name string, label string) uint64 {
		for _, mt := range fams[name].GetMetric() {
			for _, l := range mt.Label {
				if l.GetValue() == label {
					return mt.GetHistogram().GetSampleCount()
				}
			}
		}
		return 0
	}
	if count(metrics.TTD, "rank/kill") != 1 || count(metrics.TTR, "rank/kill") != 1 || count(metrics.TTD, "net/drop") != 1 || count(metrics.TTR, "net/drop") != 0 {
		t.Errorf("ttd/ttr: %v %v", fams[metrics.TTD], fams[metrics.TTR])
	}
	if count(metrics.StepSeconds, "3") != 4 {
		t.Errorf("steps: %v", fams[metrics.StepSeconds])
	}
	if g := fams[metrics.GraphsChecked].Metric[0].GetCounter().GetValue(); g != 2 {
		t.Errorf("chaos runs checked %v, want 2", g)
	}
	if mm := fams[metrics.Mismatches].Metric[0].GetCounter().GetValue(); mm != 1 {
		t.Errorf("chaos mismatches %v, want 1", mm)
	}
}

// chaos --preflight refuses a bad node before any scenario starts.
func TestChaosPreflightRefuses(t *testing.T) {
	t.Setenv("TESSERA_NVML_REPLAY", nvmlFixture("h100-pcie-x8.json"))
	o := cli(t, "chaos", "--preflight", "1", "--kill-rank", "1", "--world", "2", "--artifacts", t.TempDir())
	if o.code != 1 || !strings.Contains(o.stderr, "preflight: FAIL gpu:0 nvml/pcie-link") {
		t.Fatalf("exit %d\n%s", o.code, o.stderr)
	}
}
