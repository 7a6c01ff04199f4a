package sanitizer

import (
	"bufio"
	"regexp"
	"strconv"
	"strings"
)

// Tool is one of compute-sanitizer's checkers (its --tool value).
type Tool string

// The four tools, in the order a run takes them.
const (
	Memcheck  Tool = "memcheck"
	Racecheck Tool = "racecheck"
	Initcheck Tool = "initcheck"
	Synccheck Tool = "synccheck"
)

// Tools lists every tool a full run takes.
func Tools() []Tool { return []Tool{Memcheck, Racecheck, Initcheck, Synccheck} }

// ParseTool turns a --tool value into a Tool; ok is false for anything else.
func ParseTool(s string) (Tool, bool) {
	for _, t := range Tools() {
		if string(t) == s {
			return t, true
		}
	}
	return "", false
}

// Finding is one report of the tool: an invalid or uninitialised access, a race between two
// accesses, a barrier misuse, or a CUDA API error the tool saw.
type Finding struct {
	Tool Tool `json:"tool"`
	// Kind is the report's first line without the prefix, e.g. "Invalid __global__ write of
	// size 4 bytes", "Race reported between Write access at ...", "Barrier error detected.
	// Divergent thread(s) in block".
	Kind string `json:"kind"`
	// Access is what was touched: "__global__ write of size 4 bytes", "__shared__ Write/Read"
	// for a race, "barrier" for synccheck, "API call" for an API error.
	Access string `json:"access"`
	// Kernel is the function the report names (the PTX .entry name for our kernels); empty
	// when the tool gave none.
	Kernel string `json:"kernel,omitempty"`
	// Where is the location text after "at" (offset, file:line, function) as the tool wrote it.
	Where   string `json:"where,omitempty"`
	Thread  string `json:"thread,omitempty"` // "(x,y,z)"
	Block   string `json:"block,omitempty"`  // "(x,y,z)"
	Address string `json:"address,omitempty"`
	// Hazards is racecheck's count for the pair ([N hazards]); 0 when not given.
	Hazards int `json:"hazards,omitempty"`
	// Detail holds the report's other lines (the address's relation to the nearest
	// allocation, the second access of a race), backtraces left out.
	Detail []string `json:"detail,omitempty"`
}

// String is the one-line form used in failure messages: tool, kernel, access, thread.
func (f Finding) String() string {
	var b strings.Builder
	b.WriteString(string(f.Tool))
	b.WriteString(": ")
	b.WriteString(f.Kind)
	if f.Kernel != "" {
		b.WriteString(" in kernel " + f.Kernel)
	}
	if f.Thread != "" {
		b.WriteString(" by thread " + f.Thread)
	}
	if f.Block != "" {
		b.WriteString(" in block " + f.Block)
	}
	if f.Address != "" {
		b.WriteString(", address " + f.Address)
	}
	return b.String()
}

// Output is what Parse read from one run of the tool.
type Output struct {
	Tool     Tool      `json:"tool"`
	Findings []Finding `json:"findings"`
	// Summary is the count the tool's ERROR SUMMARY line gave; -1 when there was none (the
	// tool did not finish, or never started).
	Summary int `json:"summary"`
	// RaceSummary is racecheck's "RACECHECK SUMMARY: N hazards displayed (E errors, W
	// warnings)", [N, E, W]; nil when absent.
	RaceSummary []int `json:"race_summary,omitempty"`
	// Refusal is the tool's own line when it refused to run (an unsupported device or
	// platform, an internal error, a child that never reached the CUDA driver); empty when
	// it ran.
	Refusal string `json:"refusal,omitempty"`
	// Child holds the lines that were not the tool's (the checked process's own output).
	Child []string `json:"-"`
}

// Prefix starts every line compute-sanitizer writes.
const Prefix = "========="

