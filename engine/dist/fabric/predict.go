package fabric

import (
	"time"

	"github.com/tessera-qa/tessera-qa/engine/dist"
)

// ErrorBound is the model's stated error: in virtual time, a collective's measured time is
// within this fraction of Predict's (plus AbsSlack) for the ops and algorithms Predict knows.
// The model books each rank's sends on one port per link class in the order they come, and
// a rank's clock also moves with frames of later phases that arrive early, which the closed
// forms below do not see; the fabric specs hold the bound over topologies, sizes and ops.
const ErrorBound = 0.15

// AbsSlack is added to the bound for latency-bound calls (a few frame latencies of skew
// between the ranks' clocks at the barrier before each timed call).
const AbsSlack = 3 * 10 * time.Microsecond

// Within reports whether measured is within the stated error of predicted.
func Within(measured, predicted time.Duration) bool {
	d := measured - predicted
	if d < 0 {
		d = -d
	}
	return float64(d) <= ErrorBound*float64(predicted)+float64(AbsSlack)
}

func chunkLen(count, n, j int) int { return (j+1)*count/n - j*count/n }

// phase is the time of one phase of direct sends: rank r sends bytes(r, p) to every p; each
// rank's ports per class drain at their bandwidth, and the last frame arrives one latency
// (plus the jitter's worst case) after its port drained. The slowest rank's time.
func (t *Topology) phase(n int, bytes func(r, p int) int64) time.Duration {
	var worst time.Duration
	for r := range n {
		var load [classLimit]int64
		var used [classLimit]bool
		for p := range n {
			if p == r {
				continue
			}
			b := bytes(r, p)
			if b < 0 {
				continue
			}
			c := t.Class(r, p)
			load[c] += b
			used[c] = true
		}
		var drain, lat time.Duration
		for c := range load {
			if !used[c] {
				continue
			}
			l := t.Links[c]
			drain = max(drain, time.Duration(float64(load[c])/l.Bandwidth*float64(time.Second)))
			lat = max(lat, l.Latency+l.Jitter)
		}
		worst = max(worst, drain+lat)
	}
	return worst
}

// Predict is the model's time of one collective on a world of t.World ranks: op as the
// collectives checker names it, elements of elem bytes, count as nccl-tests counts (the
// whole buffer), and for all_reduce the node size of the hierarchical route (0: flat) with
// acc the bytes of its running sum's elements (dist.AccBytes). Faults are not modeled.
func (t *Topology) Predict(op string, elem, acc, count, hierNode int) time.Duration {
	n := t.World
	if n < 2 {
		return 0
	}
	e := int64(elem)
	switch op {
	case "all_reduce":
		if hierNode > 0 {
			return t.predictHier(elem, acc, count, hierNode)
		}
		return t.phase(n, func(r, p int) int64 { return int64(chunkLen(count, n, p)) * e }) +
			t.phase(n, func(r, p int) int64 { return int64(chunkLen(count, n, r)) * e })
	case "all_gather", "reduce_scatter", "all_to_all":
		per := int64(count/n) * e
		return t.phase(n, func(r, p int) int64 { return per })
	case "broadcast":
		return t.phase(n, func(r, p int) int64 {
			if r == 0 {
				return int64(count) * e
			}
			return -1
		})
	case "barrier":
		return t.phase(n, func(r, p int) int64 { return 0 })
	}
	return 0
}

// predictHier is the hierarchical all_reduce (dist.AllReduceHier): the raw chunks inside the
// node, the running sum up the chain of nodes and the result down it (pipelined in
// segments), the chunks gathered inside the node.
func (t *Topology) predictHier(elem, acc, count, L int) time.Duration {
	n := t.World
	G := n / L
	m := (count + L - 1) / L
	local := t.phase(L, func(r, p int) int64 { return int64(m) * int64(elem) })
	// The chain's links: the slowest class a hop of it crosses.
	hop := Net
	if t.Nodes > 0 && G > t.Nodes {
		hop = Spine
	}
	l := t.Links[hop]
	per := max(1, dist.HierSegmentBytes/acc)
	segs := max(1, (m+per-1)/per)
	sm := min(m, per)
	up := time.Duration(float64(sm*acc) / l.Bandwidth * float64(time.Second))
	down := time.Duration(float64(sm*elem) / l.Bandwidth * float64(time.Second))
	lat := l.Latency + l.Jitter
	first := time.Duration(G-1) * (2*lat + up + down)
	stage := up + down // a middle node's port carries both directions
	if G == 2 {
		stage = max(up, down)
	}
	return local + first + time.Duration(segs-1)*stage + local
}
