package chaos

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/errs"
)

// feed gives the watch steps 1..n of attempt a on world ranks, rank r's compute from ms.
func feed(w *stragglerWatch, a, world, n int, ms func(step, rank int) float64) {
	for s := 1; s <= n; s++ {
		for r := range world {
			w.step(Event{Kind: KindStep, Attempt: a, Rank: r, Step: s, ComputeMS: ms(s, r)})
		}
	}
}

func TestStragglerWatchNamesTheSlowRankOnce(t *testing.T) {
	var got []Event
	w := newStragglerWatch(4, func(e Event) { got = append(got, e) })
	feed(w, 0, 4, 30, func(s, r int) float64 {
		if r == 2 && s >= 6 {
			return 8 // at a quarter of its speed from step 6 on
		}
		return 2
	})
	if len(got) != 1 {
		t.Fatalf("want one detection, got %d: %+v", len(got), got)
	}
	d := got[0]
	// Within a window and its strikes of the slowness starting.
	if d.Kind != KindDetect || d.Code != string(errs.Straggler) || d.Rank != 2 || d.Step < 6+stragglerStrikes-1 || d.Step > 6+stragglerWindow+stragglerStrikes {
		t.Fatalf("want rank 2 flagged soon after step 6 with E_STRAGGLER, got %+v", d)
	}
	if !strings.Contains(d.Detail, "rank 2") || !strings.Contains(d.Detail, "of its speed") {
		t.Errorf("detail does not say who and how slow: %q", d.Detail)
	}
	// A new attempt is watched afresh, after its warm-up steps (1 and 2).
	feed(w, 1, 4, 20, func(s, r int) float64 {
		if r == 2 || s <= stragglerWarmup && r == 1 {
			return 50
		}
		return 2
	})
	if len(got) != 2 || got[1].Attempt != 1 || got[1].Rank != 2 {
		t.Fatalf("want rank 2 (only) flagged again in attempt 1, got %+v", got[1:])
	}
}

func TestStragglerWatchFlagsEachSpellOfSlowness(t *testing.T) {
	var got []Event
	w := newStragglerWatch(3, func(e Event) { got = append(got, e) })
	// Rank 0 slow over steps 5-24, healthy 25-49, slow again from 50.
	feed(w, 0, 3, 70, func(s, r int) float64 {
		if r == 0 && (s >= 5 && s < 25 || s >= 50) {
			return 8
		}
		return 2
	})
	if len(got) != 2 || got[0].Rank != 0 || got[1].Rank != 0 || got[1].Step < 50 {
		t.Fatalf("want rank 0 flagged twice, the second time after step 30, got %+v", got)
	}
}

func TestStragglerWatchIgnoresSchedulerNoise(t *testing.T) {
	var got []Event
	w := newStragglerWatch(3, func(e Event) { got = append(got, e) })
	// Now and then a rank loses a few ms to the scheduler: slower in that window, but by
	// less than the excess bound.
	feed(w, 0, 3, 30, func(s, r int) float64 {
		if s%7 == r {
			return 6
		}
		return 2
	})
	// Nor is a step that one rank did not report (it died) judged.
	w.step(Event{Kind: KindStep, Attempt: 0, Rank: 0, Step: 31, ComputeMS: 500})
	if len(got) != 0 {
		t.Fatalf("want no detection, got %+v", got)
	}
}

func TestStragglerWatchNeedsTwoRanks(t *testing.T) {
	var got []Event
	w := newStragglerWatch(1, func(e Event) { got = append(got, e) })
	feed(w, 0, 1, 10, func(int, int) float64 { return 100 })
	var nilWatch *stragglerWatch
	nilWatch.step(Event{Kind: KindStep, Rank: 0, Step: 1, ComputeMS: 1})
	if len(got) != 0 {
		t.Fatalf("one rank has no median to be slower than: %+v", got)
	}
}

