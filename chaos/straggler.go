package chaos

import (
	"fmt"
	"slices"
	"sync"

	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/profiling"
)

// The straggler watch: a fail-slow rank (one that keeps working at a fraction of its speed)
// fails no collective, so nothing in the job reports it; the agent finds it from the ranks'
// step events. In a synchronous job every rank's step takes the same wall time (the fast
// ones wait in the collectives), so the signal is the compute part of the step: the slow
// rank's grows, its peers' waits grow instead.
//
// A slow link or a congested switch changes no rank's compute: its signal is whom the ranks
// wait on (each step's per-peer waits, dist.Comm.WaitedOn). A peer's blame is the median,
// over the other ranks, of their waits on it in the window (so one observer on the slow path
// cannot name the whole world); the peers blamed beyond StragglerSpeed of the median peer's
// blame are the ranks on the slow path: both ends of a slow link, every rank of a congested
// node. Their detections carry Field "wait" (compute ones "compute").
const (
	// stragglerWindow is how many consecutive steps, complete on every rank, one verdict
	// sums: one step is at the mercy of the host's scheduler.
	stragglerWindow = 8
	// stragglerMinExcessMS: a rank is flagged only when its compute over the window also
	// exceeds the median rank's by this much. On a loaded 2-core machine a healthy rank
	// loses a few milliseconds to the scheduler now and then; a fail-slow pause is longer.
	stragglerMinExcessMS = 12.0
	// stragglerStrikes is how many consecutive windows must find a rank slow: one window
	// can hold a healthy rank's bad luck with the scheduler, two in a row rarely do.
	stragglerStrikes = 2
	// stragglerWarmup: the first steps of an attempt are not judged (the ranks start one
	// after the other and warm their caches).
	stragglerWarmup = 2
	// stragglerWallWaitUS is the wait judge's floor on the wall clock, like
	// stragglerMinExcessMS; on a fabric's virtual clock nothing is noise and the floor is
	// stragglerVirtualWaitUS.
	stragglerWallWaitUS    = 12000.0
	stragglerVirtualWaitUS = 1.0
)

// The Field of a straggler detection: what the watch judged.
const (
	stragglerCompute = "compute"
	stragglerWait    = "wait"
)

// stragglerWatch flags each rank whose compute time over the last stragglerWindow steps is
// below profiling.StragglerSpeed of the median rank's speed, in stragglerStrikes windows in a
// row; once per spell of slowness (a window that finds it healthy ends the spell).
type stragglerWatch struct {
	ranks int // the ranks whose steps this agent sees (fewer than 2: no verdict)
	emit  func(Event)

	mu      sync.Mutex
	attempt int
	first   int                     // the first step this attempt reported
	compute map[int]map[int]float64 // step -> rank -> compute ms
	strikes map[int]int             // rank -> consecutive windows that found it slow
	flagged map[int]bool
	// The wait judge's state, alike: step -> rank -> its waits on each peer (us).
	waits    map[int]map[int][]float64
	wStrikes map[int]int
	wFlagged map[int]bool
	// waitFloorUS: a peer is blamed only when its blame over the window exceeds the median
	// peer's by this much.
	waitFloorUS float64
}

func newStragglerWatch(ranks int, emit func(Event)) *stragglerWatch {
	w := &stragglerWatch{ranks: ranks, emit: emit, waitFloorUS: stragglerWallWaitUS}
	w.reset(0)
	return w
}

func (w *stragglerWatch) reset(attempt int) {
	w.attempt, w.first = attempt, 0
	w.compute, w.strikes, w.flagged = map[int]map[int]float64{}, map[int]int{}, map[int]bool{}
	w.waits, w.wStrikes, w.wFlagged = map[int]map[int][]float64{}, map[int]int{}, map[int]bool{}
}

// step takes one rank's step event.
func (w *stragglerWatch) step(e Event) {
	if w == nil || w.ranks < 2 || e.Kind != KindStep {
		return
	}
	w.mu.Lock()
	if e.Attempt != w.attempt {
		if e.Attempt < w.attempt {
			w.mu.Unlock()
			return // a late line of an attempt already over
		}
		w.reset(e.Attempt)
	}
	if w.first == 0 || e.Step < w.first {
		w.first = e.Step
	}
	var found []Event
	if e.ComputeMS > 0 {
		byRank := w.compute[e.Step]
		if byRank == nil {
			byRank = map[int]float64{}
			w.compute[e.Step] = byRank
		}
		byRank[e.Rank] = e.ComputeMS
		if len(byRank) == w.ranks {
			found = w.judge(e.Step)
		}
	}
	if len(e.WaitUS) == w.ranks {
		byRank := w.waits[e.Step]
		if byRank == nil {
			byRank = map[int][]float64{}
			w.waits[e.Step] = byRank
		}
		byRank[e.Rank] = e.WaitUS
		if len(byRank) == w.ranks {
			found = append(found, w.judgeWait(e.Step)...)
		}
	}
	w.mu.Unlock()
	for _, d := range found {
		w.emit(d)
	}
}

