package chaos

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// hist builds a synthetic history on a fake clock: one millisecond per event.
type hist struct {
	t   time.Time
	evs []Event
}

func newHist() *hist { return &hist{t: time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)} }

func (h *hist) add(e Event) *hist {
	h.t = h.t.Add(time.Millisecond)
	e.T = h.t
	h.evs = append(h.evs, e)
	return h
}

func (h *hist) wait(d time.Duration) *hist { h.t = h.t.Add(d); return h }

// attempt adds world ranks resuming from `from` and applying steps from+1..to, with a
// checkpoint every k steps; bits come from ref (or bitsOf when it returns "").
func (h *hist) attempt(a, world, from, to, k int, ref *Reference) *hist {
	for r := range world {
		h.add(Event{Kind: KindResume, Attempt: a, Rank: r, Step: from})
	}
	for s := from + 1; s <= to; s++ {
		for r := range world {
			h.add(Event{Kind: KindStep, Attempt: a, Rank: r, Step: s, Bits: ref.Bits[s-1]})
		}
		if s%k == 0 {
			for r := range world {
				h.add(Event{Kind: KindCheckpoint, Attempt: a, Rank: r, Step: s})
			}
		}
	}
	return h
}

func (h *hist) finish(a int, ref *Reference) *hist {
	h.add(Event{Kind: KindDone, Attempt: a, Rank: 0, Digest: ref.Digest})
	return h.add(Event{Kind: KindJobEnd, Attempt: a, Rank: -1, Code: "0"})
}

func testRef(steps int) *Reference {
	ref := &Reference{Digest: "d1g35t"}
	for s := 1; s <= steps; s++ {
		ref.Bits = append(ref.Bits, fmt.Sprintf("%08x", 0x3f000000+s))
	}
	return ref
}

func killScenario() *Scenario {
	sc := &Scenario{Name: "t", World: 3, Steps: 60, CheckpointEvery: 10, Faults: []Injection{{Fault: &Kill{}, Rank: 1, Step: 35}}}
	if err := sc.Normalize(); err != nil {
		panic(err)
	}
	return sc
}

// goodKill is the history of a correct recovery: rank 1 killed after step 35, peers detect,
// the group restarts and resumes from checkpoint 30.
func goodKill(ref *Reference) *hist {
	h := newHist().attempt(0, 3, 0, 35, 10, ref)
	h.add(Event{Kind: KindInject, Attempt: 0, Rank: 1, Step: 35, Fault: "f0", Name: "rank/kill"})
	h.wait(300 * time.Millisecond).add(Event{Kind: KindDetect, Attempt: 0, Rank: 0, Code: "E_TIMEOUT_COMM", Detail: "rank 1 is gone"})
	h.add(Event{Kind: KindRestart, Attempt: 1, Rank: -1})
	return h
}

func check(t *testing.T, sc *Scenario, ref *Reference, h *hist) *Report {
	t.Helper()
	r := Check(sc, sc.Run(false), ref, h.evs)
	t.Logf("\n%s", r.Table())
	return r
}

func wantViolation(t *testing.T, r *Report, substrs ...string) {
	t.Helper()
	if r.Passed {
		t.Fatalf("the checker passed a bad history")
	}
	all := strings.Join(r.Violations, "\n")
	for _, s := range substrs {
		if !strings.Contains(all, s) {
			t.Errorf("no violation mentions %q:\n%s", s, all)
		}
	}
}

func TestCheckPassesACorrectRecovery(t *testing.T) {
	sc, ref := killScenario(), testRef(60)
	h := goodKill(ref).attempt(1, 3, 30, 60, 10, ref).finish(1, ref)
	r := check(t, sc, ref, h)
	if !r.Passed || !r.BitsIdentical || !r.Finished || r.Restarts != 1 || r.LostSteps != 5 {
		t.Fatalf("report %+v", r)
	}
	f := r.Faults[0]
	if f.Outcome != "detected" || f.DetectedBy != "E_TIMEOUT_COMM" || f.TTD < 0.3 || f.TTD > 0.31 || !f.Recovered || f.TTR <= f.TTD || f.LostSteps != 5 {
		t.Errorf("fault row %+v", f)
	}
}

