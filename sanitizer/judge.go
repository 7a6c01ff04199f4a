package sanitizer

import (
	"fmt"
	"strings"
)

// Status is a tool run's verdict. A tool that could not run is Skipped with the tool's own
// reason; only Pass says the tool looked and found nothing.
type Status string

const (
	Pass    Status = "pass"
	Fail    Status = "fail"    // a report, or a case whose results were wrong under the tool
	Skipped Status = "skipped" // the tool refused (its reason recorded), or is not installed
	Error   Status = "error"   // the run did not finish: time ran out, no summary, cases missing
)

// CaseLinePrefix starts the line a child writes per case it ran:
// "tessera-sanitizer-case VERDICT NAME [REASON]".
const CaseLinePrefix = "tessera-sanitizer-case"

// CaseLine formats a child's line for one case.
func CaseLine(verdict, name, reason string) string {
	l := CaseLinePrefix + " " + verdict + " " + name
	if reason != "" {
		l += " " + strings.ReplaceAll(reason, "\n", " ")
	}
	return l
}

// CaseResult is one case line read back from the child's output.
type CaseResult struct {
	Name    string `json:"name"`
	Verdict string `json:"verdict"`
	Reason  string `json:"reason,omitempty"`
}

// Cases reads the case lines out of the child's output, in order.
func Cases(child []string) []CaseResult {
	var rs []CaseResult
	for _, l := range child {
		rest, ok := strings.CutPrefix(strings.TrimSpace(l), CaseLinePrefix+" ")
		if !ok {
			continue
		}
		f := strings.SplitN(rest, " ", 3)
		if len(f) < 2 {
			continue
		}
		c := CaseResult{Verdict: f[0], Name: f[1]}
		if len(f) == 3 {
			c.Reason = f[2]
		}
		rs = append(rs, c)
	}
	return rs
}

// Run is what a tool run gave: the command's exit, whether its deadline stopped it, and its
// combined output.
type Run struct {
	Tool     Tool
	Exit     int // the process's exit code; -1 when it did not exit by itself
	TimedOut bool
	Output   string
	Seconds  float64
}

// ToolResult is the judged run of one tool.
type ToolResult struct {
	Tool     Tool         `json:"tool"`
	Status   Status       `json:"status"`
	Reason   string       `json:"reason,omitempty"`
	Summary  int          `json:"error_summary"` // -1: no ERROR SUMMARY line
	Findings []Finding    `json:"findings"`
	Kernels  []string     `json:"kernels,omitempty"` // the kernels the findings name
	Cases    []CaseResult `json:"cases"`
	Exit     int          `json:"exit"`
	Seconds  float64      `json:"seconds"`
	Log      string       `json:"log,omitempty"`
}

// maxShown bounds how many findings a reason names.
const maxShown = 3

// Judge turns a run into a verdict. want lists the cases the child was asked to run; every
// one must report pass. The order of the rules is the order of what can be trusted: a run
// stopped by its deadline says nothing; a refusal without reports is the tool's reason; any
// report fails; a run without its summary line did not finish.
func Judge(r Run, want []string) ToolResult {
	o := Parse(r.Tool, r.Output)
	res := ToolResult{Tool: r.Tool, Summary: o.Summary, Findings: o.Findings, Cases: Cases(o.Child), Exit: r.Exit, Seconds: r.Seconds}
	if res.Findings == nil {
		res.Findings = []Finding{}
	}
	seen := map[string]bool{}
	for _, f := range o.Findings {
		if f.Kernel != "" && !seen[f.Kernel] {
			seen[f.Kernel] = true
			res.Kernels = append(res.Kernels, f.Kernel)
		}
	}
	reported := max(o.Summary, len(o.Findings))
	if len(o.RaceSummary) == 3 {
		reported = max(reported, o.RaceSummary[0])
	}
	switch {
	case r.TimedOut:
		res.Status, res.Reason = Error, fmt.Sprintf("%s did not finish within its deadline (%.0f s); %d reports before it", r.Tool, r.Seconds, reported)
		if reported > 0 {
			res.Status, res.Reason = Fail, res.Reason+": "+shown(o.Findings)
		}
		return res
	case o.Refusal != "" && reported == 0:
		res.Status, res.Reason = Skipped, "the tool refused: "+o.Refusal
		return res
	case reported > 0:
		res.Status = Fail
		res.Reason = fmt.Sprintf("%s: %d reports", r.Tool, reported)
		if o.Summary > len(o.Findings) {
			res.Reason += fmt.Sprintf(" (%d parsed)", len(o.Findings))
		}
		if len(o.Findings) > 0 {
			res.Reason += ": " + shown(o.Findings)
		}
		return res
	// racecheck on the H200 (2026-12-02) ends with its RACECHECK SUMMARY line and no ERROR
	// SUMMARY: that line is its summary.
	case o.Summary < 0 && !(r.Tool == Racecheck && len(o.RaceSummary) == 3):
		res.Status, res.Reason = Error, fmt.Sprintf("no ERROR SUMMARY line: %s did not finish (exit %d)%s", r.Tool, r.Exit, lastChild(o.Child))
		return res
	}
	got := map[string]CaseResult{}
	for _, c := range res.Cases {
		got[c.Name] = c
	}
	var missing, bad []string
	for _, n := range want {
		c, ok := got[n]
		switch {
		case !ok:
			missing = append(missing, n)
		case c.Verdict != "pass":
			bad = append(bad, n+" "+c.Verdict+": "+c.Reason)
		}
	}
	switch {
	case len(bad) > 0:
		res.Status, res.Reason = Fail, fmt.Sprintf("%d of %d cases not right under %s: %s", len(bad), len(want), r.Tool, strings.Join(first(bad, maxShown), "; "))
	case len(missing) > 0:
		res.Status, res.Reason = Error, fmt.Sprintf("the child reported %d of %d cases (first missing: %s)%s", len(want)-len(missing), len(want), missing[0], lastChild(o.Child))
	case r.Exit != 0:
		res.Status, res.Reason = Error, fmt.Sprintf("exit %d with no report%s", r.Exit, lastChild(o.Child))
	default:
		res.Status = Pass
	}
	return res
}

func shown(fs []Finding) string {
	var s []string
	for _, f := range first(fs, maxShown) {
		s = append(s, f.String())
	}
	if len(fs) > maxShown {
		s = append(s, fmt.Sprintf("... %d more", len(fs)-maxShown))
	}
	return strings.Join(s, "; ")
}

func first[T any](v []T, n int) []T { return v[:min(n, len(v))] }

// lastChild quotes the child's last line of output, which says why it stopped.
func lastChild(child []string) string {
	for i := len(child) - 1; i >= 0; i-- {
		if l := strings.TrimSpace(child[i]); l != "" {
			if len(l) > 200 {
				l = l[:200]
			}
			return "; last output: " + l
		}
	}
	return ""
}