func TestAStragglerFlagOnAnotherRankDoesNotDetectTheSlowFault(t *testing.T) {
	ref := &Reference{Digest: "d", Bits: make([]string, 12)}
	for i := range ref.Bits {
		ref.Bits[i] = "b"
	}
	sc := &Scenario{Name: "slow", World: 3, Steps: 12, CheckpointEvery: 5, Faults: []Injection{{ID: "f0", Fault: &Slow{}, Rank: 1, Step: 3}}}
	run := Run{World: 3, Transport: "tcp", CheckEvery: 5, CommTimeout: 1e10}
	for _, flagged := range []int{1, 0} {
		h := newHist()
		h.add(Event{Kind: KindInject, Attempt: 0, Rank: 1, Fault: "f0", Name: "rank/slow", Step: 3})
		h.attempt(0, 3, 0, 12, 5, ref)
		h.add(Event{Kind: KindDetect, Attempt: 0, Rank: flagged, Code: string(errs.Straggler), Detail: "slow"})
		h.add(Event{Kind: KindDone, Attempt: 0, Digest: "d"})
		h.add(Event{Kind: KindJobEnd, Attempt: 0, Code: "0"})
		rep := Check(sc, run, ref, h.evs)
		outcome := rep.Faults[0].Outcome
		if flagged == 1 && outcome != "detected" {
			t.Errorf("rank 1 flagged: outcome %q, violations %v", outcome, rep.Violations)
		}
		if flagged == 0 && (outcome != "NOT DETECTED" || rep.Passed) {
			t.Errorf("rank 0 flagged for rank 1's slowness: outcome %q, passed %v", outcome, rep.Passed)
		}
	}
}

// 64 goroutine ranks on 2 cores: a rank's wall-clock compute in one step is its work plus
// however long the scheduler kept it off a core, which is large and lands on a different rank
// every step (modeled here as a third of the ranks each step taking 1.5 to 12 times as long).
// The watch must name only the rank that is slow at every step (at a third of its speed from
// step 12), within a window and its strikes of the start.
func TestStragglerWatchAtWorld64IgnoresSchedulerSpread(t *testing.T) {
	const world, slow, from = 64, 37, 12
	var got []Event
	w := newStragglerWatch(world, func(e Event) { got = append(got, e) })
	rng := rand.New(rand.NewPCG(64, 2))
	feed(w, 0, world, 60, func(s, r int) float64 {
		ms := 3.0
		if rng.IntN(3) == 0 {
			ms *= 1.5 + 10.5*rng.Float64()
		}
		if r == slow && s >= from {
			ms += 6
		}
		return ms
	})
	if len(got) != 1 || got[0].Rank != slow {
		t.Fatalf("want rank %d alone flagged, got %d detections: %+v", slow, len(got), got)
	}
	if d := got[0].Step; d < from || d > from+stragglerWindow+stragglerStrikes {
		t.Errorf("rank %d flagged at step %d, want within a window and its strikes of step %d", slow, d, from)
	}
}

// The step count a straggler needs follows the other ranks' rate of slow steps: a majority in
// a quiet world, every step of the window at world 64's measured 24 %, and no verdict where
// even that would flag healthy ranks by chance.
func TestSlowStepsNeededFollowsTheNoise(t *testing.T) {
	for _, c := range []struct {
		ranks int
		p     float64
		want  int
	}{{3, 0, stragglerWindow/2 + 1}, {3, 0.05, stragglerWindow/2 + 1}, {64, 0.24, stragglerWindow}, {64, 0.6, 0}} {
		if got := slowStepsNeeded(c.ranks, stragglerWindow, c.p); got != c.want {
			t.Errorf("%d ranks, p %.2f: need %d slow steps, want %d", c.ranks, c.p, got, c.want)
		}
	}
	if got := binomTail(8, 0, 0.3); got < 0.999999 || got > 1.000001 {
		t.Errorf("P(X >= 0) = %v, want 1", got)
	}
	if got, want := binomTail(8, 8, 0.5), 1.0/256; got != want {
		t.Errorf("P(X >= 8 | p = 0.5) = %v, want %v", got, want)
	}
}
