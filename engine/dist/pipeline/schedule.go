package pipeline

import (
	"fmt"
	"slices"
	"strings"

	"github.com/tessera-qa/tessera-qa/engine/errs"
)

// Kind is what an action does.
type Kind uint8

const (
	Forward  Kind = iota + 1 // run stage Stage's forward on micro-batch MB
	Backward                 // run stage Stage's backward on micro-batch MB
	SendF                    // send stage Stage's forward output of MB to Peer (stage Stage+1)
	RecvF                    // receive stage Stage's forward input of MB from Peer (stage Stage-1)
	SendB                    // send the gradient of stage Stage's input of MB to Peer (stage Stage-1)
	RecvB                    // receive the gradient of stage Stage's output of MB from Peer (stage Stage+1)
)

var kindNames = [...]string{Forward: "F", Backward: "B", SendF: "SEND_F", RecvF: "RECV_F", SendB: "SEND_B", RecvB: "RECV_B"}

func (k Kind) String() string {
	if int(k) < len(kindNames) && kindNames[k] != "" {
		return kindNames[k]
	}
	return fmt.Sprintf("kind%d", k)
}

// Compute reports whether the action runs a stage (forward or backward).
func (k Kind) Compute() bool { return k == Forward || k == Backward }

// Action is one step of a rank's list.
type Action struct {
	Kind  Kind
	Stage int // global stage index
	MB    int // micro-batch
	Peer  int // send and receive: the other rank
}

func (a Action) String() string {
	switch a.Kind {
	case SendF, SendB:
		return fmt.Sprintf("%s(mb%d,s%d->r%d)", a.Kind, a.MB, a.Stage, a.Peer)
	case RecvF, RecvB:
		return fmt.Sprintf("%s(mb%d,s%d<-r%d)", a.Kind, a.MB, a.Stage, a.Peer)
	}
	return fmt.Sprintf("%s(mb%d,s%d)", a.Kind, a.MB, a.Stage)
}

// Names of the schedules Compile knows.
const (
	GPipe       = "gpipe"
	OneFOneB    = "1f1b"
	Interleaved = "interleaved"
)

// Schedules lists them.
var Schedules = []string{GPipe, OneFOneB, Interleaved}

// Plan is a compiled schedule.
type Plan struct {
	Name   string
	Ranks  int // pipeline ranks p
	Micro  int // micro-batches m
	Chunks int // stages per rank v
	// Grid[r][t] is rank r's compute action in time step t (nil: idle). Every compute action
	// takes one time step.
	Grid [][]*Action
	// Lists[r] is rank r's lowered list: the grid's compute actions in order with the sends
	// and receives they need (Lower).
	Lists [][]Action
}

// Stages is the number of stages, Ranks*Chunks.
func (p *Plan) Stages() int { return p.Ranks * p.Chunks }

// RankOf is the rank that holds stage s.
func (p *Plan) RankOf(s int) int { return s % p.Ranks }

func (p *Plan) String() string {
	return fmt.Sprintf("%s p=%d m=%d v=%d", p.Name, p.Ranks, p.Micro, p.Chunks)
}

// Compile builds schedule name for p ranks, m micro-batches and v chunks per rank (v must be
// 1 except for interleaved, which needs v >= 2 and m a multiple of p), assigns time steps,
// lowers it and validates it.
func Compile(name string, p, m, v int) (*Plan, error) {
	if p < 1 || m < 1 || v < 1 {
		return nil, errs.New(errs.Input, "pipeline: need ranks, micro-batches and chunks >= 1 (got p=%d m=%d v=%d)", p, m, v)
	}
	var orders [][]Action
	switch name {
	case GPipe, OneFOneB:
		if v != 1 {
			return nil, errs.New(errs.Input, "pipeline: schedule %s has one chunk per rank (got %d); interleaved has several", name, v)
		}
		orders = make([][]Action, p)
		for r := range p {
			orders[r] = order(name, p, m, r)
		}
	case Interleaved:
		if v < 2 {
			return nil, errs.New(errs.Input, "pipeline: interleaved needs at least 2 chunks per rank (got %d)", v)
		}
		if m%p != 0 {
			return nil, errs.New(errs.Input, "pipeline: interleaved needs the micro-batches (%d) to be a multiple of the ranks (%d)", m, p)
		}
		orders = make([][]Action, p)
		for r := range p {
			orders[r] = interleavedOrder(p, m, v, r)
		}
	default:
		return nil, errs.New(errs.Input, "pipeline: unknown schedule %q (have %s)", name, strings.Join(Schedules, ", "))
	}
	plan := &Plan{Name: name, Ranks: p, Micro: m, Chunks: v}
	grid, err := Timetable(plan, orders)
	if err != nil {
		return nil, err
	}
	plan.Grid = grid
	plan.Lists = Lower(plan)
	if err := Validate(plan); err != nil {
		return nil, err
	}
	return plan, nil
}

