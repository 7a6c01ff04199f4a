// Package metrics exposes a long run's live state in Prometheus's text format, through the
// official Go client (github.com/prometheus/client_golang), on --metrics-addr: stress
// --duration, chaos --schedule and train serve it while they run. The series are
// docs/health.md's; every name starts with tessera_.
//
// A run makes a Server (Serve), feeds it as it goes (Graphs, LeakSlope, Monitor, Step, Fault)
// and closes it at the end; WatchGPUs samples NVML's temperature and clocks where there is NVML.
package metrics

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/mig"
)

// Series names (docs/health.md).
const (
	GraphsChecked = "tessera_graphs_checked_total"
	Mismatches    = "tessera_mismatches_total"
	Errors        = "tessera_errors_total"
	LeakSlope     = "tessera_leak_slope_per_minute"
	MonitorValue  = "tessera_monitor_value"
	DeviceMemory  = "tessera_device_memory_bytes"
	GPUTemp       = "tessera_gpu_temperature_celsius"
	GPUSMClock    = "tessera_gpu_sm_clock_mhz"
	GPUMemClock   = "tessera_gpu_memory_clock_mhz"
	GPUClockEvent = "tessera_gpu_clock_event_reasons"
	TTD           = "tessera_fault_ttd_seconds"
	TTR           = "tessera_fault_ttr_seconds"
	StepSeconds   = "tessera_step_seconds"
	RunInfo       = "tessera_run_info"
)

// Server serves one run's series.
type Server struct {
	// Addr is the address bound (the port chosen when the flag said :0).
	Addr string
	reg  *prometheus.Registry
	srv  *http.Server
	done chan struct{}

	mu      sync.Mutex
	totals  map[string]float64 // last total seen per counter and label, to add the difference
	graphs  *prometheus.CounterVec
	mism    *prometheus.CounterVec
	errs    *prometheus.CounterVec
	slope   *prometheus.GaugeVec
	monitor *prometheus.GaugeVec
	devMem  *prometheus.GaugeVec
	temp    *prometheus.GaugeVec
	smClock *prometheus.GaugeVec
	mmClock *prometheus.GaugeVec
	events  *prometheus.GaugeVec
	ttd     *prometheus.HistogramVec
	ttr     *prometheus.HistogramVec
	step    *prometheus.HistogramVec
}

// Serve listens on addr ("127.0.0.1:0" picks a port) and serves /metrics. verb labels
// tessera_run_info. A bad or busy address is E_INPUT.
func Serve(addr, verb string) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, errs.New(errs.Input, "--metrics-addr %q: %v", addr, err)
	}
	s := &Server{Addr: ln.Addr().String(), reg: prometheus.NewRegistry(), done: make(chan struct{}), totals: map[string]float64{}}
	secs := []float64{0.001, 0.01, 0.1, 0.5, 1, 2, 5, 10, 30, 60, 120, 300}
	s.graphs = prometheus.NewCounterVec(prometheus.CounterOpts{Name: GraphsChecked, Help: "Graphs run and checked against their expected bits."}, []string{"source"})
	s.mism = prometheus.NewCounterVec(prometheus.CounterOpts{Name: Mismatches, Help: "Checked graphs whose bits differed from the expected ones."}, []string{"source"})
	s.errs = prometheus.NewCounterVec(prometheus.CounterOpts{Name: Errors, Help: "Graphs that ended in an error."}, []string{"source"})
	s.slope = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: LeakSlope, Help: "Least-squares slope of a leak monitor so far, units per minute."}, []string{"source", "monitor"})
	s.monitor = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: MonitorValue, Help: "Latest reading of a leak monitor (rss_bytes, goroutines, open_fds ...)."}, []string{"source", "monitor"})
	s.devMem = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: DeviceMemory, Help: "Device memory in bytes, by kind (used, total)."}, []string{"device", "kind"})
	s.temp = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: GPUTemp, Help: "GPU temperature (NVML)."}, []string{"gpu"})
	s.smClock = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: GPUSMClock, Help: "GPU SM clock (NVML)."}, []string{"gpu"})
	s.mmClock = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: GPUMemClock, Help: "GPU memory clock (NVML)."}, []string{"gpu"})
	s.events = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: GPUClockEvent, Help: "NVML clock-event reason mask (thermal, power brake ...)."}, []string{"gpu"})
	s.ttd = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: TTD, Help: "Time from a fault's injection to its detection.", Buckets: secs}, []string{"fault"})
	s.ttr = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: TTR, Help: "Time from a fault's injection to the job's recovery.", Buckets: secs}, []string{"fault"})
	s.step = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: StepSeconds, Help: "Wall time of one training step, per rank.", Buckets: secs}, []string{"rank"})
	info := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: RunInfo, Help: "1 while the run serves its metrics."}, []string{"verb"})
	info.WithLabelValues(verb).Set(1)
	s.reg.MustRegister(s.graphs, s.mism, s.errs, s.slope, s.monitor, s.devMem, s.temp, s.smClock, s.mmClock, s.events, s.ttd, s.ttr, s.step, info)
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{}))
	s.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		defer close(s.done)
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			_ = err // the listener failed: scrapes fail, the run goes on
		}
	}()
	return s, nil
}

