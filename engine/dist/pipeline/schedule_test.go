package pipeline

import (
	"math"
	"strings"
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/errs"
)

func mustCompile(t *testing.T, name string, p, m, v int) *Plan {
	t.Helper()
	plan, err := Compile(name, p, m, v)
	if err != nil {
		t.Fatalf("%s p=%d m=%d v=%d: %v", name, p, m, v, err)
	}
	return plan
}

// Every schedule compiles, validates, dry-runs to the end, and its bubble in virtual time
// (unit-cost forwards and backwards) is the textbook formula's, and the same as the grid's.
func TestSchedulesRunAndTheirBubbleIsTheFormula(t *testing.T) {
	cases := []struct {
		name    string
		p, m, v int
	}{
		{GPipe, 1, 4, 1}, {GPipe, 2, 4, 1}, {GPipe, 4, 8, 1}, {GPipe, 4, 3, 1},
		{OneFOneB, 2, 4, 1}, {OneFOneB, 4, 8, 1}, {OneFOneB, 4, 2, 1}, {OneFOneB, 3, 7, 1},
		{Interleaved, 2, 4, 2}, {Interleaved, 4, 8, 2}, {Interleaved, 2, 8, 3}, {Interleaved, 4, 4, 2},
	}
	for _, c := range cases {
		plan := mustCompile(t, c.name, c.p, c.m, c.v)
		sim, err := Simulate(plan)
		if err != nil {
			t.Fatalf("%s: %v", plan, err)
		}
		grid := 0
		for _, row := range plan.Grid {
			grid = max(grid, len(row))
		}
		if sim.Makespan != grid {
			t.Errorf("%s: dry run takes %d units, the grid %d steps", plan, sim.Makespan, grid)
		}
		for r, b := range sim.Busy {
			if b != 2*c.m*c.v {
				t.Errorf("%s: rank %d computes %d units, want %d", plan, r, b, 2*c.m*c.v)
			}
		}
		want := FormulaBubble(c.name, c.p, c.m, c.v)
		if got := sim.Bubble(); math.Abs(got-want) > 1e-12 {
			t.Errorf("%s: bubble %.6f, formula %.6f", plan, got, want)
		}
	}
}

// 1F1B keeps at most p-r micro-batches in flight on rank r (its memory bound), GPipe all m.
func TestOneFOneBBoundsTheMicroBatchesInFlight(t *testing.T) {
	for _, name := range []string{OneFOneB, GPipe} {
		plan := mustCompile(t, name, 4, 8, 1)
		for r, row := range plan.Grid {
			inflight, peak := 0, 0
			for _, a := range row {
				if a == nil {
					continue
				}
				if a.Kind == Forward {
					inflight++
				} else {
					inflight--
				}
				peak = max(peak, inflight)
			}
			want := 4 - r
			if name == GPipe {
				want = 8
			}
			if peak != want {
				t.Errorf("%s rank %d: %d micro-batches in flight at most, want %d", name, r, peak, want)
			}
		}
	}
}

func TestCompileRefusesBadArguments(t *testing.T) {
	for _, c := range []struct {
		name    string
		p, m, v int
		want    string
	}{
		{"zigzag", 2, 4, 1, "unknown schedule"},
		{GPipe, 0, 4, 1, ">= 1"},
		{OneFOneB, 2, 4, 2, "one chunk"},
		{Interleaved, 2, 4, 1, "at least 2 chunks"},
		{Interleaved, 4, 6, 2, "multiple of the ranks"},
	} {
		_, err := Compile(c.name, c.p, c.m, c.v)
		if errs.CodeOf(err) != errs.Input || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Compile(%s,%d,%d,%d) = %v, want E_INPUT with %q", c.name, c.p, c.m, c.v, err, c.want)
		}
	}
}

// edit compiles 1F1B p=2 m=2, changes the grid, lowers it again and validates.
func edit(t *testing.T, f func(g [][]*Action)) error {
	t.Helper()
	plan := mustCompile(t, OneFOneB, 2, 2, 1)
	f(plan.Grid)
	plan.Lists = Lower(plan)
	return Validate(plan)
}

func find(g [][]*Action, k Kind, s, mb int) (int, int) {
	for r, row := range g {
		for t, a := range row {
			if a != nil && a.Kind == k && a.Stage == s && a.MB == mb {
				return r, t
			}
		}
	}
	return -1, -1
}