// The planted recovery bug the issue asks for: the group resumes from the step after the
// checkpoint (it loads checkpoint 30 but starts at step 32, or claims step 31). The checker
// must catch both forms.
func TestCheckCatchesResumeFromTheStepAfterTheCheckpoint(t *testing.T) {
	sc, ref := killScenario(), testRef(60)
	t.Run("skips a step", func(t *testing.T) {
		h := goodKill(ref)
		for r := range 3 {
			h.add(Event{Kind: KindResume, Attempt: 1, Rank: r, Step: 30})
		}
		for s := 32; s <= 60; s++ { // step 31 never applied: an off-by-one in the resume
			for r := range 3 {
				h.add(Event{Kind: KindStep, Attempt: 1, Rank: r, Step: s, Bits: ref.Bits[s-1]})
			}
		}
		h.finish(1, ref)
		wantViolation(t, check(t, sc, ref, h), "applied step 32 after step 30: steps 31..31 skipped")
	})
	t.Run("claims an uncommitted step", func(t *testing.T) {
		h := goodKill(ref).attempt(1, 3, 31, 60, 10, ref).finish(1, ref)
		wantViolation(t, check(t, sc, ref, h), "resumed from step 31, but the newest committed checkpoint is step 30: steps 31..31 were never committed")
	})
}

// The other planted bug: a receiver that accepts a frame with a bad checksum. The corrupted
// gradient reaches the parameters: no rank detects anything, and from that step on the bits
// differ from the fault-free run's.
func TestCheckCatchesAFrameAcceptedWithABadChecksum(t *testing.T) {
	ref := testRef(60)
	sc := &Scenario{Name: "t", World: 3, Steps: 60, CheckpointEvery: 10, Faults: []Injection{{Fault: &Corrupt{}, Rank: 1, Step: 12}}}
	if err := sc.Normalize(); err != nil {
		t.Fatal(err)
	}
	h := newHist().attempt(0, 3, 0, 12, 10, ref)
	h.add(Event{Kind: KindInject, Attempt: 0, Rank: 1, Step: 12, Fault: "f0", Name: "net/corrupt"})
	for s := 13; s <= 60; s++ {
		for r := range 3 {
			h.add(Event{Kind: KindStep, Attempt: 0, Rank: r, Step: s, Bits: "7fc00bad"})
		}
	}
	h.add(Event{Kind: KindDone, Attempt: 0, Rank: 0, Digest: "0ther"})
	h.add(Event{Kind: KindJobEnd, Attempt: 0, Rank: -1, Code: "0"})
	r := check(t, sc, ref, h)
	wantViolation(t, r, "silent corruption: attempt 0, rank 0, step 13", "final parameters 0ther differ", "f0 net/corrupt injected at step 12 of attempt 0 (rank 1) was never detected (want E_DESYNC)")
	if r.BitsIdentical || r.Faults[0].Outcome != "NOT DETECTED" {
		t.Errorf("report %+v", r)
	}
}

func TestCheckCatchesAStepAppliedTwice(t *testing.T) {
	sc, ref := killScenario(), testRef(60)
	h := goodKill(ref).attempt(1, 3, 30, 40, 10, ref)
	h.add(Event{Kind: KindStep, Attempt: 1, Rank: 2, Step: 40, Bits: ref.Bits[39]})
	h.attempt(1, 0, 40, 60, 10, ref) // world 0: no resume events, only the rest below
	for s := 41; s <= 60; s++ {
		for r := range 3 {
			h.add(Event{Kind: KindStep, Attempt: 1, Rank: r, Step: s, Bits: ref.Bits[s-1]})
		}
	}
	h.finish(1, ref)
	wantViolation(t, check(t, sc, ref, h), "attempt 1: rank 2 applied step 40 twice")
}

func TestCheckCatchesLostCommittedWork(t *testing.T) {
	sc, ref := killScenario(), testRef(60)
	h := goodKill(ref).attempt(1, 3, 20, 60, 10, ref).finish(1, ref)
	wantViolation(t, check(t, sc, ref, h), "resumed from step 20, but checkpoint 30 was committed and intact: committed steps 21..30 lost")
}

