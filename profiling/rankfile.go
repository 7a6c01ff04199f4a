package profiling

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/profile"
)

// RankRecord is what one rank of a distributed run records (`train --profile DIR` writes
// DIR/rank-N.json per rank): its steps, kernel launches and collectives on the wall clock the
// ranks of one host share.
type RankRecord struct {
	Rank        int                  `json:"rank"`
	Steps       []StepSpan           `json:"steps"`
	Launches    []profile.Launch     `json:"launches"`
	Collectives []profile.Collective `json:"collectives"`
}

// StepSpan is one training step of a rank.
type StepSpan struct {
	Step  int           `json:"step"`
	Start time.Time     `json:"start"`
	Dur   time.Duration `json:"dur_ns"`
}

// WriteRankRecord writes rec to dir/rank-N.json.
func WriteRankRecord(dir string, rec RankRecord) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return errs.New(errs.Input, "profile %s: %v", dir, err)
	}
	data, err := json.Marshal(rec)
	if err != nil {
		return errs.New(errs.Internal, "profile: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("rank-%d.json", rec.Rank)), data, 0o644); err != nil {
		return errs.New(errs.Input, "profile %s: %v", dir, err)
	}
	return nil
}

// LoadRanks reads every rank-N.json of dir and turns each into a timeline: compute spans from
// launches, communication spans from collectives (with op, bytes, peers, mode), the rank's step
// time the sum of its steps; origin is the earliest step start.
func LoadRanks(dir string) ([]RankTimeline, time.Time, error) {
	paths, _ := filepath.Glob(filepath.Join(dir, "rank-*.json"))
	if len(paths) == 0 {
		return nil, time.Time{}, errs.New(errs.Input, "profile %s: no rank-N.json files", dir)
	}
	var out []RankTimeline
	var origin time.Time
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			return nil, time.Time{}, errs.New(errs.Input, "profile %s: %v", p, err)
		}
		var rec RankRecord
		if err := json.Unmarshal(data, &rec); err != nil {
			return nil, time.Time{}, errs.New(errs.Input, "profile %s: %v", p, err)
		}
		tl := RankTimeline{Rank: rec.Rank}
		for _, s := range rec.Steps {
			tl.Step += s.Dur
			if origin.IsZero() || s.Start.Before(origin) {
				origin = s.Start
			}
		}
		for _, l := range rec.Launches {
			tl.Spans = append(tl.Spans, Span{Kind: SpanCompute, Name: l.Kernel, Start: l.Start, Dur: l.Dur, Args: map[string]any{"grid": l.Grid, "block": l.Block}})
		}
		for _, c := range rec.Collectives {
			tl.Spans = append(tl.Spans, Span{Kind: SpanComm, Name: c.Op, Start: c.Start, Dur: c.Dur,
				Args: map[string]any{"op": c.Op, "bytes": c.Bytes, "peers": c.Peers, "mode": c.Mode, "wait_us": us(c.Wait)}})
			tl.Wait += c.Wait
		}
		out = append(out, tl)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Rank < out[j].Rank })
	return out, origin, nil
}