// order is rank r's compute order for GPipe (all forwards, then all backwards) or 1F1B
// (p-r-1 warm-up forwards, then one forward and one backward in turn, then the remaining
// backwards), one chunk per rank.
func order(name string, p, m, r int) []Action {
	f := func(mb int) Action { return Action{Kind: Forward, Stage: r, MB: mb} }
	b := func(mb int) Action { return Action{Kind: Backward, Stage: r, MB: mb} }
	var out []Action
	if name == GPipe {
		for i := range m {
			out = append(out, f(i))
		}
		for i := range m {
			out = append(out, b(i))
		}
		return out
	}
	warm := min(p-r-1, m)
	for i := range warm {
		out = append(out, f(i))
	}
	for i := range m - warm {
		out = append(out, f(warm+i), b(i))
	}
	for i := m - warm; i < m; i++ {
		out = append(out, b(i))
	}
	return out
}

// interleavedOrder is Megatron-LM's interleaved 1F1B for rank r: the forward sequence takes the
// micro-batches in groups of p, each group through chunk 0, then chunk 1 ...; the backward
// sequence likewise with the chunks from the last; (p-r-1)*2 + (v-1)*p warm-up forwards, then
// forward and backward in turn, then the remaining backwards.
func interleavedOrder(p, m, v, r int) []Action {
	total := m * v
	fwd := make([]Action, 0, total)
	bwd := make([]Action, 0, total)
	for k := range total {
		group, within := k/(p*v), k%(p*v)
		chunk, mb := within/p, group*p+within%p
		fwd = append(fwd, Action{Kind: Forward, Stage: chunk*p + r, MB: mb})
		bwd = append(bwd, Action{Kind: Backward, Stage: (v-1-chunk)*p + r, MB: mb})
	}
	warm := min((p-r-1)*2+(v-1)*p, total)
	out := slices.Clone(fwd[:warm])
	fi, bi := warm, 0
	for fi < total {
		out = append(out, fwd[fi], bwd[bi])
		fi++
		bi++
	}
	return append(out, bwd[bi:]...)
}

// Timetable assigns time steps to every rank's compute order: in each step a rank runs its next
// action if everything it depends on (the previous stage's forward of the micro-batch, the
// next stage's backward, its own forward) finished in an earlier step, and idles otherwise.
// An order that can never finish is E_DEADLOCK naming each rank's waiting action.
func Timetable(p *Plan, orders [][]Action) ([][]*Action, error) {
	S := p.Stages()
	type key struct {
		k     Kind
		s, mb int
	}
	done := map[key]int{} // finished at the end of this step
	next := make([]int, len(orders))
	grid := make([][]*Action, len(orders))
	left := 0
	for _, o := range orders {
		left += len(o)
	}
	ready := func(a Action, t int) bool {
		dep := func(k key) bool { d, ok := done[k]; return ok && d < t }
		switch a.Kind {
		case Forward:
			return a.Stage == 0 || dep(key{Forward, a.Stage - 1, a.MB})
		case Backward:
			if !dep(key{Forward, a.Stage, a.MB}) {
				return false
			}
			return a.Stage == S-1 || dep(key{Backward, a.Stage + 1, a.MB})
		}
		return false
	}
	for t := 0; left > 0; t++ {
		progressed := false
		for r, o := range orders {
			if next[r] >= len(o) {
				continue
			}
			a := o[next[r]]
			if !ready(a, t) {
				grid[r] = append(grid[r], nil)
				continue
			}
			grid[r] = append(grid[r], &a)
			done[key{a.Kind, a.Stage, a.MB}] = t
			next[r]++
			left--
			progressed = true
		}
		if !progressed {
			// Nothing ran: nothing can ever run again (done only grows in steps that run).
			d := &Deadlock{Plan: p.String()}
			for r, o := range orders {
				if next[r] < len(o) {
					d.Waiting = append(d.Waiting, Waiter{Rank: r, Index: next[r], Action: o[next[r]]})
				}
			}
			return nil, d.err()
		}
	}
	for r := range grid { // trailing idle steps are not part of the grid
		for len(grid[r]) > 0 && grid[r][len(grid[r])-1] == nil {
			grid[r] = grid[r][:len(grid[r])-1]
		}
	}
	return grid, nil
}
