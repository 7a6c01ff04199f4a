package parse

import (
	"strconv"
	"strings"
	"time"

	"github.com/tessera-qa/tessera-qa/harness"
	"github.com/tessera-qa/tessera-qa/report/store"
)

// ChaosSchema and ChaosKind mark what `tessera-qa chaos --json` writes (docs/cli.md, "chaos").
const (
	ChaosSchema = 1
	ChaosKind   = "tessera-chaos"
)

// Where chaos runs go in the store:
//
//   - results (suite "chaos"): one per scenario, case = the scenario's name, pass when the
//     checker passed, the final parameters' digest with determinism "bitwise" (a scenario
//     with the same seeds must end with the same bits, run after run);
//   - metrics (kind "chaos", the dashboard's chaos page): one section per scenario with its
//     wall time, restarts and lost steps, and per fault "ID KIND time_to_detect_s" and
//     "ID KIND time_to_recover_s", each with the scenario's verdict.
const (
	ChaosSuite  = "chaos"
	ChaosMetric = "chaos"
)

// ChaosReport is the reporter's reading of a chaos report: the fields it stores.
type ChaosReport struct {
	Schema    int             `json:"schema"`
	Kind      string          `json:"kind"`
	Started   time.Time       `json:"started"`
	Machine   string          `json:"machine,omitempty"`
	Command   string          `json:"command,omitempty"`
	Scenarios []ChaosScenario `json:"scenarios"`
}

// ChaosScenario is one run's checker report.
type ChaosScenario struct {
	Scenario      string       `json:"scenario"`
	Passed        bool         `json:"passed"`
	Violations    []string     `json:"violations"`
	Restarts      int          `json:"restarts"`
	LostSteps     int          `json:"lost_steps"`
	BitsIdentical bool         `json:"bits_identical"`
	Digest        string       `json:"digest"`
	WallSeconds   float64      `json:"wall_s"`
	Faults        []ChaosFault `json:"faults"`
}

// ChaosFault is one injected fault's row.
type ChaosFault struct {
	ID         string  `json:"id"`
	Fault      string  `json:"fault"`
	Outcome    string  `json:"outcome"`
	DetectedBy string  `json:"detected_by"`
	TTD        float64 `json:"time_to_detect_s"`
	TTR        float64 `json:"time_to_recover_s"`
}

func parseChaos(file string, data []byte) (*Report, error) {
	var rep ChaosReport
	if err := decodeStrict(file, data, &rep); err != nil {
		return nil, err
	}
	c := NewChecker(file)
	if rep.Schema != ChaosSchema || rep.Kind != ChaosKind {
		c.failf("chaos schema %d kind %q, this build reads schema %d kind %q", rep.Schema, clip(rep.Kind), ChaosSchema, ChaosKind)
		return nil, c.err
	}
	if len(rep.Scenarios) == 0 || len(rep.Scenarios) > MaxRows {
		c.failf("%d chaos scenarios (want 1..%d)", len(rep.Scenarios), MaxRows)
		return nil, c.err
	}
	c.ident("header", "machine", rep.Machine, false)
	env := map[string]string{}
	if rep.Command != "" {
		env["command"] = text(rep.Command)
	}
	p := &Report{Kind: "chaos"}
	p.Batch.Run = store.RunRow{Machine: rep.Machine, DeviceClass: "cpu", Started: rep.Started, Env: jsonString(env)}
	seen := map[string]bool{}
	for i, s := range rep.Scenarios {
		where := "scenario " + strconv.Itoa(i)
		c.ident(where, "scenario", s.Scenario, true)
		c.hex(where, "digest", s.Digest)
		c.num(where, "wall_s", s.WallSeconds)
		if s.Restarts < 0 || s.LostSteps < 0 {
			c.failf("%s: negative restarts or lost steps", where)
		}
		if seen[s.Scenario] {
			c.failf("%s: a second report for %s", where, clip(s.Scenario))
		}
		seen[s.Scenario] = true
		verdict := harness.VerdictPass
		reason := ""
		if !s.Passed {
			verdict = harness.VerdictFail
			reason = "the checker failed the run"
			if len(s.Violations) > 0 {
				reason = text(strings.Join(s.Violations, "; "))
			}
		}
		m := func(metric, unit string, v float64, note string) {
			p.Batch.Metrics = append(p.Batch.Metrics, store.MetricRow{Kind: ChaosMetric, Name: s.Scenario, Metric: metric, Unit: unit,
				Value: c.num(where, metric, v), Verdict: verdict, Note: note})
		}
		m("wall_s", "s", s.WallSeconds, "")
		m("restarts", "", float64(s.Restarts), "")
		m("lost_steps", "steps", float64(s.LostSteps), "")
		for j, f := range s.Faults {
			fw := where + " fault " + strconv.Itoa(j)
			c.ident(fw, "id", f.ID, true)
			c.ident(fw, "fault", f.Fault, true)
			c.ident(fw, "outcome", f.Outcome, false)
			c.ident(fw, "detected_by", f.DetectedBy, false)
			note := text(f.Outcome)
			if f.DetectedBy != "" {
				note += " by " + text(f.DetectedBy)
			}
			c.num(fw, "time_to_detect_s", f.TTD)
			c.num(fw, "time_to_recover_s", f.TTR)
			if f.TTD > 0 {
				m(f.ID+" "+f.Fault+" time_to_detect_s", "s", f.TTD, note)
			}
			if f.TTR > 0 {
				m(f.ID+" "+f.Fault+" time_to_recover_s", "s", f.TTR, note)
			}
		}
		if c.err != nil {
			return nil, c.err
		}
		det := harness.DeterminismUnknown
		if s.Digest != "" {
			det = harness.DeterminismBitwise
		}
		p.Batch.Results = append(p.Batch.Results, store.ResultRow{Suite: ChaosSuite, Case: s.Scenario, DeviceClass: "cpu",
			Determinism: det, Backend: "chaos", Device: "chaos", Verdict: verdict, Reason: reason, Digest: s.Digest,
			TotalMS: s.WallSeconds * 1000})
	}
	p.Batch.Suites = resultSuites(p.Batch.Results)
	return p, nil
}
