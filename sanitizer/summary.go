package sanitizer

import (
	"encoding/json"
	"os"
)

// SummarySchema versions the JSON a run writes.
const SummarySchema = "tessera-qa/sanitizer/v1"

// Summary is one run of every tool over one set of cases: which tools ran, which the machine
// refused (with the tool's own reason), and what each found.
type Summary struct {
	Schema    string       `json:"schema"`
	Sanitizer string       `json:"sanitizer"` // the tool's path
	Version   string       `json:"version,omitempty"`
	Faults    string       `json:"faults,omitempty"` // the failpoints the child ran with
	Cases     []string     `json:"cases"`
	Tools     []ToolResult `json:"tools"`
	Ran       []Tool       `json:"ran"`     // tools that ran to their summary (pass or fail)
	Refused   []Tool       `json:"refused"` // tools skipped with a reason
	Verdict   Status       `json:"verdict"`
	// Note says why no tool ran at all (no compute-sanitizer, no GPU); empty otherwise.
	Note string `json:"note,omitempty"`
}

// Summarise collects the tool results: the verdict is fail if any tool failed, else error if
// any did not finish, else skipped if any was refused (a refused tool is never a pass), else
// pass.
func Summarise(path, version, faults string, cases []string, rs []ToolResult) Summary {
	s := Summary{Schema: SummarySchema, Sanitizer: path, Version: version, Faults: faults, Cases: cases, Tools: rs,
		Ran: []Tool{}, Refused: []Tool{}, Verdict: Pass}
	if s.Cases == nil {
		s.Cases = []string{}
	}
	if s.Tools == nil {
		s.Tools = []ToolResult{}
	}
	rank := map[Status]int{Pass: 0, Skipped: 1, Error: 2, Fail: 3}
	for _, r := range rs {
		switch r.Status {
		case Pass, Fail:
			s.Ran = append(s.Ran, r.Tool)
		case Skipped:
			s.Refused = append(s.Refused, r.Tool)
		}
		if rank[r.Status] > rank[s.Verdict] {
			s.Verdict = r.Status
		}
	}
	if len(rs) == 0 {
		s.Verdict = Skipped
	}
	return s
}

// Write stores the summary as indented JSON.
func (s Summary) Write(path string) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}