func TestCheckCatchesADamagedCheckpointLoaded(t *testing.T) {
	ref := testRef(60)
	sc := &Scenario{Name: "t", World: 2, Steps: 60, CheckpointEvery: 10, Faults: []Injection{{Fault: &CheckpointCorrupt{}, Rank: 1, Step: 30}}}
	sc.Normalize()
	h := newHist().attempt(0, 2, 0, 30, 10, ref)
	h.add(Event{Kind: KindInject, Attempt: 0, Rank: 1, Step: 30, Fault: "f0", Name: "checkpoint/corrupt", Damaged: 30})
	h.add(Event{Kind: KindDetect, Attempt: 0, Rank: 0, Code: "E_TIMEOUT_COMM"})
	h.add(Event{Kind: KindRestart, Attempt: 1, Rank: -1})
	h.attempt(1, 2, 30, 60, 10, ref).finish(1, ref) // loaded the damaged step, said nothing
	r := check(t, sc, ref, h)
	wantViolation(t, r, "resumed from checkpoint 30, which a fault damaged", "f0 checkpoint/corrupt injected at step 30 of attempt 0 (rank 1) was never detected (want E_CHECKPOINT)")

	// The right recovery: a notice, and checkpoint 20.
	h = newHist().attempt(0, 2, 0, 30, 10, ref)
	h.add(Event{Kind: KindInject, Attempt: 0, Rank: 1, Step: 30, Fault: "f0", Name: "checkpoint/corrupt", Damaged: 30})
	h.add(Event{Kind: KindRestart, Attempt: 1, Rank: -1})
	h.add(Event{Kind: KindDetect, Attempt: 1, Rank: 0, Code: "E_CHECKPOINT", Detail: "checkpoint step 30: rank-1.npz: sha256 mismatch; falling back to step 20"})
	h.attempt(1, 2, 20, 60, 10, ref).finish(1, ref)
	if r := check(t, sc, ref, h); !r.Passed || r.Faults[0].LostSteps != 10 {
		t.Fatalf("a correct fallback failed: %v", r.Violations)
	}
}

func TestCheckCatchesAHang(t *testing.T) {
	sc, ref := killScenario(), testRef(60)
	h := goodKill(ref).attempt(1, 3, 30, 44, 10, ref)
	h.add(Event{Kind: KindJobEnd, Attempt: 1, Rank: -1, Code: "1", Detail: "timeout"})
	r := check(t, sc, ref, h)
	wantViolation(t, r, "the run hung", "no rank 0 reported finishing all 60 steps")
	if !r.Hung {
		t.Error("not marked hung")
	}
}

func TestCheckAcceptsACheckpointCutOffAfterItsCommit(t *testing.T) {
	// Rank 0 stopped between committing checkpoint 40 and saying so: the resume may come
	// from 40 (indeterminate, like a write whose acknowledgement was lost) or from 30.
	ref := testRef(60)
	sc := &Scenario{Name: "t", World: 2, Steps: 60, CheckpointEvery: 10, Faults: []Injection{{Fault: &Hang{}, Rank: 0, Step: 40}}}
	sc.Normalize()
	for _, from := range []int{30, 40} {
		h := newHist().attempt(0, 2, 0, 39, 10, ref)
		for r := range 2 {
			h.add(Event{Kind: KindStep, Attempt: 0, Rank: r, Step: 40, Bits: ref.Bits[39]})
		}
		h.add(Event{Kind: KindInject, Attempt: 0, Rank: 0, Step: 40, Fault: "f0", Name: "rank/hang"})
		h.wait(3 * time.Second).add(Event{Kind: KindDetect, Attempt: 0, Rank: 1, Code: "E_TIMEOUT_COMM"})
		h.add(Event{Kind: KindRestart, Attempt: 1, Rank: -1})
		h.attempt(1, 2, from, 60, 10, ref).finish(1, ref)
		if r := check(t, sc, ref, h); !r.Passed {
			t.Errorf("resume from %d: %v", from, r.Violations)
		}
	}
}

