package pipeline

import (
	"fmt"
	"strings"

	"github.com/tessera-qa/tessera-qa/engine/errs"
)

// Waiter is a rank stuck at an action.
type Waiter struct {
	Rank   int
	Index  int // position in the rank's list (or compute order)
	Action Action
}

// Deadlock is a schedule that cannot finish: every unfinished rank waits.
type Deadlock struct {
	Plan    string
	Waiting []Waiter
}

func (d *Deadlock) err() error {
	parts := make([]string, len(d.Waiting))
	for i, w := range d.Waiting {
		parts[i] = fmt.Sprintf("rank %d at entry %d %s", w.Rank, w.Index, w.Action)
	}
	return errs.New(errs.Deadlock, "pipeline %s: the schedule cannot finish: %s", d.Plan, strings.Join(parts, "; "))
}

// Sim is a dry run's outcome, in virtual time: a compute action takes one unit, a message
// arrives when it is sent (Clock of the sender), a receive waits for it.
type Sim struct {
	Makespan int   // units until the last rank finishes
	Busy     []int // compute units per rank
	Finish   []int // each rank's clock at the end of its list
}

// Bubble is the idle fraction of the ranks' time: 1 - sum(Busy) / (ranks * Makespan).
func (s *Sim) Bubble() float64 {
	busy := 0
	for _, b := range s.Busy {
		busy += b
	}
	if s.Makespan == 0 {
		return 0
	}
	return 1 - float64(busy)/float64(len(s.Busy)*s.Makespan)
}

// Simulate executes every rank's list against the others (sends never block; a receive
// blocks until its message was sent) and returns the virtual-time outcome, or E_DEADLOCK naming
// each blocked rank and its action when no rank can move and some have not finished.
// It needs only p.Lists and p.Ranks, so a hand-written plan can be dry-run before validation.
func Simulate(p *Plan) (*Sim, error) {
	n := len(p.Lists)
	pc := make([]int, n)
	clock := make([]int, n)
	sim := &Sim{Busy: make([]int, n), Finish: make([]int, n)}
	arrived := map[Message]int{} // message -> the sender's clock when sent
	for {
		moved, unfinished := false, false
		for r := range n {
			for pc[r] < len(p.Lists[r]) {
				a := p.Lists[r][pc[r]]
				switch a.Kind {
				case Forward, Backward:
					clock[r]++
					sim.Busy[r]++
				case SendF, SendB:
					arrived[MessageOf(a, r)] = clock[r]
				case RecvF, RecvB:
					at, ok := arrived[MessageOf(a, r)]
					if !ok {
						goto blocked
					}
					delete(arrived, MessageOf(a, r))
					clock[r] = max(clock[r], at)
				default:
					return nil, errs.New(errs.Input, "pipeline %s: rank %d entry %d: action of unknown kind %d", p, r, pc[r], a.Kind)
				}
				pc[r]++
				moved = true
			}
			continue
		blocked:
			unfinished = true
		}
		if !unfinished {
			break
		}
		if !moved {
			d := &Deadlock{Plan: p.String()}
			for r := range n {
				if pc[r] < len(p.Lists[r]) {
					d.Waiting = append(d.Waiting, Waiter{Rank: r, Index: pc[r], Action: p.Lists[r][pc[r]]})
				}
			}
			return nil, d.err()
		}
	}
	for r := range n {
		sim.Finish[r] = clock[r]
		sim.Makespan = max(sim.Makespan, clock[r])
	}
	return sim, nil
}

// FormulaBubble is the textbook bubble of a schedule as a fraction of the total time, with
// unit-cost forwards and backwards: GPipe and 1F1B (p-1)/(m+p-1) (for 1F1B that is (p-1)/m of
// the ideal time), interleaved with v chunks (p-1)/(v*m+p-1) (the ideal's (p-1)/m divided by v).
func FormulaBubble(name string, p, m, v int) float64 {
	ideal := float64(m)
	if name == Interleaved {
		ideal = float64(m * v)
	}
	return float64(p-1) / (ideal + float64(p-1))
}
