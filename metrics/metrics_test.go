package metrics

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tessera-qa/tessera-qa/mig"
)

func get(t *testing.T, s *Server) string {
	t.Helper()
	resp, err := http.Get(s.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// Counters follow the totals they are fed (never backwards), faults and steps land in their
// histograms, a replayed NVML session gives the GPU series.
func TestSeries(t *testing.T) {
	s, err := Serve("127.0.0.1:0", "test")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.Graphs("stress", 10, 1, 0)
	s.Graphs("stress", 25, 1, 2)
	s.Graphs("stress", 20, 1, 2) // a lower total never lowers a counter
	s.Monitor("process", "rss_bytes", 4e7, 1.5e6)
	s.Step(1, 250*time.Millisecond)
	s.Fault("rank/kill", 0.8, 3.5)
	s.Fault("net/drop", 1.2, -1)
	r, err := mig.ReplayHealth("../mig/testdata/nvml-health/h200-thermal-throttle.json")
	if err != nil {
		t.Fatal(err)
	}
	s.GPUs(r)
	body := get(t, s)
	for _, want := range []string{
		`tessera_graphs_checked_total{source="stress"} 25`, `tessera_mismatches_total{source="stress"} 1`, `tessera_errors_total{source="stress"} 2`,
		`tessera_leak_slope_per_minute{monitor="rss_bytes",source="process"} 1.5e+06`, `tessera_step_seconds_count{rank="1"} 1`,
		`tessera_fault_ttd_seconds_count{fault="net/drop"} 1`, `tessera_fault_ttr_seconds_count{fault="rank/kill"} 1`,
		`tessera_gpu_temperature_celsius{gpu="gpu:0"} 93`, `tessera_gpu_clock_event_reasons{gpu="gpu:0"} 96`, `tessera_gpu_sm_clock_mhz{gpu="gpu:0"} 1110`,
		`tessera_device_memory_bytes{device="gpu:0",kind="total"} 1.50754820096e+11`, `tessera_run_info{verb="test"} 1`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("missing %s", want)
		}
	}
	if strings.Contains(body, `tessera_fault_ttr_seconds_count{fault="net/drop"}`) {
		t.Error("a fault never recovered has a TTR")
	}
	if _, err := Serve(s.Addr, "again"); err == nil {
		t.Error("a busy address was accepted")
	}
}
