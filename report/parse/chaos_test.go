package parse_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/tessera-qa/tessera-qa/chaos"
	"github.com/tessera-qa/tessera-qa/harness"
	"github.com/tessera-qa/tessera-qa/report/parse"
)

func chaosDoc() chaos.Document {
	return chaos.Document{Schema: chaos.DocumentSchema, Kind: chaos.DocumentKind, Started: time.Date(2026, 11, 25, 3, 0, 0, 0, time.UTC),
		Machine: "node7", Command: "tessera-qa chaos --kill-rank 1", Passed: false,
		Scenarios: []*chaos.Report{
			{Scenario: "manual/rank/kill", Passed: true, Restarts: 1, LostSteps: 5, BitsIdentical: true, Digest: "abc123", WallSeconds: 1.5,
				Faults: []chaos.FaultResult{{ID: "f0", Fault: "rank/kill", Outcome: "detected", DetectedBy: "E_TIMEOUT_COMM", TTD: 0.31, TTR: 0.37}}},
			{Scenario: "random-2", Passed: false, Violations: []string{"silent corruption: step 13"}, Digest: "def456", WallSeconds: 2,
				Faults: []chaos.FaultResult{{ID: "f0", Fault: "net/corrupt", Outcome: "NOT DETECTED"}}},
		}}
}

func TestChaosReportsBecomeResultsAndChaosMetrics(t *testing.T) {
	data, _ := json.Marshal(chaosDoc())
	p, err := parse.Parse("chaos.json", data)
	if err != nil {
		t.Fatal(err)
	}
	if p.Kind != "chaos" || len(p.Batch.Results) != 2 || p.Batch.Run.Machine != "node7" || !strings.Contains(p.Batch.Run.Env, "--kill-rank") {
		t.Fatalf("%+v", p)
	}
	r0, r1 := p.Batch.Results[0], p.Batch.Results[1]
	if r0.Suite != parse.ChaosSuite || r0.Case != "manual/rank/kill" || r0.Verdict != harness.VerdictPass || r0.Digest != "abc123" || r0.Determinism != harness.DeterminismBitwise {
		t.Errorf("result %+v", r0)
	}
	if r1.Verdict != harness.VerdictFail || !strings.Contains(r1.Reason, "silent corruption") {
		t.Errorf("result %+v", r1)
	}
	var names []string
	for _, m := range p.Batch.Metrics {
		if m.Kind != parse.ChaosMetric {
			t.Errorf("metric kind %q", m.Kind)
		}
		names = append(names, m.Name+": "+m.Metric)
	}
	want := []string{"manual/rank/kill: wall_s", "manual/rank/kill: restarts", "manual/rank/kill: lost_steps",
		"manual/rank/kill: f0 rank/kill time_to_detect_s", "manual/rank/kill: f0 rank/kill time_to_recover_s",
		"random-2: wall_s", "random-2: restarts", "random-2: lost_steps"}
	if strings.Join(names, "|") != strings.Join(want, "|") {
		t.Errorf("metrics\n%v\nwant\n%v", names, want)
	}
}

func TestChaosReportsAreChecked(t *testing.T) {
	for _, bad := range []func(*chaos.Document){
		func(d *chaos.Document) { d.Schema = 9 },
		func(d *chaos.Document) { d.Scenarios = nil },
		func(d *chaos.Document) { d.Scenarios[0].Digest = "NOT HEX" },
		func(d *chaos.Document) { d.Scenarios[1].Scenario = d.Scenarios[0].Scenario },
		func(d *chaos.Document) { d.Scenarios[0].Faults[0].TTD = -1 },
		func(d *chaos.Document) { d.Scenarios[0].Scenario = "a\x01b" },
	} {
		d := chaosDoc()
		bad(&d)
		data, _ := json.Marshal(d)
		if _, err := parse.Parse("chaos.json", data); err == nil {
			t.Errorf("accepted %s", data)
		}
	}
}
