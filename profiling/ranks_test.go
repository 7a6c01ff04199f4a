package profiling

import (
	"bytes"
	"math"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Four ranks over a 10 ms step: ranks 0, 2, 3 compute 6 ms then all_reduce 2 ms, half of it
// under compute; rank 1 is ten times slower (100 ms). Hand-computed: compute 6, comm 2,
// idle 10-7 = 3, overlap 50%; speeds 1, 1, 1 and 0.1 (the straggler).
func TestSummarizeAndStragglers(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(msec float64) time.Time { return t0.Add(time.Duration(msec * 1e6)) }
	d := func(msec float64) time.Duration { return time.Duration(msec * 1e6) }
	var ranks []RankTimeline
	for r := range 4 {
		scale := 1.0
		if r == 1 {
			scale = 10
		}
		ranks = append(ranks, RankTimeline{Rank: r, Step: d(10 * scale), Spans: []Span{
			{Kind: SpanCompute, Name: "k0", Start: at(0), Dur: d(6 * scale)},
			{Kind: SpanComm, Name: "all_reduce", Start: at(5 * scale), Dur: d(2 * scale), Args: map[string]any{"op": "all_reduce", "bytes": 4096, "peers": 3, "mode": "deterministic"}},
		}})
	}
	rs := Summarize(ranks)
	if rs[0].Rank != 1 || !rs[0].Straggler || math.Abs(rs[0].Speed-0.1) > 1e-9 {
		t.Fatalf("slowest first: %+v", rs[0])
	}
	for _, r := range rs[1:] {
		if r.Straggler || r.Speed != 1 || r.ComputeMS != 6 || r.CommMS != 2 || r.IdleMS != 3 || r.OverlapPct != 50 {
			t.Errorf("rank %d: %+v", r.Rank, r)
		}
	}
	var buf bytes.Buffer
	WriteRankSummary(&buf, rs)
	if strings.Count(buf.String(), "STRAGGLER") != 1 {
		t.Errorf("summary:\n%s", buf.String())
	}
	path := filepath.Join(t.TempDir(), "ranks.trace.json")
	if err := RankTrace(t0, ranks).WriteFile(path); err != nil {
		t.Fatal(err)
	}
	st, err := ValidateFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Processes) != 4 || st.Categories["comm"] != 4 {
		t.Errorf("rank trace: %+v", st)
	}
}

// A rank at 0.75 of the median is slow but no straggler; at 0.65 it is one.
func TestStragglerThreshold(t *testing.T) {
	mk := func(steps ...float64) []RankTimeline {
		var out []RankTimeline
		for i, s := range steps {
			out = append(out, RankTimeline{Rank: i, Step: time.Duration(s * 1e6)})
		}
		return out
	}
	if rs := Summarize(mk(10, 10, 10, 10/0.75)); rs[0].Straggler {
		t.Errorf("0.75 flagged: %+v", rs[0])
	}
	if rs := Summarize(mk(10, 10, 10, 10/0.65)); !rs[0].Straggler {
		t.Errorf("0.65 not flagged: %+v", rs[0])
	}
}
