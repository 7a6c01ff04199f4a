package pipeline

import (
	"github.com/tessera-qa/tessera-qa/engine/errs"
)

// The rules Validate checks, as named in its errors.
const (
	RuleOnce          = "each-action-once"          // every forward and backward of every stage and micro-batch exactly once, on the stage's rank
	RuleSameStep      = "micro-batch-once-per-step" // no micro-batch on two ranks in one time step
	RuleForwardFirst  = "forward-before-backward"   // a stage's backward of a micro-batch after its forward
	RuleStageOrder    = "stage-order"               // forwards from the first stage up, backwards from the last down
	RuleListsMatch    = "lists-match-grid"          // a rank's list runs its grid's compute actions in order
	RuleMessagesMatch = "send-received-once"        // every send has exactly one receive and the other way round
)

// Validate checks a plan before anything runs; the first broken rule is E_INPUT naming the rule,
// the rank, the time step and the action.
func Validate(p *Plan) error {
	S, m := p.Stages(), p.Micro
	if len(p.Grid) != p.Ranks || len(p.Lists) != p.Ranks {
		return errs.New(errs.Input, "pipeline %s: grid of %d ranks and %d lists, want %d", p, len(p.Grid), len(p.Lists), p.Ranks)
	}
	type key struct {
		k     Kind
		s, mb int
	}
	at := map[key]int{}
	for r, row := range p.Grid {
		for t, a := range row {
			if a == nil {
				continue
			}
			if !a.Kind.Compute() || a.Stage < 0 || a.Stage >= S || a.MB < 0 || a.MB >= m {
				return ruleErr(p, RuleOnce, r, t, *a, "is not a forward or backward of a stage in [0,%d) and a micro-batch in [0,%d)", S, m)
			}
			if p.RankOf(a.Stage) != r {
				return ruleErr(p, RuleOnce, r, t, *a, "is on rank %d, stage %d lives on rank %d", r, a.Stage, p.RankOf(a.Stage))
			}
			k := key{a.Kind, a.Stage, a.MB}
			if t0, dup := at[k]; dup {
				return ruleErr(p, RuleOnce, r, t, *a, "runs twice (steps %d and %d)", t0, t)
			}
			at[k] = t
		}
	}
	for s := range S {
		for mb := range m {
			for _, k := range []Kind{Forward, Backward} {
				if _, ok := at[key{k, s, mb}]; !ok {
					a := Action{Kind: k, Stage: s, MB: mb}
					return ruleErr(p, RuleOnce, p.RankOf(s), -1, a, "never runs")
				}
			}
		}
	}
	// One time step: each micro-batch on at most one rank.
	steps := 0
	for _, row := range p.Grid {
		steps = max(steps, len(row))
	}
	for t := range steps {
		seen := map[int]int{} // mb -> rank
		for r, row := range p.Grid {
			if t >= len(row) || row[t] == nil {
				continue
			}
			a := row[t]
			if r0, ok := seen[a.MB]; ok {
				return ruleErr(p, RuleSameStep, r, t, *a, "shares step %d with rank %d's action on micro-batch %d", t, r0, a.MB)
			}
			seen[a.MB] = r
		}
	}
	for s := range S { // in a fixed order, so the same plan always reports the same rule
		for mb := range m {
			for _, kd := range []Kind{Forward, Backward} {
				k := key{kd, s, mb}
				t := at[k]
				a := Action{Kind: k.k, Stage: k.s, MB: k.mb}
				r := p.RankOf(k.s)
				if k.k == Backward && at[key{Forward, k.s, k.mb}] >= t {
					return ruleErr(p, RuleForwardFirst, r, t, a, "runs at step %d, its forward at step %d", t, at[key{Forward, k.s, k.mb}])
				}
				if k.k == Forward && k.s > 0 && at[key{Forward, k.s - 1, k.mb}] >= t {
					return ruleErr(p, RuleStageOrder, r, t, a, "runs at step %d, the forward of stage %d at step %d", t, k.s-1, at[key{Forward, k.s - 1, k.mb}])
				}
				if k.k == Backward && k.s < S-1 && at[key{Backward, k.s + 1, k.mb}] >= t {
					return ruleErr(p, RuleStageOrder, r, t, a, "runs at step %d, the backward of stage %d at step %d", t, k.s+1, at[key{Backward, k.s + 1, k.mb}])
				}
			}
		}
	}
	// The lists: the grid's compute actions in order, and sends matched with receives.
	sent, recvd := map[Message]int{}, map[Message]int{}
	for r, list := range p.Lists {
		var want []Action
		for _, a := range p.Grid[r] {
			if a != nil {
				want = append(want, *a)
			}
		}
		i := 0
		for j, a := range list {
			switch a.Kind {
			case Forward, Backward:
				if i >= len(want) || a != want[i] {
					return ruleErr(p, RuleListsMatch, r, j, a, "is entry %d of the list; the grid's next compute action differs", j)
				}
				i++
			case SendF, SendB, RecvF, RecvB:
				if a.Peer < 0 || a.Peer >= p.Ranks || a.Peer == r {
					return ruleErr(p, RuleMessagesMatch, r, j, a, "names peer %d", a.Peer)
				}
				msg := MessageOf(a, r)
				if a.Kind == SendF || a.Kind == SendB {
					sent[msg]++
				} else {
					recvd[msg]++
				}
			default:
				return ruleErr(p, RuleListsMatch, r, j, a, "is of no known kind")
			}
		}
		if i != len(want) {
			return ruleErr(p, RuleListsMatch, r, len(list), want[i], "is in the grid but not in the list")
		}
	}
	for r, list := range p.Lists { // in list order, so the report does not depend on map order
		for _, a := range list {
			if a.Kind.Compute() {
				continue
			}
			msg := MessageOf(a, r)
			if n := sent[msg]; n != 1 || recvd[msg] != 1 {
				return errs.New(errs.Input, "pipeline %s: rule %s: %s on rank %d: rank %d sends %s of mb%d stage %d to rank %d %d time(s), rank %d receives it %d time(s)",
					p, RuleMessagesMatch, a, r, msg.From, msg.Kind, msg.MB, msg.Stage, msg.To, n, msg.To, recvd[msg])
			}
		}
	}
	return nil
}

func ruleErr(p *Plan, rule string, r, t int, a Action, format string, args ...any) error {
	where := "rank %d step %d"
	if t < 0 {
		where = "rank %d"
		return errs.New(errs.Input, "pipeline %s: rule %s: "+where+": %s "+format, append([]any{p, rule, r, a}, args...)...)
	}
	return errs.New(errs.Input, "pipeline %s: rule %s: "+where+": %s "+format, append([]any{p, rule, r, t, a}, args...)...)
}