// URL is where the series are scraped.
func (s *Server) URL() string { return "http://" + s.Addr + "/metrics" }

// Close stops serving (within 5 seconds).
func (s *Server) Close() error {
	if s == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := s.srv.Shutdown(ctx)
	<-s.done
	return err
}

// add raises counter c by the rise of total since the last call for key.
func (s *Server) add(c prometheus.Counter, key string, total float64) {
	if d := total - s.totals[key]; d > 0 {
		c.Add(d)
		s.totals[key] = total
	}
}

// Graphs records a source's running totals of checked graphs, mismatches and errors.
func (s *Server) Graphs(source string, checked, mismatches, errors int) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.add(s.graphs.WithLabelValues(source), "g/"+source, float64(checked))
	s.add(s.mism.WithLabelValues(source), "m/"+source, float64(mismatches))
	s.add(s.errs.WithLabelValues(source), "e/"+source, float64(errors))
}

// Runs counts one more checked run of source (a chaos run, whose final bits are checked
// against the fault-free run): a mismatch when they differ.
func (s *Server) Runs(source string, identical bool) {
	if s == nil {
		return
	}
	s.graphs.WithLabelValues(source).Inc()
	if !identical {
		s.mism.WithLabelValues(source).Inc()
	} else {
		s.mism.WithLabelValues(source).Add(0)
	}
}

// Monitor records a leak monitor's latest reading and its slope so far (per minute).
func (s *Server) Monitor(source, monitor string, value, slopePerMin float64) {
	if s == nil {
		return
	}
	s.monitor.WithLabelValues(source, monitor).Set(value)
	s.slope.WithLabelValues(source, monitor).Set(slopePerMin)
}

// DeviceMem records a device's memory of a kind ("used", "total").
func (s *Server) DeviceMem(device, kind string, bytes float64) {
	if s == nil {
		return
	}
	s.devMem.WithLabelValues(device, kind).Set(bytes)
}

// Step records one training step of rank.
func (s *Server) Step(rank int, d time.Duration) {
	if s == nil {
		return
	}
	s.step.WithLabelValues(strconv.Itoa(rank)).Observe(d.Seconds())
}

// Fault records a fault's time to detect and to recover (a negative time: not reached).
func (s *Server) Fault(name string, ttd, ttr float64) {
	if s == nil {
		return
	}
	if ttd >= 0 {
		s.ttd.WithLabelValues(name).Observe(ttd)
	}
	if ttr >= 0 {
		s.ttr.WithLabelValues(name).Observe(ttr)
	}
}

// GPUs records one NVML reading: temperature, clocks, clock-event reasons, memory total.
func (s *Server) GPUs(r mig.HealthReport) {
	if s == nil {
		return
	}
	for _, g := range r.GPUs {
		id := fmt.Sprintf("gpu:%d", g.Index)
		if g.TemperatureC != nil {
			s.temp.WithLabelValues(id).Set(float64(*g.TemperatureC))
		}
		if g.SMClockMHz != nil {
			s.smClock.WithLabelValues(id).Set(float64(*g.SMClockMHz))
		}
		if g.MemClockMHz != nil {
			s.mmClock.WithLabelValues(id).Set(float64(*g.MemClockMHz))
		}
		if g.ClockEvents != nil {
			s.events.WithLabelValues(id).Set(float64(*g.ClockEvents))
		}
		if g.MemoryTotal > 0 {
			s.devMem.WithLabelValues(id, "total").Set(float64(g.MemoryTotal))
		}
	}
}

// WatchGPUs reads NVML (mig.ReadHealth: the driver, or a replayed session) every period until
// ctx ends; without NVML it reads nothing and the GPU series stay absent.
func (s *Server) WatchGPUs(ctx context.Context, period time.Duration) {
	if s == nil {
		return
	}
	go func() {
		t := time.NewTicker(period)
		defer t.Stop()
		for {
			r, err := mig.ReadHealth()
			if err != nil {
				return
			}
			s.GPUs(r)
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
}