func TestCheckMasksAFaultInjectedIntoAFailingAttempt(t *testing.T) {
	ref := testRef(60)
	sc := &Scenario{Name: "t", World: 3, Steps: 60, CheckpointEvery: 10,
		Faults: []Injection{{Fault: &Kill{}, Rank: 1, Step: 35}, {Fault: &Corrupt{}, Rank: 2, Step: 35}}}
	sc.Normalize()
	h := goodKill(ref)
	h.evs = h.evs[:len(h.evs)-2] // before the detection
	h.add(Event{Kind: KindInject, Attempt: 0, Rank: 2, Step: 35, Fault: "f1", Name: "net/corrupt"})
	h.add(Event{Kind: KindDetect, Attempt: 0, Rank: 0, Code: "E_TIMEOUT_COMM"})
	h.add(Event{Kind: KindRestart, Attempt: 1, Rank: -1})
	h.attempt(1, 3, 30, 60, 10, ref).finish(1, ref)
	r := check(t, sc, ref, h)
	if !r.Passed || r.Faults[1].Outcome != "masked by f0" {
		t.Fatalf("%v %+v", r.Violations, r.Faults)
	}
}

func TestCheckCatchesAFaultNeverInjected(t *testing.T) {
	sc, ref := killScenario(), testRef(60)
	h := newHist().attempt(0, 3, 0, 60, 10, ref).finish(0, ref)
	wantViolation(t, check(t, sc, ref, h), "f0 rank/kill (rank 1, step 35) was never injected")
}

func TestSummaryQuantiles(t *testing.T) {
	var reps []*Report
	for i := range 20 {
		reps = append(reps, &Report{Scenario: fmt.Sprint(i), Passed: true, Finished: true, BitsIdentical: true, Restarts: 1,
			Faults: []FaultResult{{ID: "f0", Fault: "rank/kill", Outcome: "detected", TTD: float64(i + 1), TTR: float64(i + 2)}}})
	}
	s := Summarize(reps, 3)
	if s.TTD.N != 20 || s.TTD.P50 != 10 || s.TTD.P95 != 19 || s.TTD.Max != 20 || s.TTR.Max != 21 || s.Recovered != 20 || len(s.Worst) != 3 || s.Worst[0].Scenario != "19" {
		t.Fatalf("%+v", s)
	}
}

// A fault that needs a later event to show (disk/full: the next checkpoint) is masked when
// another fault of its attempt ends the attempt first.
func TestCheckMasksAFaultTheAttemptEndedBefore(t *testing.T) {
	ref := testRef(60)
	sc := &Scenario{Name: "t", World: 3, Steps: 60, CheckpointEvery: 10,
		Faults: []Injection{{Fault: &NaN{}, Rank: 0, Step: 55}, {Fault: &DiskFull{}, Rank: 1, Step: 52}}}
	sc.Normalize()
	h := newHist().attempt(0, 3, 0, 52, 10, ref)
	h.add(Event{Kind: KindInject, Attempt: 0, Rank: 1, Step: 52, Fault: "f1", Name: "disk/full"})
	h.attempt(0, 0, 52, 55, 10, ref)
	for s := 53; s <= 55; s++ {
		for r := range 3 {
			h.add(Event{Kind: KindStep, Attempt: 0, Rank: r, Step: s, Bits: ref.Bits[s-1]})
		}
	}
	h.add(Event{Kind: KindInject, Attempt: 0, Rank: 0, Step: 55, Fault: "f0", Name: "device/nan"})
	h.add(Event{Kind: KindDetect, Attempt: 0, Rank: 2, Code: "E_NAN_INF"})
	h.add(Event{Kind: KindRestart, Attempt: 1, Rank: -1})
	h.attempt(1, 3, 50, 60, 10, ref).finish(1, ref)
	r := check(t, sc, ref, h)
	if !r.Passed || r.Faults[1].Outcome != "masked by f0 (the attempt ended first)" {
		t.Fatalf("%v %+v", r.Violations, r.Faults)
	}
}