// One negative test per rule: each broken plan is refused, naming that rule.
func TestValidatorRefusesEachBrokenRule(t *testing.T) {
	// 1F1B p=2 m=2 grid: rank 0: F0 F1 . . B0 B1 ... (the exact steps come from Timetable)
	cases := []struct {
		rule string
		f    func(g [][]*Action)
	}{
		{RuleOnce + "/twice", func(g [][]*Action) { // a forward repeated at the end
			r, t := find(g, Forward, 0, 0)
			a := *g[r][t]
			g[r] = append(g[r], nil, nil, nil, nil, nil, nil, &a)
		}},
		{RuleOnce + "/never", func(g [][]*Action) { r, t := find(g, Backward, 0, 1); g[r][t] = nil }},
		{RuleOnce + "/wrong-rank", func(g [][]*Action) { // stage 1's last backward moved to rank 0
			r, t := find(g, Backward, 1, 1)
			a := g[r][t]
			g[r][t] = nil
			g[0] = append(g[0], nil, nil, nil, nil, nil, nil, a)
		}},
		{RuleSameStep, func(g [][]*Action) { // stage 1's forward of mb0 in the step of stage 0's
			r, t := find(g, Forward, 1, 0)
			_, t0 := find(g, Forward, 0, 0)
			g[r][t0], g[r][t] = g[r][t], g[r][t0]
		}},
		{RuleForwardFirst, func(g [][]*Action) { // on the last stage, B(mb0) before F(mb0)
			r, tf := find(g, Forward, 1, 0)
			_, tb := find(g, Backward, 1, 0)
			g[r][tf], g[r][tb] = g[r][tb], g[r][tf]
		}},
		{RuleStageOrder + "/forward", func(g [][]*Action) { // stage 1's F(mb1) before stage 0's
			r, t := find(g, Forward, 1, 1)
			_, t0 := find(g, Forward, 0, 1)
			a := g[r][t]
			g[r][t] = nil
			for len(g[r]) <= t0-1 {
				g[r] = append(g[r], nil)
			}
			if g[r][t0-1] != nil {
				panic("test layout changed")
			}
			g[r][t0-1] = a
		}},
		{RuleStageOrder + "/backward", func(g [][]*Action) { // stage 0's B(mb1) long before stage 1's
			r, t := find(g, Backward, 0, 1)
			_, t1 := find(g, Backward, 1, 1)
			_, tf := find(g, Forward, 0, 1)
			for u := tf + 1; u < t1; u++ {
				if g[r][u] == nil {
					g[r][u], g[r][t] = g[r][t], nil
					return
				}
			}
			panic("no free step between")
		}},
	}
	for _, c := range cases {
		rule := strings.Split(c.rule, "/")[0]
		err := edit(t, c.f)
		if errs.CodeOf(err) != errs.Input || !strings.Contains(err.Error(), "rule "+rule+":") {
			t.Errorf("%s: Validate = %v, want E_INPUT naming rule %s", c.rule, err, rule)
		}
	}
	// The lists' rules: a compute action missing from a list, a receive without its send.
	plan := mustCompile(t, OneFOneB, 2, 2, 1)
	plan.Lists[1] = plan.Lists[1][1:] // rank 1 drops its first receive
	if err := Validate(plan); !strings.Contains(err.Error(), "rule "+RuleMessagesMatch+":") {
		t.Errorf("dropped receive: %v, want rule %s", err, RuleMessagesMatch)
	}
	plan = mustCompile(t, OneFOneB, 2, 2, 1)
	l := plan.Lists[0]
	for i, a := range l {
		if a.Kind == Forward && a.MB == 1 {
			plan.Lists[0] = append(l[:i:i], l[i+1:]...)
			break
		}
	}
	if err := Validate(plan); !strings.Contains(err.Error(), "rule "+RuleListsMatch+":") {
		t.Errorf("dropped forward: %v, want rule %s", err, RuleListsMatch)
	}
	if err := Validate(mustCompile(t, Interleaved, 4, 8, 2)); err != nil {
		t.Errorf("a compiled plan: %v", err)
	}
}

// A deliberately deadlocking schedule: rank 0 waits for the gradient of a micro-batch before
// sending that micro-batch's activations; rank 1 waits for the activations. The dry run
// refuses it, naming both ranks and the actions they wait at.
func TestSimulatorRefusesADeadlockNamingRanksAndActions(t *testing.T) {
	plan := &Plan{Name: "hand", Ranks: 2, Micro: 1, Chunks: 1, Lists: [][]Action{
		{{Kind: RecvB, Stage: 0, MB: 0, Peer: 1}, {Kind: Forward, Stage: 0, MB: 0}, {Kind: SendF, Stage: 0, MB: 0, Peer: 1}, {Kind: Backward, Stage: 0, MB: 0}},
		{{Kind: RecvF, Stage: 1, MB: 0, Peer: 0}, {Kind: Forward, Stage: 1, MB: 0}, {Kind: Backward, Stage: 1, MB: 0}, {Kind: SendB, Stage: 1, MB: 0, Peer: 0}},
	}}
	_, err := Simulate(plan)
	if errs.CodeOf(err) != errs.Deadlock {
		t.Fatalf("Simulate = %v, want E_DEADLOCK", err)
	}
	for _, want := range []string{"rank 0 at entry 0 RECV_B(mb0,s0<-r1)", "rank 1 at entry 0 RECV_F(mb0,s1<-r0)"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%v: does not name %q", err, want)
		}
	}
	// Send before receive on rank 0: the same lists run.
	plan.Lists[0] = []Action{plan.Lists[0][1], plan.Lists[0][2], plan.Lists[0][0], plan.Lists[0][3]}
	if _, err := Simulate(plan); err != nil {
		t.Errorf("the reordered lists: %v", err)
	}
}

// A compute order that waits on itself (backward before the forward it needs) is refused when
// the time steps are assigned.
func TestTimetableRefusesAnOrderThatCannotFinish(t *testing.T) {
	plan := &Plan{Name: "hand", Ranks: 2, Micro: 2, Chunks: 1}
	orders := [][]Action{order(OneFOneB, 2, 2, 0), order(OneFOneB, 2, 2, 1)}
	orders[0][0], orders[0][2] = orders[0][2], orders[0][0] // rank 0 starts with B(mb0)
	_, err := Timetable(plan, orders)
	if errs.CodeOf(err) != errs.Deadlock || !strings.Contains(err.Error(), "rank 0 at entry 0 B(mb0,s0)") {
		t.Fatalf("Timetable = %v, want E_DEADLOCK naming rank 0's backward", err)
	}
}
