package profiling

import (
	"fmt"
	"io"
	"slices"
	"sort"
	"time"
)

// Span is one interval of a rank's timeline, on the clock every rank shares (a distributed
// run's ranks on one host read one wall clock; across hosts the rendezvous gives the offset).
type Span struct {
	Kind  string // SpanCompute, SpanComm, SpanWait
	Name  string // kernel or collective ("all_reduce")
	Start time.Time
	Dur   time.Duration
	// Args of a collective: op, bytes, peers, mode.
	Args map[string]any
}

// Span kinds.
const (
	SpanCompute = "compute"
	SpanComm    = "comm"
	SpanWait    = "wait"
)

// RankTimeline is one rank's spans over one step (or several: Step is the wall time they
// cover).
type RankTimeline struct {
	Rank int
	// Name is the process's name in a trace ("" : "rank N").
	Name  string
	Step  time.Duration
	Spans []Span
	// Wait is the time the rank's collectives spent blocked on late peers (within their comm
	// spans; profile.Collective.Wait), as opposed to moving and reducing bytes.
	Wait time.Duration
}

// RankSummary is the HTA-style breakdown of one rank: time in compute, in communication, idle
// (neither), the share of communication hidden under compute, and its speed against the
// median rank's.
type RankSummary struct {
	Rank       int     `json:"rank"`
	StepMS     float64 `json:"step_ms"`
	ComputeMS  float64 `json:"compute_ms"`
	CommMS     float64 `json:"comm_ms"`
	WaitMS     float64 `json:"wait_ms"`
	IdleMS     float64 `json:"idle_ms"`
	OverlapPct float64 `json:"overlap_pct"` // of communication time, the part under compute
	// Speed is the median rank's work over this rank's (1: the median rank; 0.1: ten times
	// slower), work being the step's time outside collectives and waits: in a synchronous
	// job every rank's step lasts as long as the slowest one's, so only the work tells them
	// apart (chaos's straggler watch uses the same measure).
	Speed     float64 `json:"speed"`
	WorkMS    float64 `json:"work_ms"`
	Straggler bool    `json:"straggler"`
}

// StragglerSpeed is the speed under which a rank is flagged, as NVIDIA's resiliency tooling
// does: below 0.7 of the median rank's.
const StragglerSpeed = 0.7

type interval struct{ a, b time.Time }

// union merges intervals and returns their total length and the merged list.
func union(iv []interval) (time.Duration, []interval) {
	sort.Slice(iv, func(i, j int) bool { return iv[i].a.Before(iv[j].a) })
	var out []interval
	for _, x := range iv {
		if n := len(out); n > 0 && !x.a.After(out[n-1].b) {
			if x.b.After(out[n-1].b) {
				out[n-1].b = x.b
			}
			continue
		}
		out = append(out, x)
	}
	var d time.Duration
	for _, x := range out {
		d += x.b.Sub(x.a)
	}
	return d, out
}

// overlap is the length of the intersection of two merged interval lists.
func overlap(p, q []interval) time.Duration {
	var d time.Duration
	for _, x := range p {
		for _, y := range q {
			a, b := x.a, x.b
			if y.a.After(a) {
				a = y.a
			}
			if y.b.Before(b) {
				b = y.b
			}
			if b.After(a) {
				d += b.Sub(a)
			}
		}
	}
	return d
}

// Summarize breaks every rank's timeline down and ranks them against the median rank's work:
// the result is sorted slowest first, stragglers flagged.
func Summarize(ranks []RankTimeline) []RankSummary {
	var out []RankSummary
	var steps []float64
	for _, r := range ranks {
		var comp, comm, wait []interval
		for _, s := range r.Spans {
			iv := interval{s.Start, s.Start.Add(s.Dur)}
			switch s.Kind {
			case SpanCompute:
				comp = append(comp, iv)
			case SpanComm:
				comm = append(comm, iv)
			case SpanWait:
				wait = append(wait, iv)
			}
		}
		cd, cu := union(comp)
		md, mu := union(comm)
		wd, _ := union(wait)
		wd += r.Wait
		busy, _ := union(append(append(slices.Clone(comp), comm...), wait...))
		talk, _ := union(append(slices.Clone(comm), wait...))
		s := RankSummary{Rank: r.Rank, StepMS: ms(r.Step), ComputeMS: ms(cd), CommMS: ms(md), WaitMS: ms(wd), IdleMS: ms(max(r.Step-busy, 0)),
			WorkMS: ms(max(r.Step-talk, 0))}
		if md > 0 {
			s.OverlapPct = 100 * float64(overlap(cu, mu)) / float64(md)
		}
		out = append(out, s)
		steps = append(steps, s.WorkMS)
	}
	med := median(steps)
	for i := range out {
		if out[i].WorkMS > 0 {
			out[i].Speed = med / out[i].WorkMS
		}
		out[i].Straggler = out[i].Speed > 0 && out[i].Speed < StragglerSpeed
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Speed < out[j].Speed })
	return out
}

func ms(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e6 }

// WriteRankSummary prints the per-rank table, slowest first.
func WriteRankSummary(w io.Writer, rs []RankSummary) {
	fmt.Fprintf(w, "%-5s %9s %9s %9s %9s %9s %9s %8s %6s\n", "rank", "step_ms", "work", "compute", "comm", "wait", "idle", "overlap", "speed")
	for _, r := range rs {
		flag := ""
		if r.Straggler {
			flag = fmt.Sprintf("  STRAGGLER (< %.1f of the median)", StragglerSpeed)
		}
		fmt.Fprintf(w, "%-5d %9.3f %9.3f %9.3f %9.3f %9.3f %9.3f %7.1f%% %6.2f%s\n", r.Rank, r.StepMS, r.WorkMS, r.ComputeMS, r.CommMS, r.WaitMS, r.IdleMS, r.OverlapPct, r.Speed, flag)
	}
}

// RankTrace lays the ranks out as one process each (pid rank+1) with a compute track and a
// communication track, on the clock origin.
func RankTrace(origin time.Time, ranks []RankTimeline) *Trace {
	t := NewTrace(origin)
	for _, r := range ranks {
		pid := r.Rank + 1
		name := r.Name
		if name == "" {
			name = fmt.Sprintf("rank %d", r.Rank)
		}
		t.Process(pid, name)
		t.Thread(pid, 1, "compute")
		t.Thread(pid, 2, "communication")
		for _, s := range r.Spans {
			tid := 1
			if s.Kind != SpanCompute {
				tid = 2
			}
			t.Slice(pid, tid, s.Kind, s.Name, s.Start, s.Dur, s.Args)
		}
	}
	return t
}
