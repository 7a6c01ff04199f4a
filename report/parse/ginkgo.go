package parse

import (
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/tessera-qa/tessera-qa/report/store"
)

// The parts of a Ginkgo JSON report (`ginkgo --json-report`) the store keeps. Ginkgo writes an
// array of suite reports; other fields are ignored.
type ginkgoReport struct {
	SuitePath                  string
	SuiteDescription           string
	SuiteSucceeded             bool
	SpecialSuiteFailureReasons []string
	StartTime                  time.Time
	SpecReports                []ginkgoSpec
}

type ginkgoSpec struct {
	ContainerHierarchyTexts []string
	LeafNodeType            string
	LeafNodeText            string
	State                   string
	RunTime                 int64 // nanoseconds
	NumAttempts             int
	ReportEntries           []ginkgoEntry // structured measurements: partitions.go, ptxas.go
	Failure                 struct {
		Message  string
		Location struct {
			FileName   string
			LineNumber int
		}
	}
}

var ginkgoStates = map[string]bool{"passed": true, "skipped": true, "pending": true, "failed": true,
	"aborted": true, "panicked": true, "interrupted": true, "timedout": true, "invalid": true}

// specFailed: states that count as a failure.
func specFailed(state string) bool {
	switch state {
	case "failed", "aborted", "panicked", "interrupted", "timedout":
		return true
	}
	return false
}

func parseGinkgo(file string, data []byte) (*Report, error) {
	var reps []ginkgoReport
	if err := decodeStrict(file, data, &reps); err != nil {
		return nil, err
	}
	c := NewChecker(file)
	p := &Report{Kind: "ginkgo"}
	by := map[string]*store.SuiteRow{}
	n := 0
	for i, r := range reps {
		where := "suite report " + strconv.Itoa(i)
		suite := r.SuiteDescription
		if suite == "" {
			suite = filepath.Base(r.SuitePath)
		}
		c.ident(where, "SuiteDescription", suite, true)
		if i == 0 || (!r.StartTime.IsZero() && r.StartTime.Before(p.Batch.Run.Started)) {
			p.Batch.Run.Started = r.StartTime
		}
		s := by[suite]
		if s == nil {
			s = &store.SuiteRow{Suite: suite, Failing: []string{}}
			by[suite] = s
		}
		// A suite that failed to compile or set up has no specs but did fail.
		for _, reason := range r.SpecialSuiteFailureReasons {
			row := store.SpecRow{Suite: suite, Name: "[suite]", State: "failed", Attempts: 1, Failure: text(reason)}
			p.Batch.Specs = append(p.Batch.Specs, row)
			s.Fail++
			if len(s.Failing) < maxFailing {
				s.Failing = append(s.Failing, clipLine("[suite]: "+reason))
			}
		}
		for j, sp := range r.SpecReports {
			if n++; n+len(p.Batch.Metrics) > MaxRows {
				c.failf("more than %d specs", MaxRows)
				return nil, c.err
			}
			w := where + " spec " + strconv.Itoa(j)
			if !ginkgoStates[sp.State] {
				c.failf("%s: State %q is not a Ginkgo spec state", w, clip(sp.State))
			}
			if sp.RunTime < 0 || sp.NumAttempts < 0 || sp.NumAttempts > 1000 {
				c.failf("%s: RunTime %d or NumAttempts %d out of range", w, sp.RunTime, sp.NumAttempts)
			}
			name := specName(sp)
			c.ident(w, "spec name", name, true)
			c.ident(w, "Failure.Location.FileName", sp.Failure.Location.FileName, false)
			if c.err != nil {
				return nil, c.err
			}
			loc := ""
			if f := sp.Failure.Location.FileName; f != "" {
				loc = f + ":" + strconv.Itoa(sp.Failure.Location.LineNumber)
			}
			row := store.SpecRow{Suite: suite, Name: name, State: sp.State, Attempts: max(sp.NumAttempts, 1),
				DurationMS: float64(sp.RunTime) / 1e6, Failure: text(sp.Failure.Message), Location: text(loc)}
			p.Batch.Specs = append(p.Batch.Specs, row)
			s.WallMS += row.DurationMS
			partitionEntries(c, w, sp.State, sp.ReportEntries, p)
			if ptxasEntries(c, w, sp.State, sp.ReportEntries, p); c.err != nil {
				return nil, c.err
			}
			switch {
			case sp.State == "passed":
				s.Pass++
			case specFailed(sp.State):
				s.Fail++
				if len(s.Failing) < maxFailing {
					s.Failing = append(s.Failing, clipLine(name+": "+sp.Failure.Message))
				}
			default:
				s.Skip++
			}
		}
	}
	p.Batch.Suites = sortedSuites(by)
	return p, c.err
}

// specName is the spec's full text; setup nodes (BeforeSuite, ...) are named by their type.
func specName(sp ginkgoSpec) string {
	parts := append([]string{}, sp.ContainerHierarchyTexts...)
	if sp.LeafNodeText != "" {
		parts = append(parts, sp.LeafNodeText)
	}
	if sp.LeafNodeType != "" && sp.LeafNodeType != "It" {
		parts = append([]string{"[" + sp.LeafNodeType + "]"}, parts...)
	}
	return strings.Join(parts, " ")
}
