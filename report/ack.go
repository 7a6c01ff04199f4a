package report

import (
	"context"
	"os"
	"strings"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/report/parse"
	"github.com/tessera-qa/tessera-qa/report/store"
)

// Acks lists every acknowledgement and baseline reset, oldest first.
func (db *DB) Acks(ctx context.Context) ([]Ack, error) {
	rows, err := db.st.Acks(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]Ack, len(rows))
	for i, a := range rows {
		out[i] = ackOf(a)
	}
	return out, nil
}

// Who is recorded as the author of an acknowledgement when the caller names nobody.
func Who() string {
	for _, k := range []string{"TESSERA_USER", "GITHUB_ACTOR", "USER", "LOGNAME"} {
		if v := os.Getenv(k); v != "" {
			return v
		}
	}
	return "unknown"
}

func (db *DB) addAck(ctx context.Context, a store.AckRow) (Ack, error) {
	a.Reason = strings.TrimSpace(a.Reason)
	if a.Reason == "" {
		return Ack{}, errs.New(errs.Input, "ack %s %s: a reason is required", a.Kind, a.Target)
	}
	a.Reason = parse.Text(a.Reason)
	if a.By == "" {
		a.By = Who()
	}
	c := parse.NewChecker("ack")
	c.Ident("ack", "by", a.By, true)
	if err := c.Err(); err != nil {
		return Ack{}, err
	}
	a.Created = time.Now()
	id, err := db.st.AddAck(ctx, a)
	if err != nil {
		return Ack{}, err
	}
	a.ID = id
	return ackOf(a), nil
}

// AckRepro accepts a new digest of the cases matching k (an empty Determinism matches any
// mode). digest may be a prefix; empty means the one unaccepted digest the key has.
func (db *DB) AckRepro(ctx context.Context, k ReproKey, digest, reason, by string) (Ack, error) {
	ix, err := db.loadRuns(ctx)
	if err != nil {
		return Ack{}, err
	}
	states, err := db.reproStates(ctx, ix)
	if err != nil {
		return Ack{}, err
	}
	var hits []*reproKeyState
	for _, st := range states {
		if st.key.Suite == k.Suite && st.key.Case == k.Case && st.key.DeviceClass == k.DeviceClass &&
			(k.Determinism == "" || st.key.Determinism == k.Determinism) {
			hits = append(hits, st)
		}
	}
	switch {
	case len(hits) == 0:
		return Ack{}, errs.New(errs.Input, "ack repro: no results for %s", k)
	case len(hits) > 1:
		return Ack{}, errs.New(errs.Input, "ack repro: %s exists in %d determinism modes; name one", k, len(hits))
	}
	st := hits[0]
	if digest == "" {
		var news []string
		for _, d := range st.digests {
			if !d.Accepted {
				news = append(news, d.Digest)
			}
		}
		if len(news) != 1 {
			return Ack{}, errs.New(errs.Input, "ack repro %s: %d unaccepted digests; name the one to accept with --digest", st.key, len(news))
		}
		digest = news[0]
	} else {
		full, n := matchDigest(st.digests, digest)
		if n != 1 {
			return Ack{}, errs.New(errs.Input, "ack repro %s: digest %q matches %d digests of this case", st.key, clip(digest), n)
		}
		digest = full
	}
	return db.addAck(ctx, store.AckRow{Kind: AckRepro, Target: st.key.String(), Digest: digest, Reason: reason, By: by})
}

// AckPerf accepts the slowdown of series id shown at run runID (0: the series' latest run).
func (db *DB) AckPerf(ctx context.Context, id string, runID int64, reason, by string) (Ack, error) {
	run, err := db.seriesRun(ctx, id, runID)
	if err != nil {
		return Ack{}, err
	}
	return db.addAck(ctx, store.AckRow{Kind: AckPerf, Target: id, RunID: run, Reason: reason, By: by})
}

// ResetBaseline restarts series id's baseline at run runID (0: its latest run): earlier runs
// are no longer compared with.
func (db *DB) ResetBaseline(ctx context.Context, id string, runID int64, reason, by string) (Ack, error) {
	run, err := db.seriesRun(ctx, id, runID)
	if err != nil {
		return Ack{}, err
	}
	return db.addAck(ctx, store.AckRow{Kind: AckBaseline, Target: id, RunID: run, Reason: reason, By: by})
}

// seriesRun checks that series id has a point at runID (0: picks its latest) and returns it.
func (db *DB) seriesRun(ctx context.Context, id string, runID int64) (int64, error) {
	key, ok, err := db.SeriesByID(ctx, id)
	if err != nil {
		return 0, err
	}
	if !ok {
		return 0, errs.New(errs.Input, "no series with id %q (see `tessera-qa report series`)", clip(id))
	}
	s, err := db.Series(ctx, key)
	if err != nil {
		return 0, err
	}
	if runID == 0 {
		return s.Points[len(s.Points)-1].Run.ID, nil
	}
	for _, p := range s.Points {
		if p.Run.ID == runID {
			return runID, nil
		}
	}
	return 0, errs.New(errs.Input, "series %s has no point in run %d", key, runID)
}
