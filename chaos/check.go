package chaos

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/failpoint"
	"github.com/tessera-qa/tessera-qa/profiling"
)

// Reference is the fault-free run with the same seed and world: every step's loss bits and
// the final parameters' digest.
type Reference struct {
	Digest string   `json:"digest"`
	Bits   []string `json:"bits"` // Bits[s-1] is step s's loss
}

// Report is the checker's verdict on one run.
type Report struct {
	Scenario      string        `json:"scenario"`
	Passed        bool          `json:"passed"`
	Violations    []string      `json:"violations,omitempty"`
	Warnings      []string      `json:"warnings,omitempty"`
	Faults        []FaultResult `json:"faults"`
	Finished      bool          `json:"finished"`
	Hung          bool          `json:"hung,omitempty"`
	Attempts      int           `json:"attempts"`
	Restarts      int           `json:"restarts"`
	LostSteps     int           `json:"lost_steps"` // steps applied, then rolled back to a checkpoint and done again
	Digest        string        `json:"digest,omitempty"`
	RefDigest     string        `json:"reference_digest"`
	BitsIdentical bool          `json:"bits_identical"`
	StepsChecked  int           `json:"steps_checked"` // step events whose loss bits were compared
	WallSeconds   float64       `json:"wall_s"`
	Dir           string        `json:"artifacts,omitempty"`
	// Profiles, with Scenario.Profile: one per attempt whose ranks left records.
	Profiles []AttemptProfile `json:"profiles,omitempty"`
}

// FaultResult is one injection's row: what happened to it.
type FaultResult struct {
	ID         string  `json:"id"`
	Fault      string  `json:"fault"`
	Rank       int     `json:"rank"`
	Step       int     `json:"step"`    // scheduled
	AtStep     int     `json:"at_step"` // the step the rank had applied when it was injected
	Attempt    int     `json:"attempt"`
	Expected   string  `json:"expected"` // "detect E_X|E_Y" or "tolerate"
	Outcome    string  `json:"outcome"`  // detected | tolerated | masked by fN | NOT DETECTED | not injected
	DetectedBy string  `json:"detected_by,omitempty"`
	DetectRank int     `json:"detect_rank,omitempty"`
	Detail     string  `json:"detail,omitempty"`
	TTD        float64 `json:"time_to_detect_s,omitempty"`
	TTR        float64 `json:"time_to_recover_s,omitempty"`
	LostSteps  int     `json:"lost_steps,omitempty"`
	Recovered  bool    `json:"recovered"`
}

