package parse

import (
	"encoding/json"
	"sort"
	"strconv"

	"github.com/tessera-qa/tessera-qa/harness"
	"github.com/tessera-qa/tessera-qa/report/store"
)

var verdicts = map[string]bool{harness.VerdictPass: true, harness.VerdictFail: true, harness.VerdictError: true, harness.VerdictSkip: true}

// parseResults reads a harness results file (docs/results-json.md).
func parseResults(file string, data []byte) (*Report, error) {
	var rs []harness.Result
	if err := decodeStrict(file, data, &rs); err != nil {
		return nil, err
	}
	c := NewChecker(file)
	if len(rs) > MaxRows {
		c.failf("%d results (limit %d)", len(rs), MaxRows)
		return nil, c.err
	}
	p := &Report{Kind: "results"}
	classes := map[string]int{}
	for i, r := range rs {
		where := "result " + strconv.Itoa(i)
		if r.Schema < 1 || r.Schema > harness.ResultSchema {
			c.failf("%s: schema %d, this build reads 1..%d", where, r.Schema, harness.ResultSchema)
		}
		if !verdicts[r.Verdict] {
			c.failf("%s: verdict %q is not pass, fail, error or skip", where, clip(r.Verdict))
		}
		det := r.Env.Determinism
		if det == "" {
			det = harness.DeterminismUnknown
		}
		row := store.ResultRow{
			Suite:        c.ident(where, "suite", r.Suite, true),
			Case:         c.ident(where, "case", r.Case, true),
			DeviceClass:  c.ident(where, "device_class", r.DeviceClass, true),
			Determinism:  c.ident(where, "env.determinism", det, false),
			Backend:      c.ident(where, "backend", r.Backend, false),
			Device:       c.ident(where, "device", r.Device, false),
			Verdict:      r.Verdict,
			Reason:       text(r.Reason),
			ErrorCode:    c.ident(where, "error_code", r.ErrorCode, false),
			Digest:       c.hex(where, "digest", r.Digest),
			ScheduleHash: c.ident(where, "schedule_hash", r.ScheduleHash, false),
			Computation:  c.hex(where, "computation", r.Computation),
			Seed:         strconv.FormatUint(r.Seed, 10),
			Replay:       text(r.Replay),
			TotalMS:      c.num(where, "timing.total_ms", r.Timing.TotalMS),
		}
		for _, v := range []float64{r.Timing.CompileMS, r.Timing.RunMS, r.Timing.RefMS, r.Timing.CheckMS} {
			c.num(where, "timing", v)
		}
		for j, o := range r.Outputs {
			c.ident(where, "outputs["+strconv.Itoa(j)+"].name", o.Name, false)
			if o.Digest != "nil" {
				c.hex(where, "outputs["+strconv.Itoa(j)+"].digest", o.Digest)
			}
		}
		c.ident(where, "env.hostname", r.Env.Hostname, false)
		c.ident(where, "env.commit", r.Env.Commit, false)
		if c.err != nil {
			return nil, c.err
		}
		classes[r.DeviceClass]++
		p.Batch.Results = append(p.Batch.Results, row)
	}
	if len(rs) > 0 {
		env, _ := json.Marshal(rs[0].Env) // a decoded Env re-encodes
		p.Batch.Run = store.RunRow{Commit: rs[0].Env.Commit, Machine: rs[0].Env.Hostname, DeviceClass: mostCommon(classes), Env: string(env)}
	}
	p.Batch.Suites = resultSuites(p.Batch.Results)
	return p, nil
}

// mostCommon is the key with the highest count (ties: the smallest key).
func mostCommon(m map[string]int) string {
	best, n := "", -1
	for k, v := range m {
		if v > n || v == n && k < best {
			best, n = k, v
		}
	}
	return best
}

// maxFailing is how many failing names a suite summary keeps.
const maxFailing = 10

func resultSuites(rs []store.ResultRow) []store.SuiteRow {
	by := map[string]*store.SuiteRow{}
	for _, r := range rs {
		s := by[r.Suite]
		if s == nil {
			s = &store.SuiteRow{Suite: r.Suite, Failing: []string{}}
			by[r.Suite] = s
		}
		s.WallMS += r.TotalMS
		switch r.Verdict {
		case harness.VerdictPass:
			s.Pass++
		case harness.VerdictFail:
			s.Fail++
		case harness.VerdictError:
			s.Error++
		default:
			s.Skip++
		}
		if (r.Verdict == harness.VerdictFail || r.Verdict == harness.VerdictError) && len(s.Failing) < maxFailing {
			s.Failing = append(s.Failing, clipLine(r.Case+": "+r.Reason))
		}
	}
	return sortedSuites(by)
}

func sortedSuites(by map[string]*store.SuiteRow) []store.SuiteRow {
	out := make([]store.SuiteRow, 0, len(by))
	for _, s := range by {
		out = append(out, *s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Suite < out[j].Suite })
	return out
}

func clipLine(s string) string {
	if len(s) > 300 {
		return text(s[:300]) + "…"
	}
	return s
}