var (
	sizeRe    = regexp.MustCompile(`^(Invalid|Uninitialized|Misaligned|Out-of-range) (.*?)\s*(read|write|atomic|access|memory read)?\s*of size (\d+) bytes?`)
	raceRe    = regexp.MustCompile(`^(?i:error|warning): (Race reported between (\w+) access at (.*?)(?: \[(\d+) hazards?\])?|Potential (\w+) hazard detected at (.*))$`)
	raceAndRe = regexp.MustCompile(`^and (\w+) access at (.*?)(?: \[(\d+) hazards?\])?$`)
	oldRaceRe = regexp.MustCompile(`^(\w+) Thread \(([^)]*)\) at (.*)$`)
	threadRe  = regexp.MustCompile(`^by thread \(([^)]*)\) in block \(([^)]*)\)`)
	addrRe    = regexp.MustCompile(`^Address (0x[0-9a-fA-F]+)`)
	summaryRe = regexp.MustCompile(`^ERROR SUMMARY: (\d+) errors?`)
	raceSumRe = regexp.MustCompile(`^RACECHECK SUMMARY: (\d+) hazards? displayed \((\d+) errors?, (\d+) warnings?\)`)
	apiRe     = regexp.MustCompile(`^Program hit (\S+) .*on CUDA API call to (\S+?)\.?$`)
	// A location: "kernel+0x160 in file.cu:6" (newer releases), "0x160 in file.cu:6:kernel(int*)"
	// or "0x160 in kernel" (older ones and code without line information).
	newWhereRe = regexp.MustCompile(`^(.+?)\+0x[0-9a-fA-F]+(?: in .*)?$`)
	oldWhereRe = regexp.MustCompile(`^0x[0-9a-fA-F]+ in (.*)$`)
	fileLineRe = regexp.MustCompile(`^.*?:\d+:(.+)$`)
)

// Lines that are the tool's own and report nothing.
var quiet = []string{"COMPUTE-SANITIZER", "Target application returned an error", "LEAK SUMMARY", "Saved host backtrace",
	"Host Frame", "Device Frame", "in ", "Current Value", "No hazards", "This may be"}

// Lines with which the tool says it could not do its work: the run is refused (skipped with
// the tool's reason), never a pass.
var refusals = []string{"Internal Sanitizer Error", "Error: Target application terminated before first instrumented API call",
	"is not supported", "not supported on", "Error: No attachable process", "Error: Device not supported",
	"Error: Could not", "Error: Failed to", "Unable to"}

// Parse reads compute-sanitizer's text output for one tool. It never fails: lines it does not
// know are kept with the report they follow (as Detail) or, without the prefix, as the
// child's output. A report header is any unindented prefixed line that is neither a summary
// nor one of the tool's quiet lines, so a kind of report this parser has never seen still
// counts as a finding.
func Parse(tool Tool, text string) Output {
	out := Output{Tool: tool, Summary: -1}
	var cur *Finding
	flush := func() {
		if cur != nil {
			out.Findings = append(out.Findings, *cur)
			cur = nil
		}
	}
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for sc.Scan() {
		raw := strings.TrimRight(sc.Text(), "\r")
		rest, ok := strings.CutPrefix(raw, Prefix)
		if !ok {
			out.Child = append(out.Child, raw)
			continue
		}
		indented := strings.HasPrefix(rest, "  ")
		line := strings.TrimSpace(rest)
		if line == "" {
			flush()
			continue
		}
		if indented && cur != nil {
			cur.continuation(line)
			continue
		}
		if m := summaryRe.FindStringSubmatch(line); m != nil {
			flush()
			out.Summary = atoi(m[1])
			continue
		}
		if m := raceSumRe.FindStringSubmatch(line); m != nil {
			flush()
			out.RaceSummary = []int{atoi(m[1]), atoi(m[2]), atoi(m[3])}
			continue
		}
		if indented || hasAnyPrefix(line, quiet) {
			continue // a backtrace or banner line, or an indented line with no report to hold it
		}
		if out.Refusal == "" && !raceRe.MatchString(line) && containsAny(line, refusals) {
			flush()
			out.Refusal = line
			continue
		}
		flush()
		cur = header(tool, line)
	}
	flush()
	return out
}