// Check judges a run's history against its scenario and the fault-free reference. The
// invariants, main one first:
//
//  1. every step any rank applied, in any attempt, carries the fault-free run's loss bits, and
//     the final parameters are bit-identical to the fault-free run's (no silent corruption);
//  2. the job finished all its steps within its bound (no hang);
//  3. every attempt resumed from the newest committed checkpoint no fault damaged (no committed
//     step lost, none skipped), and each rank applied the steps after it once each, in order
//     (no step applied twice or skipped);
//  4. every fault was injected, and every fault that must be detected was, with one of its
//     codes (or was masked by an earlier fault of the same attempt).
//
// It reports time-to-detect and time-to-recover per fault and the work lost to rollbacks.
func Check(sc *Scenario, run Run, ref *Reference, evs []Event) *Report {
	rep := &Report{Scenario: sc.Name, RefDigest: ref.Digest}
	bad := func(format string, args ...any) {
		rep.Violations = append(rep.Violations, fmt.Sprintf(format, args...))
	}
	if len(evs) > 0 {
		rep.WallSeconds = evs[len(evs)-1].T.Sub(evs[0].T).Seconds()
	}

	// 1. Bits.
	corrupt := 0
	defer func() {
		if corrupt > 3 {
			rep.Violations = append(rep.Violations, fmt.Sprintf("silent corruption: %d more step(s) with other bits than the fault-free run's", corrupt-3))
			rep.Passed = false
		}
	}()
	for _, e := range evs {
		if e.Kind != KindStep {
			continue
		}
		rep.StepsChecked++
		if e.Step < 1 || e.Step > len(ref.Bits) {
			bad("attempt %d: rank %d applied step %d, outside the run's 1..%d", e.Attempt, e.Rank, e.Step, len(ref.Bits))
			continue
		}
		if e.Bits != ref.Bits[e.Step-1] && !failpoint.Enabled(failpoint.JudgeChaosStepBitsUnchecked) {
			if corrupt++; corrupt > 3 {
				continue
			}
			bad("silent corruption: attempt %d, rank %d, step %d: loss bits %s, the fault-free run has %s", e.Attempt, e.Rank, e.Step, e.Bits, ref.Bits[e.Step-1])
		}
	}

	// 2. Finished, within the bound.
	var done, end *Event
	restarts := map[int]bool{}
	for i := range evs {
		switch evs[i].Kind {
		case KindDone:
			if done == nil {
				done = &evs[i]
			}
		case KindJobEnd:
			end = &evs[i]
		case KindRestart:
			restarts[evs[i].Attempt] = true // every node's agent records the same restart
		}
		rep.Attempts = max(rep.Attempts, evs[i].Attempt+1)
	}
	rep.Restarts = len(restarts)
	switch {
	case end == nil:
		bad("the history has no job_end: the agent did not finish recording")
	case end.Detail == "timeout":
		rep.Hung = true
		bad("the run hung: it did not end within its bound of %s", sc.Bound)
	case end.Code != "0":
		bad("the job failed: exit %s (%s)", end.Code, end.Detail)
	}
	if done == nil {
		bad("no rank 0 reported finishing all %d steps", sc.Steps)
	} else {
		rep.Digest = done.Digest
		rep.Finished = end != nil && end.Code == "0"
		rep.BitsIdentical = done.Digest == ref.Digest || failpoint.Enabled(failpoint.JudgeChaosFinalDigestUnchecked)
		if !rep.BitsIdentical {
			bad("final parameters %s differ from the fault-free run's %s", done.Digest, ref.Digest)
		}
	}

	// 3. Resume points and step order.
	type key struct{ attempt, rank int }
	next := map[key]int{}       // the step each rank must apply next
	lastStep := map[key]int{}   // last step applied
	resumed := map[int]int{}    // attempt -> rank 0's resume point
	committed := map[int]bool{} // intact committed checkpoints
	pending := map[int]bool{}   // checkpoint steps applied but never acknowledged (indeterminate)
	damaged := map[int]bool{}
	commits := map[key]bool{} // (attempt, step) commits seen
	for _, e := range evs {
		k := key{e.Attempt, e.Rank}
		switch e.Kind {
		case KindCheckpoint:
			// Every rank reports the same commit; the first report is the commit, later
			// ones must not undo a damage done in between.
			if c := (key{e.Attempt, e.Step}); !commits[c] {
				commits[c] = true
				committed[e.Step] = true
				delete(damaged, e.Step)
				delete(pending, e.Step)
			}
		case KindInject:
			if e.Damaged > 0 {
				delete(committed, e.Damaged)
				delete(pending, e.Damaged)
				damaged[e.Damaged] = true
			}
		case KindResume:
			newest := 0
			for s := range committed {
				newest = max(newest, s)
			}
			ok := e.Step == newest || failpoint.Enabled(failpoint.JudgeChaosResumeUnchecked)
			if !ok && pending[e.Step] && e.Step > newest {
				ok = true // a save that was cut off after its commit: it may have committed
			}
			if !ok {
				switch {
				case e.Step > newest && damaged[e.Step]:
					bad("attempt %d: rank %d resumed from checkpoint %d, which a fault damaged: damaged state was loaded", e.Attempt, e.Rank, e.Step)
				case e.Step > newest:
					bad("attempt %d: rank %d resumed from step %d, but the newest committed checkpoint is step %d: steps %d..%d were never committed", e.Attempt, e.Rank, e.Step, newest, newest+1, e.Step)
				default:
					bad("attempt %d: rank %d resumed from step %d, but checkpoint %d was committed and intact: committed steps %d..%d lost", e.Attempt, e.Rank, e.Step, newest, e.Step+1, newest)
				}
			}
			next[k] = e.Step + 1
			lastStep[k] = e.Step
			if e.Rank == 0 {
				resumed[e.Attempt] = e.Step
			}
		case KindStep:
			want, ok := next[k]
			want = failpoint.Pick(failpoint.JudgeChaosStepOrderUnchecked, want, e.Step)
			switch {
			case !ok:
				bad("attempt %d: rank %d applied step %d before reporting where it resumed from", e.Attempt, e.Rank, e.Step)
			case e.Step < want:
				bad("attempt %d: rank %d applied step %d twice", e.Attempt, e.Rank, e.Step)
			case e.Step > want:
				bad("attempt %d: rank %d applied step %d after step %d: steps %d..%d skipped", e.Attempt, e.Rank, e.Step, want-1, want, e.Step-1)
			}
			next[k] = e.Step + 1
			lastStep[k] = e.Step
			if sc.CheckpointEvery > 0 && e.Step%sc.CheckpointEvery == 0 && !committed[e.Step] {
				pending[e.Step] = true
			}
		}
	}
	lost := map[int]int{} // attempt -> steps of it rolled back
	for a := 0; a+1 < rep.Attempts; a++ {
		if r, ok := resumed[a+1]; ok {
			if l := lastStep[key{a, 0}] - r; l > 0 {
				lost[a] = l
				rep.LostSteps += l
			}
		}
	}

	// 4. Faults.
	injected := map[string]*Event{}
	for i := range evs {
		if e := &evs[i]; e.Kind == KindInject && injected[e.Fault] == nil {
			injected[e.Fault] = e
		}
	}
	for _, in := range sc.Faults {
		ex := ExpectAt(in, run)
		fr := FaultResult{ID: in.ID, Fault: in.Fault.Name(), Rank: in.Rank, Step: in.Step, Expected: expectString(ex)}
		ie := injected[in.ID]
		if ie == nil {
			fr.Outcome = "not injected"
			bad("%s %s (rank %d, step %d) was never injected", in.ID, in.Fault.Name(), in.Rank, in.Step)
			rep.Faults = append(rep.Faults, fr)
			continue
		}
		fr.AtStep, fr.Attempt, fr.Detail = ie.Step, ie.Attempt, ie.Detail
		if d := detection(evs, ie, ex); d != nil {
			fr.DetectedBy, fr.DetectRank = d.Code, d.Rank
			fr.TTD = d.T.Sub(ie.T).Seconds()
			fr.Outcome = "detected"
			if fr.Detail == "" {
				fr.Detail = d.Detail
			}
		} else if len(ex.Detect) == 0 {
			fr.Outcome = "tolerated"
		} else if by := maskedBy(sc, run, evs, ie, injected); by != "" {
			fr.Outcome = "masked by " + by
		} else {
			fr.Outcome = "NOT DETECTED"
			bad("%s %s injected at step %d of attempt %d (rank %d) was never detected (want %s)", in.ID, in.Fault.Name(), ie.Step, ie.Attempt, in.Rank, strings.Join(codeStrings(ex.Detect), " or "))
		}
		// Recovery: the first step applied by a later attempt (for a tolerated fault whose
		// attempt another fault failed, the restart is that fault's, not this one's).
		failed := ie.Attempt+1 < rep.Attempts
		if failed && (ex.Restart || fr.Outcome != "tolerated") {
			for _, e := range evs {
				if e.Kind == KindStep && e.Attempt > ie.Attempt && e.T.After(ie.T) {
					fr.TTR = e.T.Sub(ie.T).Seconds()
					fr.Recovered = true
					break
				}
			}
			fr.LostSteps = lost[ie.Attempt]
		} else {
			fr.Recovered = rep.Finished
		}
		if ex.Restart && !failed && fr.Outcome == "detected" {
			bad("%s %s was detected but the group did not restart", in.ID, in.Fault.Name())
		}
		rep.Faults = append(rep.Faults, fr)
	}

	// Failures nothing explains: not wrong, but worth a look (a bound too tight for the load).
	for _, e := range evs {
		if e.Kind != KindDetect || e.Code == string(errs.Checkpoint) {
			continue
		}
		explained := false
		for _, ie := range injected {
			if ie.Attempt == e.Attempt && !ie.T.After(e.T) {
				explained = true
			}
		}
		if !explained {
			rep.Warnings = append(rep.Warnings, fmt.Sprintf("attempt %d: rank %d failed with %s and no fault was injected before: %s", e.Attempt, e.Rank, e.Code, e.Detail))
		}
	}
	rep.Passed = len(rep.Violations) == 0
	return rep
}

