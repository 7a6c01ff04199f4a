package harness

import (
	"encoding/json"
	"os"

	"github.com/tessera-qa/tessera-qa/engine/errs"
)

// ResultSchema is the version of the results JSON (docs/results-json.md). It changes only
// when a field changes meaning or is removed; added fields keep it.
const ResultSchema = 1

// Verdicts.
const (
	VerdictPass  = "pass"  // every output matched
	VerdictFail  = "fail"  // an output did not match, or the engine broke a contract
	VerdictError = "error" // the case could not produce outputs (compile or run error, bad case)
	VerdictSkip  = "skip"  // the backend is not available here
)

// Result is one case run on one backend. It is the unit the report store ingests; see
// docs/results-json.md for the JSON shape.
type Result struct {
	Schema      int      `json:"schema"`
	Suite       string   `json:"suite"`
	Case        string   `json:"case"`
	Labels      []string `json:"labels,omitempty"`
	Backend     string   `json:"backend"`
	Device      string   `json:"device"`
	DeviceClass string   `json:"device_class"`
	Verdict     string   `json:"verdict"`
	Reason      string   `json:"reason,omitempty"`
	// ErrorCode is the stable code (E_SHAPE, E_NO_DEVICE, ...) of an error or skip verdict,
	// and of a fail verdict that came from an error (E_NONDETERMINISTIC on replay).
	ErrorCode    string            `json:"error_code,omitempty"`
	Seed         uint64            `json:"seed,string"`
	InputDigests map[string]string `json:"input_digests,omitempty"`
	Outputs      []OutputResult    `json:"outputs"`
	// Digest is CombinedDigest of the backend's outputs: equal digests, equal bits.
	Digest       string `json:"digest,omitempty"`
	ScheduleHash string `json:"schedule_hash,omitempty"`
	// Computation names what was computed: ComputationKey of the graph, the input digests and
	// the schedule hash. With the device class it is the reproducibility key of Digest (a case
	// name alone is a label that another seed may give another graph).
	Computation string `json:"computation,omitempty"`
	Env         Env    `json:"env"`
	Timing      Timing `json:"timing"`
	// Replay is the path of the replay manifest written for a failing case, if any.
	Replay string `json:"replay,omitempty"`
}

// OutputResult is one graph output: its digest and how it compared with the expected value.
type OutputResult struct {
	Name   string      `json:"name"`
	DType  string      `json:"dtype"`
	Shape  []int       `json:"shape"`
	Digest string      `json:"digest"`
	Check  CheckResult `json:"check"`
}

// Timing is wall time per stage in milliseconds; stages that did not run are 0.
type Timing struct {
	CompileMS float64 `json:"compile_ms"`
	RunMS     float64 `json:"run_ms"`
	RefMS     float64 `json:"ref_ms"`
	CheckMS   float64 `json:"check_ms"`
	TotalMS   float64 `json:"total_ms"`
}

// Failed reports whether the result should carry a replay manifest.
func (r Result) Failed() bool { return r.Verdict == VerdictFail || r.Verdict == VerdictError }

// WriteResults writes rs as a JSON array to path atomically: readers see the old file or the
// whole new one, never a partial write.
func WriteResults(path string, rs []Result) error {
	if rs == nil {
		rs = []Result{}
	}
	data, err := indentJSON(rs)
	if err != nil {
		return errs.New(errs.Internal, "results %s: encode: %v", path, err)
	}
	return writeAtomic(path, data)
}

// ReadResults reads a file written by WriteResults. Unknown fields are accepted (a newer
// writer may add fields within one schema); a newer schema is rejected.
func ReadResults(path string) ([]Result, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, errs.New(errs.Input, "results %s: %v", path, err)
	}
	var rs []Result
	if err := json.Unmarshal(data, &rs); err != nil {
		return nil, errs.New(errs.Parse, "results %s: %v", path, err)
	}
	for i, r := range rs {
		if r.Schema < 1 || r.Schema > ResultSchema {
			return nil, errs.New(errs.Parse, "results %s: entry %d (%s/%s) has schema %d, this build reads 1..%d", path, i, r.Suite, r.Case, r.Schema, ResultSchema)
		}
	}
	return rs, nil
}