// A recovery that finishes every step with the fault-free loss bits but ends on parameters one
// bit away from the fault-free run's (the last hex digit of the digest) is not a recovery.
func TestCheckCatchesARecoveryWithOtherFinalBits(t *testing.T) {
	sc, ref := killScenario(), testRef(60)
	off := *ref
	d := []byte(ref.Digest)
	d[len(d)-1] ^= 1
	off.Digest = string(d)
	h := goodKill(ref).attempt(1, 3, 30, 60, 10, ref).finish(1, &off)
	r := check(t, sc, ref, h)
	wantViolation(t, r, "final parameters "+off.Digest+" differ from the fault-free run's "+ref.Digest)
	if r.BitsIdentical {
		t.Errorf("bits identical with digest %s vs %s", off.Digest, ref.Digest)
	}
}

// A failure reported with a code the fault does not produce is not its detection: a killed
// rank must show as E_TIMEOUT_COMM, and a group that says E_NAN_INF instead (and restarts)
// did not notice what happened. The same history with the right code passes.
func TestCheckDetectionNeedsTheFaultsCode(t *testing.T) {
	sc, ref := killScenario(), testRef(60)
	for _, tc := range []struct {
		code   string
		passes bool
	}{{"E_TIMEOUT_COMM", true}, {"E_NAN_INF", false}, {"E_DESYNC", false}} {
		h := newHist().attempt(0, 3, 0, 35, 10, ref)
		h.add(Event{Kind: KindInject, Attempt: 0, Rank: 1, Step: 35, Fault: "f0", Name: "rank/kill"})
		h.wait(300 * time.Millisecond).add(Event{Kind: KindDetect, Attempt: 0, Rank: 0, Code: tc.code, Detail: "something failed"})
		h.add(Event{Kind: KindRestart, Attempt: 1, Rank: -1})
		h.attempt(1, 3, 30, 60, 10, ref).finish(1, ref)
		r := check(t, sc, ref, h)
		if tc.passes {
			if !r.Passed || r.Faults[0].Outcome != "detected" {
				t.Errorf("%s: a detection with the right code failed: %v %+v", tc.code, r.Violations, r.Faults[0])
			}
			continue
		}
		wantViolation(t, r, "f0 rank/kill injected at step 35 of attempt 0 (rank 1) was never detected (want E_TIMEOUT_COMM)")
		if r.Faults[0].Outcome != "NOT DETECTED" {
			t.Errorf("%s: outcome %q, want NOT DETECTED", tc.code, r.Faults[0].Outcome)
		}
	}
}

// A corrupted payload is detected only by the receiver's checksum: an E_DESYNC that names
// another header field (or none: a peer relaying the victim's abort) is not its detection.
func TestCheckCorruptionNeedsTheChecksumField(t *testing.T) {
	ref := testRef(60)
	sc := &Scenario{Name: "t", World: 3, Steps: 60, CheckpointEvery: 10, Faults: []Injection{{Fault: &Corrupt{}, Rank: 1, Step: 35}}}
	if err := sc.Normalize(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		field  string
		passes bool
	}{{"crc", true}, {"seq", false}, {"", false}} {
		h := newHist().attempt(0, 3, 0, 35, 10, ref)
		h.add(Event{Kind: KindInject, Attempt: 0, Rank: 1, Step: 35, Fault: "f0", Name: "net/corrupt"})
		h.wait(300 * time.Millisecond).add(Event{Kind: KindDetect, Attempt: 0, Rank: 0, Code: "E_DESYNC", Field: tc.field, Detail: "frame refused"})
		h.add(Event{Kind: KindRestart, Attempt: 1, Rank: -1})
		h.attempt(1, 3, 30, 60, 10, ref).finish(1, ref)
		r := check(t, sc, ref, h)
		if tc.passes {
			if !r.Passed || r.Faults[0].Outcome != "detected" {
				t.Errorf("field %q: the checksum's detection failed: %v %+v", tc.field, r.Violations, r.Faults[0])
			}
			continue
		}
		wantViolation(t, r, "f0 net/corrupt injected at step 35 of attempt 0 (rank 1) was never detected (want E_DESYNC)")
	}
}