// detection is the first detect event after the injection (in its attempt, or at the resume
// of the next one) with one of the expected codes.
func detection(evs []Event, ie *Event, ex Expect) *Event {
	for i := range evs {
		e := &evs[i]
		if e.Kind != KindDetect || e.T.Before(ie.T) || e.Attempt < ie.Attempt || e.Attempt > ie.Attempt+1 {
			continue
		}
		if failpoint.Enabled(failpoint.JudgeChaosAnyCodeDetects) {
			return e
		}
		if !slices.Contains(ex.Detect, errs.Code(e.Code)) {
			continue
		}
		if (e.Code == string(errs.Desync) || e.Code == string(errs.Straggler)) && len(ex.Fields) > 0 && !slices.Contains(ex.Fields, e.Field) {
			continue // a relayed abort, the wrong field or the wrong judge: not this fault's detection
		}
		if e.Code == string(errs.Straggler) && !slices.Contains(ex.Suspects, e.Rank) && (len(ex.Suspects) > 0 || e.Rank != ie.Rank) {
			continue // another rank flagged: a false alarm, not this fault found
		}
		return e
	}
	return nil
}

// maskedBy names another fault of the same attempt that failed the group: one injected
// earlier (the group was already failing, so ie could not be told apart), or one detected
// before ie could show (a fault that needs a later event, like the next checkpoint for
// disk/full, never got it). "" when there is none. Masking never hides corruption: the bits
// are checked regardless.
func maskedBy(sc *Scenario, run Run, evs []Event, ie *Event, injected map[string]*Event) string {
	ids := slices.Sorted(maps.Keys(injected))
	for _, id := range ids {
		o := injected[id]
		if o == ie || o.Attempt != ie.Attempt {
			continue
		}
		for _, in := range sc.Faults {
			if in.ID != id || !in.Fault.Expect(run).Restart {
				continue
			}
			if !o.T.After(ie.T) {
				return id
			}
			if detection(evs, o, ExpectAt(in, run)) != nil {
				return id + " (the attempt ended first)"
			}
		}
	}
	for _, e := range evs {
		// A straggler flag fails nothing, so it masks nothing.
		if e.Kind == KindDetect && e.Code != string(errs.Straggler) && e.Attempt == ie.Attempt && e.T.Before(ie.T) {
			return "an earlier failure (" + e.Code + ")"
		}
	}
	return ""
}

