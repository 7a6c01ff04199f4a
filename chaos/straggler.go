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
}

func newStragglerWatch(ranks int, emit func(Event)) *stragglerWatch {
	return &stragglerWatch{ranks: ranks, emit: emit, compute: map[int]map[int]float64{}, strikes: map[int]int{}, flagged: map[int]bool{}}
}

// step takes one rank's step event.
func (w *stragglerWatch) step(e Event) {
	if w == nil || w.ranks < 2 || e.Kind != KindStep || e.ComputeMS <= 0 {
		return
	}
	w.mu.Lock()
	if e.Attempt != w.attempt {
		if e.Attempt < w.attempt {
			w.mu.Unlock()
			return // a late line of an attempt already over
		}
		w.attempt, w.compute, w.strikes, w.flagged = e.Attempt, map[int]map[int]float64{}, map[int]int{}, map[int]bool{}
		w.first = 0
	}
	if w.first == 0 || e.Step < w.first {
		w.first = e.Step
	}
	byRank := w.compute[e.Step]
	if byRank == nil {
		byRank = map[int]float64{}
		w.compute[e.Step] = byRank
	}
	byRank[e.Rank] = e.ComputeMS
	var found []Event
	if len(byRank) == w.ranks {
		found = w.judge(e.Step)
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
		out = append(out, Event{Kind: KindDetect, Attempt: w.attempt, Rank: r, Step: last, Code: string(errs.Straggler),
			Detail: fmt.Sprintf("rank %d computed %.1f ms over steps %d-%d, the median rank %.1f ms: %.2f of its speed (a straggler below %.1f)",
				r, ms, last-stragglerWindow+1, last, med, speed, profiling.StragglerSpeed)})
	}
	return out
}
