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