func expectString(ex Expect) string {
	if len(ex.Detect) == 0 {
		return "tolerate"
	}
	s := "detect " + strings.Join(codeStrings(ex.Detect), "|")
	if len(ex.Fields) > 0 {
		s += " (E_DESYNC naming " + strings.Join(ex.Fields, "|") + ")"
	}
	return s
}

func codeStrings(cs []errs.Code) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = string(c)
	}
	return out
}

// Table renders the per-fault table and the verdict.
func (r *Report) Table() string {
	var b strings.Builder
	fmt.Fprintf(&b, "scenario %s: %d attempt(s), %d restart(s), %d step(s) lost to rollbacks\n", r.Scenario, r.Attempts, r.Restarts, r.LostSteps)
	fmt.Fprintf(&b, "%-4s %-22s %4s %5s %-14s %-16s %8s %8s %5s %s\n", "id", "fault", "rank", "step", "outcome", "detected by", "detect", "recover", "lost", "bits identical")
	for _, f := range r.Faults {
		ttd, ttr := "-", "-"
		if f.DetectedBy != "" {
			ttd = dur(f.TTD)
		}
		if f.TTR > 0 {
			ttr = dur(f.TTR)
		}
		by := f.DetectedBy
		if by != "" {
			by += "@r" + strconv.Itoa(f.DetectRank)
		} else {
			by = "-"
		}
		step := strconv.Itoa(f.AtStep)
		if f.Outcome == "not injected" {
			step = "-"
		}
		fmt.Fprintf(&b, "%-4s %-22s %4d %5s %-14s %-16s %8s %8s %5d %v\n", f.ID, f.Fault, f.Rank, step, f.Outcome, by, ttd, ttr, f.LostSteps, r.BitsIdentical)
	}
	for _, p := range r.Profiles {
		if p.Trace == "" {
			fmt.Fprintf(&b, "profile of attempt %d: %s\n", p.Attempt, p.Error)
			continue
		}
		fmt.Fprintf(&b, "profile of attempt %d: %s (%d slices)\n", p.Attempt, p.Trace, p.Slices)
		var sb strings.Builder
		profiling.WriteRankSummary(&sb, p.Ranks)
		b.WriteString(sb.String())
	}
	for _, w := range r.Warnings {
		fmt.Fprintf(&b, "warning: %s\n", w)
	}
	for _, v := range r.Violations {
		fmt.Fprintf(&b, "violation: %s\n", v)
	}
	verdict := "PASS"
	if !r.Passed {
		verdict = "FAIL"
	}
	fmt.Fprintf(&b, "verdict: %s (finished %v, bits identical %v, %d step(s) checked against the fault-free run)\n", verdict, r.Finished, r.BitsIdentical, r.StepsChecked)
	return b.String()
}

func dur(s float64) string {
	return (time.Duration(s * float64(time.Second))).Round(time.Millisecond).String()
}
