package profiling

import (
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/errs"
)

// Event is one Chrome Trace Event (the format Kineto writes and Perfetto opens): ts and dur
// in microseconds from the trace's origin.
type Event struct {
	Name string         `json:"name"`
	Cat  string         `json:"cat,omitempty"`
	Ph   string         `json:"ph"`
	TS   float64        `json:"ts"`
	Dur  *float64       `json:"dur,omitempty"`
	PID  int            `json:"pid"`
	TID  int            `json:"tid"`
	ID   string         `json:"id,omitempty"`
	BP   string         `json:"bp,omitempty"`
	Args map[string]any `json:"args,omitempty"`
}

// Trace collects events on one clock: every time is taken relative to Origin.
type Trace struct {
	Origin time.Time
	Events []Event
	flows  int
}

// NewTrace starts a trace whose time 0 is origin.
func NewTrace(origin time.Time) *Trace { return &Trace{Origin: origin} }

// ts converts a time to integer nanoseconds from the origin, then microseconds, so that a
// child measured inside its parent stays inside it after the conversion.
func (t *Trace) ts(at time.Time) float64 {
	ns := at.Sub(t.Origin).Nanoseconds()
	if ns < 0 {
		ns = 0
	}
	return float64(ns) / 1e3
}

// Process names a process (a rank, a device, the host).
func (t *Trace) Process(pid int, name string) {
	t.Events = append(t.Events, Event{Name: "process_name", Ph: "M", PID: pid, Args: map[string]any{"name": name}})
}

// Thread names a thread (a stream, the host thread, a rank's communicator).
func (t *Trace) Thread(pid, tid int, name string) {
	t.Events = append(t.Events, Event{Name: "thread_name", Ph: "M", PID: pid, TID: tid, Args: map[string]any{"name": name}})
}

// Slice adds a complete ("X") event.
func (t *Trace) Slice(pid, tid int, cat, name string, start time.Time, dur time.Duration, args map[string]any) {
	d := float64(max(dur, 0).Nanoseconds()) / 1e3
	t.Events = append(t.Events, Event{Name: name, Cat: cat, Ph: "X", TS: t.ts(start), Dur: &d, PID: pid, TID: tid, Args: args})
}

// Flow links a point inside a slice on one track to the slice that encloses a later point on
// another (a launch to its kernel): "s" then "f" with "bp":"e", one id.
func (t *Trace) Flow(cat, name string, fromPID, fromTID int, from time.Time, toPID, toTID int, to time.Time) {
	t.flows++
	id := fmt.Sprint(t.flows)
	t.Events = append(t.Events,
		Event{Name: name, Cat: cat, Ph: "s", TS: t.ts(from), PID: fromPID, TID: fromTID, ID: id},
		Event{Name: name, Cat: cat, Ph: "f", BP: "e", TS: t.ts(to), PID: toPID, TID: toTID, ID: id})
}

// Counter adds a counter sample ("C"): each arg is one series of the counter.
func (t *Trace) Counter(pid int, name string, at time.Time, values map[string]any) {
	t.Events = append(t.Events, Event{Name: name, Ph: "C", TS: t.ts(at), PID: pid, Args: values})
}

type traceDoc struct {
	TraceEvents     []Event `json:"traceEvents"`
	DisplayTimeUnit string  `json:"displayTimeUnit"`
}

// Write writes the trace as {"traceEvents": [...]}.
func (t *Trace) Write(w io.Writer) error {
	return json.NewEncoder(w).Encode(traceDoc{TraceEvents: t.Events, DisplayTimeUnit: "ns"})
}

// WriteFile writes the trace to path, gzipped when the name ends in ".gz".
func (t *Trace) WriteFile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return errs.New(errs.Input, "trace %s: %v", path, err)
	}
	var w io.Writer = f
	var zw *gzip.Writer
	if strings.HasSuffix(path, ".gz") {
		zw = gzip.NewWriter(f)
		w = zw
	}
	err = t.Write(w)
	if zw != nil && err == nil {
		err = zw.Close()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return errs.New(errs.Input, "trace %s: %v", path, err)
	}
	return nil
}

// Trace tracks of a single-device profile.
const (
	pidHost, pidDevice = 1, 2
	tidHost            = 1
	tidStream, tidCopy = 1, 2
)

// Trace lays the report out: the host process (compile with one slice per pass, then each run
// with its launches) and the device process (one stream track of kernels, a copy track, and a
// memory counter), a flow from each launch to its kernel.
func (r *Report) Trace() *Trace {
	t := NewTrace(r.Started)
	t.Process(pidHost, "host")
	t.Thread(pidHost, tidHost, "host thread")
	t.Process(pidDevice, fmt.Sprintf("device %s (%s)", r.Backend, r.Device))
	t.Thread(pidDevice, tidStream, "stream")
	t.Thread(pidDevice, tidCopy, "copies")
	t.Slice(pidHost, tidHost, "compile", "compile "+r.Graph, r.Started, r.CompileDur, map[string]any{"passes": len(r.Passes)})
	at := r.Started
	for _, p := range r.Passes {
		if at.Add(p.Dur).After(r.Started.Add(r.CompileDur)) {
			break
		}
		t.Slice(pidHost, tidHost, "compile", p.Name, at, p.Dur, nil)
		at = at.Add(p.Dur)
	}
	byIndex := map[int]Kernel{}
	for i, k := range r.Kernels {
		byIndex[i] = k
	}
	var streamEnd time.Time
	for i, run := range r.Runs {
		t.Slice(pidHost, tidHost, "run", fmt.Sprintf("run %d", i), run.Start, run.Dur, nil)
		t.Counter(pidDevice, "memory", run.Start, map[string]any{"run_bytes": r.RunBytes})
		for _, l := range run.Launches {
			k := byIndex[l.Index]
			hostDur := time.Duration(0)
			if l.Stream == "cpu" {
				hostDur = l.Dur // a CPU launch returns when the kernel is done
			}
			t.Slice(pidHost, tidHost, "launch", "launch "+l.Kernel, l.Start, hostDur, nil)
			kstart := l.Start
			if kstart.Before(streamEnd) {
				kstart = streamEnd // a stream runs its kernels one after another
			}
			streamEnd = kstart.Add(l.Dur)
			t.Slice(pidDevice, tidStream, "kernel", l.Kernel+" "+k.Label, kstart, l.Dur, map[string]any{
				"grid": l.Grid, "block": l.Block, "nodes": k.Nodes, "flops": k.FLOPs, "bytes": k.Bytes,
				"points": l.Points, "attrs": l.Attrs})
			t.Flow("launch", "launch", pidHost, tidHost, l.Start, pidDevice, tidStream, kstart)
		}
		for _, c := range run.Copies {
			t.Slice(pidDevice, tidCopy, "copy", c.Dir, c.Start, c.Dur, map[string]any{"bytes": c.Bytes})
		}
		t.Counter(pidDevice, "memory", run.Start.Add(run.Dur), map[string]any{"run_bytes": 0})
	}
	return t
}
