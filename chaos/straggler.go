package chaos

import (
	"fmt"
	"math"
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

// judge returns a detect event for every rank newly found slow in the window of complete
// steps ending at last. The rule, relative to the ranks' spread: each step's compute of a rank
// is divided by that step's median rank's, and the step is slow for that rank when the ratio
// is over 1/StragglerSpeed. A healthy rank is slow at a step by the scheduler's luck as often
// as the other ranks are (p, the fraction of the other ranks' steps in the window that are
// slow); the rank is a straggler when it was slow at so many of the window's steps (at least
// need(p), more than half) that fewer than stragglerFalseRate of a world of healthy ranks
// would be by chance (binomial tail). In a quiet world p is near 0 and a majority of slow steps
// suffices (a fail-slow rank's pauses can miss a short step); with 64 goroutine ranks on 2
// cores a quarter of all rank-steps are slow (measured 2026-12-03: per-step ratios 0.21 at
// the 5th percentile, 3.67 at the 99th, 24 % over the bound, independent from step to step)
// and only all 8 steps of the window make a straggler; summing the window, as the judge did
// before, let one or two late steps make a healthy rank look slow (75 false flags in 5
// schedules). It must also be over the median rank's window sum by stragglerMinExcessMS, in
// stragglerStrikes windows in a row. Where even all steps would not do (p too high) the judge
// abstains, and a rank's strikes and flag stay as they were.
func (w *stragglerWatch) judge(last int) []Event {
	if last-stragglerWindow+1 < w.first+stragglerWarmup {
		return nil
	}
	sums := make([]float64, w.ranks)
	slowSteps := make([]int, w.ranks) // rank -> steps of the window it was slow at
	step := make([]float64, w.ranks)
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
			step[r] = ms
		}
		med := median(slices.Clone(step))
		for r, ms := range step {
			if med/ms < profiling.StragglerSpeed {
				slowSteps[r]++
			}
		}
	}
	delete(w.compute, last-stragglerWindow) // no window reaches it any more
	total := 0
	for _, k := range slowSteps {
		total += k
	}
	med := median(slices.Clone(sums))
	var out []Event
	for r, ms := range sums {
		p := float64(total-slowSteps[r]) / float64((w.ranks-1)*stragglerWindow)
		need := slowStepsNeeded(w.ranks, stragglerWindow, p)
		if need == 0 {
			continue // no verdict either way: the spell, if any, goes on
		}
		if slowSteps[r] < need || med/ms >= profiling.StragglerSpeed || ms-med < stragglerMinExcessMS {
			w.strikes[r], w.flagged[r] = 0, false // healthy again: a later slowness is news
			continue
		}
		if w.strikes[r]++; w.flagged[r] || w.strikes[r] < stragglerStrikes {
			continue
		}
		w.flagged[r] = true
		out = append(out, Event{Kind: KindDetect, Attempt: w.attempt, Rank: r, Step: last, Code: string(errs.Straggler), Field: stragglerCompute,
			Detail: fmt.Sprintf("rank %d computed %.1f ms over steps %d-%d, the median rank %.1f ms (%.2f of its speed); below %.1f of the step's median rank's speed at %d of those %d steps, where the other ranks were slow at %.0f %% of theirs (a straggler needs %d)",
				r, ms, last-stragglerWindow+1, last, med, med/ms, profiling.StragglerSpeed, slowSteps[r], stragglerWindow, 100*p, need)})
	}
	return out
}

// stragglerFalseRate bounds the expected number of healthy ranks per window that the compute
// judge's step count would pass by chance.
const stragglerFalseRate = 0.01

// slowStepsNeeded is the fewest slow steps, more than half of window, such that ranks healthy
// ranks each slow at a step with probability p would reach it by chance fewer than
// stragglerFalseRate times in all; 0 when no count up to window does.
func slowStepsNeeded(ranks, window int, p float64) int {
	for k := window/2 + 1; k <= window; k++ {
		if float64(ranks)*binomTail(window, k, p) < stragglerFalseRate {
			return k
		}
	}
	return 0
}

// binomTail is P(X >= k) for X ~ Binomial(n, p).
func binomTail(n, k int, p float64) float64 {
	sum := 0.0
	for i := k; i <= n; i++ {
		c := 1.0
		for j := range i {
			c = c * float64(n-j) / float64(j+1)
		}
		sum += c * math.Pow(p, float64(i)) * math.Pow(1-p, float64(n-i))
	}
	return sum
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