// header starts a finding from a report's first line.
func header(tool Tool, line string) *Finding {
	f := &Finding{Tool: tool, Kind: line}
	switch {
	case sizeRe.MatchString(line):
		m := sizeRe.FindStringSubmatch(line)
		space := strings.TrimSpace(m[2])
		op := m[3]
		if m[1] == "Uninitialized" {
			op = "read"
			space = strings.TrimSuffix(strings.TrimSpace(strings.TrimSuffix(space, "memory")), " ")
		}
		f.Access = strings.TrimSpace(space + " " + op + " of size " + m[4] + " bytes")
	case raceRe.MatchString(line):
		m := raceRe.FindStringSubmatch(line)
		if m[2] != "" {
			f.Access = "__shared__ " + m[2]
			f.setWhere(m[3])
			f.Hazards = atoi(m[4])
		} else {
			f.Access = "__shared__ " + m[5] + " hazard"
			f.Address = strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(m[6]), ":"))
		}
	case strings.HasPrefix(line, "Barrier error") || strings.Contains(line, "__syncwarp") || strings.HasPrefix(line, "Invalid arguments"):
		f.Access = "barrier"
	case apiRe.MatchString(line):
		m := apiRe.FindStringSubmatch(line)
		f.Access = "API call " + m[2] + " (" + m[1] + ")"
	default:
		f.Access = "unknown"
	}
	return f
}

// continuation adds an indented line of the report.
func (f *Finding) continuation(line string) {
	switch {
	case hasAnyPrefix(line, []string{"Saved host backtrace", "Host Frame", "Device Frame"}) || strings.HasPrefix(line, "in /"):
		return // backtraces name host code, not our kernels
	case strings.HasPrefix(line, "at ") && f.Where == "":
		f.setWhere(strings.TrimPrefix(line, "at "))
	case threadRe.MatchString(line):
		m := threadRe.FindStringSubmatch(line)
		f.Thread, f.Block = "("+compact(m[1])+")", "("+compact(m[2])+")"
	case addrRe.MatchString(line):
		f.Address = addrRe.FindStringSubmatch(line)[1]
		f.Detail = append(f.Detail, line)
	case raceAndRe.MatchString(line):
		m := raceAndRe.FindStringSubmatch(line)
		f.Access += "/" + m[1]
		f.Hazards += atoi(m[3])
		f.Detail = append(f.Detail, line)
		if f.Kernel == "" {
			f.setWhere(m[2])
		}
	case oldRaceRe.MatchString(line):
		m := oldRaceRe.FindStringSubmatch(line)
		if f.Thread == "" {
			f.Thread = "(" + compact(m[2]) + ")"
		}
		if f.Where == "" {
			f.setWhere(m[3])
		}
		f.Detail = append(f.Detail, line)
	default:
		f.Detail = append(f.Detail, line)
	}
}

// setWhere records a location and the kernel it names.
func (f *Finding) setWhere(w string) {
	w = strings.TrimSpace(w)
	f.Where = w
	f.Kernel = kernelOf(w)
}

// kernelOf takes the function name out of a location, without its parameter list.
func kernelOf(w string) string {
	var fn string
	if m := oldWhereRe.FindStringSubmatch(w); m != nil {
		fn = m[1]
		if fm := fileLineRe.FindStringSubmatch(fn); fm != nil {
			fn = fm[1]
		}
	} else if m := newWhereRe.FindStringSubmatch(w); m != nil {
		fn = m[1]
	} else {
		return ""
	}
	if i := strings.IndexAny(fn, "()"); i >= 0 {
		fn = fn[:i] // the parameter list of a C++ signature
	}
	return strings.TrimSpace(fn)
}

func compact(s string) string { return strings.ReplaceAll(s, " ", "") }

func atoi(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		return 0
	}
	return n
}

func hasAnyPrefix(s string, ps []string) bool {
	for _, p := range ps {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

func containsAny(s string, subs []string) bool {
	for _, p := range subs {
		if strings.Contains(s, p) {
			return true
		}
	}
	return false
}
