package doctor

import (
	"encoding/json"
	"slices"
)

// Verdict is a check's outcome.
type Verdict string

const (
	Pass    Verdict = "pass"
	Warn    Verdict = "warn"
	Fail    Verdict = "fail"
	Skipped Verdict = "skipped" // could not run: Reason says why; never a pass or a fail
)

// rank orders verdicts from best to worst for a summary (a skipped check does not lower it).
func rank(v Verdict) int {
	switch v {
	case Fail:
		return 2
	case Warn:
		return 1
	}
	return 0
}

// Check is one check on one device.
type Check struct {
	// Name is area/check: "nvml/ecc", "memory/patterns", "sdc/pinned-catalogue".
	Name    string  `json:"name"`
	Level   int     `json:"level"`
	Device  string  `json:"device"` // "cpu:0", "gpu:0", "node"
	Verdict Verdict `json:"verdict"`
	// Reason is one line: why it failed, warned or was skipped, or what passed.
	Reason string `json:"reason"`
	// Code is the error code of a failure (E_SDC, E_NO_DEVICE ...), when there is one.
	Code string `json:"code,omitempty"`
	// Values are the numbers the verdict was drawn from, with their thresholds.
	Values  map[string]float64 `json:"values,omitempty"`
	Seconds float64            `json:"seconds"`
	// SDC lists the corrupted outputs an SDC scan found.
	SDC []SDCFinding `json:"sdc,omitempty"`
}

// Device is one device doctor looked at.
type Device struct {
	ID      string `json:"id"`      // "cpu:0", "gpu:0"
	Backend string `json:"backend"` // "cpu", "cuda"
	Name    string `json:"name"`
	Class   string `json:"class,omitempty"` // device class, as pins are keyed
	UUID    string `json:"uuid,omitempty"`
	SKU     string `json:"sku,omitempty"` // the thresholds' SKU applied ("" none matched)
	// Available is false for a device NVML lists that the CUDA driver cannot open.
	Available bool `json:"available"`
}

// Summary counts the checks by verdict.
type Summary struct {
	Pass    int `json:"pass"`
	Warn    int `json:"warn"`
	Fail    int `json:"fail"`
	Skipped int `json:"skipped"`
}

// ReportFormat and ReportVersion name the JSON schema of a Report (docs/health.md).
const (
	ReportFormat  = "tessera.doctor"
	ReportVersion = 1
)

// Report is one doctor run.
type Report struct {
	Format            string   `json:"format"`
	Version           int      `json:"version"`
	Level             int      `json:"level"`
	Host              string   `json:"host"`
	Started           string   `json:"started"` // RFC 3339, UTC
	Seconds           float64  `json:"seconds"`
	ThresholdsVersion int      `json:"thresholds_version"`
	ThresholdsSource  string   `json:"thresholds_source"` // "embedded" or the file given
	NVMLSource        string   `json:"nvml_source"`       // "nvml", "replay:FILE" or "none"
	Devices           []Device `json:"devices"`
	Checks            []Check  `json:"checks"`
	Summary           Summary  `json:"summary"`
	// Verdict is the worst verdict of any check (pass when every check passed or was skipped).
	Verdict Verdict `json:"verdict"`
	// Absent is set when a device the level needs, asked for explicitly, is not there (exit 3).
	Absent string `json:"absent,omitempty"`
}

// finish fills Summary and Verdict from Checks.
func (r *Report) finish() {
	r.Summary, r.Verdict = Summary{}, Pass
	for _, c := range r.Checks {
		switch c.Verdict {
		case Pass:
			r.Summary.Pass++
		case Warn:
			r.Summary.Warn++
		case Fail:
			r.Summary.Fail++
		default:
			r.Summary.Skipped++
		}
		if rank(c.Verdict) > rank(r.Verdict) {
			r.Verdict = c.Verdict
		}
	}
}

// ExitCode is the CLI's exit status for the report: 1 a check failed, 3 a device asked for is
// absent, else 0 (warnings and skips do not fail a node).
func (r Report) ExitCode() int {
	switch {
	case r.Verdict == Fail:
		return 1
	case r.Absent != "":
		return 3
	}
	return 0
}

// Failed lists the checks that failed.
func (r Report) Failed() []Check {
	return slices.DeleteFunc(slices.Clone(r.Checks), func(c Check) bool { return c.Verdict != Fail })
}

// ParseReport reads a report written by doctor --json (E_INPUT otherwise, as the results
// store's ingest needs).
func ParseReport(b []byte) (Report, error) {
	var r Report
	if err := json.Unmarshal(b, &r); err != nil {
		return r, err
	}
	return r, nil
}