// judge sums the window of complete steps ending at last and returns a detect event for
// every rank newly found slow.
func (w *stragglerWatch) judge(last int) []Event {
	if last-stragglerWindow+1 < w.first+stragglerWarmup {
		return nil
	}
	sums := make([]float64, w.ranks)
	for s := last - stragglerWindow + 1; s <= last; s++ {
		byRank := w.compute[s]
		if len(byRank) != w.ranks {
			return nil
		}
		for r, ms := range byRank {
			if r < 0 || r >= w.ranks {
				return nil
			}
			sums[r] += ms
		}
	}
	delete(w.compute, last-stragglerWindow) // no window reaches it any more
	sorted := slices.Clone(sums)
	slices.Sort(sorted)
	med := sorted[len(sorted)/2]
	if len(sorted)%2 == 0 {
		med = (sorted[len(sorted)/2-1] + sorted[len(sorted)/2]) / 2
	}
	var out []Event
	for r, ms := range sums {
		speed := med / ms
		if speed >= profiling.StragglerSpeed || ms-med < stragglerMinExcessMS {
			w.strikes[r], w.flagged[r] = 0, false // healthy again: a later slowness is news
			continue
		}
		if w.strikes[r]++; w.flagged[r] || w.strikes[r] < stragglerStrikes {
			continue
		}
		w.flagged[r] = true
		out = append(out, Event{Kind: KindDetect, Attempt: w.attempt, Rank: r, Step: last, Code: string(errs.Straggler), Field: stragglerCompute,
			Detail: fmt.Sprintf("rank %d computed %.1f ms over steps %d-%d, the median rank %.1f ms: %.2f of its speed (a straggler below %.1f)",
				r, ms, last-stragglerWindow+1, last, med, speed, profiling.StragglerSpeed)})
	}
	return out
}

// median of xs (which it sorts).
func median(xs []float64) float64 {
	slices.Sort(xs)
	n := len(xs)
	if n%2 == 1 {
		return xs[n/2]
	}
	return (xs[n/2-1] + xs[n/2]) / 2
}

// judgeWait sums the ranks' per-peer waits over the window of complete steps ending at last
// and returns a detect event for every peer newly found on the slow path.
func (w *stragglerWatch) judgeWait(last int) []Event {
	if last-stragglerWindow+1 < w.first+stragglerWarmup {
		return nil
	}
	sums := make([][]float64, w.ranks) // observer -> peer -> us
	for r := range sums {
		sums[r] = make([]float64, w.ranks)
	}
	for s := last - stragglerWindow + 1; s <= last; s++ {
		byRank := w.waits[s]
		if len(byRank) != w.ranks {
			return nil
		}
		for r, ws := range byRank {
			if r < 0 || r >= w.ranks {
				return nil
			}
			for p, us := range ws {
				sums[r][p] += us
			}
		}
	}
	delete(w.waits, last-stragglerWindow)
	blame := make([]float64, w.ranks)
	for p := range blame {
		var seen []float64
		for r := range w.ranks {
			if r != p {
				seen = append(seen, sums[r][p])
			}
		}
		blame[p] = median(seen)
	}
	med := median(slices.Clone(blame))
	var slow []int
	for p, b := range blame {
		if b <= 0 || med/b >= profiling.StragglerSpeed || b-med < w.waitFloorUS {
			w.wStrikes[p], w.wFlagged[p] = 0, false
			continue
		}
		w.wStrikes[p]++
		slow = append(slow, p)
	}
	var out []Event
	for _, p := range slow {
		if w.wFlagged[p] || w.wStrikes[p] < stragglerStrikes {
			continue
		}
		w.wFlagged[p] = true
		out = append(out, Event{Kind: KindDetect, Attempt: w.attempt, Rank: p, Step: last, Code: string(errs.Straggler), Field: stragglerWait,
			Detail: fmt.Sprintf("the ranks waited a median %.1f us on rank %d over steps %d-%d, %.1f us on the median peer: %.2f of its speed (a straggler below %.1f); on the slow path with it: ranks %v",
				blame[p], p, last-stragglerWindow+1, last, med, med/blame[p], profiling.StragglerSpeed, slow)})
	}
	return out
}
