package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/tessera-qa/tessera-qa/chaos"
	"github.com/tessera-qa/tessera-qa/metrics"
	"github.com/tessera-qa/tessera-qa/stress"
)

// addMetricsFlag registers --metrics-addr on a long run (stress, chaos, train).
func addMetricsFlag(cmd *cobra.Command, p *string) {
	cmd.Flags().StringVar(p, "metrics-addr", "", "serve live Prometheus metrics on `HOST:PORT` while the run goes (127.0.0.1:0 picks a port; the address is printed; docs/health.md lists the series)")
}

// startMetrics serves the run's metrics when addr is set (nil Server otherwise: its methods do
// nothing), prints where, and samples the GPUs through NVML every second until stop.
func (e *env) startMetrics(addr, verb string) (m *metrics.Server, stop func(), err error) {
	if addr == "" {
		return nil, func() {}, nil
	}
	m, err = metrics.Serve(addr, verb)
	if err != nil {
		return nil, nil, err
	}
	fmt.Fprintf(e.stderr, "metrics: serving %s\n", m.URL())
	ctx, cancel := context.WithCancel(context.Background())
	m.WatchGPUs(ctx, time.Second)
	return m, func() { cancel(); m.Close() }, nil
}

// observeStress feeds a stress snapshot into m.
func observeStress(m *metrics.Server) func(stress.Snapshot) {
	if m == nil {
		return nil
	}
	return func(sn stress.Snapshot) {
		m.Graphs("stress", sn.Graphs, sn.Mismatches, sn.Errors)
		for _, l := range sn.Monitors {
			m.Monitor(l.Source, l.Monitor, l.After, l.Slope)
			switch l.Monitor {
			case stress.MonDeviceUsed, stress.MonAllocLive:
				m.DeviceMem(l.Source, l.Monitor, l.After)
			}
		}
	}
}

// observeChaos feeds one chaos run's faults (time to detect and to recover) and its
// detections into m: every run is a graph checked, a run whose bits differ a mismatch.
func observeChaos(m *metrics.Server, rep *chaos.Report) {
	if m == nil || rep == nil {
		return
	}
	m.Runs("chaos", rep.BitsIdentical)
	for _, f := range rep.Faults {
		ttd, ttr := -1.0, -1.0
		if f.TTD > 0 {
			ttd = f.TTD
		}
		if f.TTR > 0 {
			ttr = f.TTR
		}
		m.Fault(f.Fault, ttd, ttr)
	}
}

// timedSteps wraps a training progress callback: the time between two calls is one step of
// rank, recorded in m (the first step is timed from the wrap).
func timedSteps(m *metrics.Server, rank int, next func(step int, loss float64)) func(int, float64) {
	if m == nil {
		return next
	}
	last := time.Now()
	return func(step int, loss float64) {
		now := time.Now()
		m.Step(rank, now.Sub(last))
		last = now
		if next != nil {
			next(step, loss)
		}
	}
}
