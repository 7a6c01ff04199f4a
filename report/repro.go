package report

import (
	"context"
	"sort"
	"strings"

	"github.com/tessera-qa/tessera-qa/engine/failpoint"
	"github.com/tessera-qa/tessera-qa/harness"
	"github.com/tessera-qa/tessera-qa/report/store"
)

// reproKeyState is the tracker's judgement of one key: its digests in order of first
// appearance, which of them are accepted, and the regressions.
type reproKeyState struct {
	key     ReproKey
	digests []DigestSeen
	status  string
	regs    []ReproRegression
	runs    int
}

// ReproMatrix is the reproducibility tracker's state of every key.
func (db *DB) ReproMatrix(ctx context.Context) (ReproMatrix, error) {
	s, err := db.snapshot(ctx)
	if err != nil {
		return ReproMatrix{}, err
	}
	return s.repro, nil
}

func reproMatrix(states []*reproKeyState) ReproMatrix {
	m := ReproMatrix{Cases: []string{}, DeviceClasses: []string{}, Cells: []ReproCell{}, Regressions: []ReproRegression{}}
	type pair struct{ name, class string }
	cells := map[pair]int{}
	cases, classes := map[string]bool{}, map[string]bool{}
	for _, st := range states {
		c := ReproCell{Key: st.key, Case: st.key.Name(), Status: st.status, Digests: st.digests, Runs: st.runs}
		if len(st.regs) > 0 {
			fb, lg := st.regs[0].FirstBad, st.regs[0].LastGood
			c.FirstBad, c.LastGood = &fb, &lg
		}
		m.Regressions = append(m.Regressions, st.regs...)
		p := pair{c.Case, st.key.DeviceClass}
		cases[c.Case], classes[p.class] = true, true
		if i, ok := cells[p]; ok {
			if reproRank(c.Status) > reproRank(m.Cells[i].Status) {
				m.Cells[i] = c
			}
			continue
		}
		cells[p] = len(m.Cells)
		m.Cells = append(m.Cells, c)
	}
	for c := range cases {
		m.Cases = append(m.Cases, c)
	}
	for c := range classes {
		m.DeviceClasses = append(m.DeviceClasses, c)
	}
	sort.Strings(m.Cases)
	sort.Strings(m.DeviceClasses)
	return m
}

func reproRank(s string) int {
	switch s {
	case ReproNewDigest:
		return 3
	case ReproAcked:
		return 2
	case ReproStable:
		return 1
	}
	return 0
}

// reproStates runs the tracker over every key. A key's first digest (in run time order) is
// accepted; a later one is accepted only by an acknowledgement naming it; any other is a
// regression, reported with the first run that showed it and the last run before that with an
// accepted digest. Keys whose determinism mode makes no bitwise promise are listed, never
// flagged.
func (db *DB) reproStates(ctx context.Context, ix *runIndex) ([]*reproKeyState, error) {
	rows, err := db.st.Digests(ctx)
	if err != nil {
		return nil, err
	}
	acked := map[string]map[string]*Ack{} // key -> digest -> ack
	for _, a := range ix.acks {
		if a.Kind != AckRepro {
			continue
		}
		if acked[a.Target] == nil {
			acked[a.Target] = map[string]*Ack{}
		}
		ack := ackOf(a)
		acked[a.Target][a.Digest] = &ack
	}
	byKey := map[ReproKey][]store.DigestRow{}
	var keys []ReproKey
	for _, r := range rows {
		k := reproKeyOf(r.Key)
		if _, ok := byKey[k]; !ok {
			keys = append(keys, k)
		}
		byKey[k] = append(byKey[k], r)
	}
	var out []*reproKeyState
	for _, k := range keys {
		acks := acked[k.String()]
		if k.Computation != "" {
			// An acknowledgement naming the case (`report ack repro --case`) covers every
			// computation of it; one naming the computation too covers only that one.
			base := k
			base.Computation = ""
			if more := acked[base.String()]; len(more) > 0 {
				merged := map[string]*Ack{}
				for d, a := range more {
					merged[d] = a
				}
				for d, a := range acks {
					merged[d] = a
				}
				acks = merged
			}
		}
		st, err := db.reproState(ctx, ix, k, byKey[k], acks)
		if err != nil {
			return nil, err
		}
		out = append(out, st)
	}
	return out, nil
}

func (db *DB) reproState(ctx context.Context, ix *runIndex, k ReproKey, rows []store.DigestRow, acks map[string]*Ack) (*reproKeyState, error) {
	sort.Slice(rows, func(i, j int) bool { return ix.order(rows[i].FirstRun) < ix.order(rows[j].FirstRun) })
	st := &reproKeyState{key: k, status: ReproStable}
	tracked := k.Determinism == harness.DeterminismBitwise
	var bad []int
	for i, r := range rows {
		d := DigestSeen{Digest: r.Digest, First: ix.ref(r.FirstRun), Last: ix.ref(r.LastRun), Count: r.Count}
		st.runs += r.Count
		switch {
		case i == failpoint.Pick(failpoint.JudgeReportReproNewestIsFirst, 0, len(rows)-1):
			d.Accepted = true
		case acks[r.Digest] != nil || (len(acks) > 0 && failpoint.Enabled(failpoint.JudgeReportReproAckAnyDigest)):
			d.Accepted, d.Acked = true, acks[r.Digest]
		default:
			bad = append(bad, i)
		}
		st.digests = append(st.digests, d)
	}
	switch {
	case !tracked:
		st.status = ReproUntracked
		return st, nil
	case len(bad) > 0:
		st.status = ReproNewDigest
	case len(rows) > 1:
		st.status = ReproAcked
	}
	if len(bad) == 0 {
		return st, nil
	}
	// The last good run: a plain read of the digests table answers when no accepted digest
	// was seen after the new one; otherwise the key's history decides.
	var hist []store.RunDigest
	for _, i := range bad {
		d := st.digests[i]
		firstBad := ix.order(rows[i].FirstRun)
		lastGood, prev, clean := int64(0), "", true
		for _, a := range st.digests {
			if !a.Accepted {
				continue
			}
			lo := ix.order(a.Last.ID)
			if lo > firstBad {
				clean = false
			} else if lo >= ix.order(lastGood) || lastGood == 0 {
				lastGood, prev = a.Last.ID, a.Digest
			}
		}
		if !clean {
			if hist == nil {
				var err error
				if hist, err = db.st.CaseHistory(ctx, k.store()); err != nil {
					return nil, err
				}
			}
			lastGood, prev = lastAccepted(hist, st.digests, ix, firstBad)
		}
		st.regs = append(st.regs, ReproRegression{Key: k, Digest: d.Digest, Previous: prev,
			FirstBad: d.First, LastGood: ix.ref(lastGood)})
	}
	return st, nil
}

// lastAccepted is the last run before position firstBad whose digest is accepted.
func lastAccepted(hist []store.RunDigest, ds []DigestSeen, ix *runIndex, firstBad int) (int64, string) {
	ok := map[string]bool{}
	for _, d := range ds {
		if d.Accepted {
			ok[d.Digest] = true
		}
	}
	var id int64
	var dg string
	for _, h := range hist {
		if ix.order(h.RunID) < firstBad && ok[h.Digest] {
			id, dg = h.RunID, h.Digest
		}
	}
	return id, dg
}

// matchDigest finds the digest of key k that starts with prefix (acks may name a prefix).
func matchDigest(ds []DigestSeen, prefix string) (string, int) {
	var found string
	n := 0
	for _, d := range ds {
		if strings.HasPrefix(d.Digest, prefix) {
			found = d.Digest
			n++
		}
	}
	return found, n
}
