// Package junit writes harness results as JUnit XML, the report format CI systems (GitLab,
// Jenkins, GitHub test reporters) render: one <testsuite> per harness suite, one <testcase>
// per result, with <failure>, <error> or <skipped> for the verdicts that are not a pass.
package junit

import (
	"encoding/xml"
	"fmt"
	"io"
	"strings"

	"github.com/tessera-qa/tessera-qa/harness"
)

type testsuites struct {
	XMLName  xml.Name    `xml:"testsuites"`
	Name     string      `xml:"name,attr"`
	Tests    int         `xml:"tests,attr"`
	Failures int         `xml:"failures,attr"`
	Errors   int         `xml:"errors,attr"`
	Skipped  int         `xml:"skipped,attr"`
	Time     string      `xml:"time,attr"`
	Suites   []testsuite `xml:"testsuite"`
}

type testsuite struct {
	Name       string     `xml:"name,attr"`
	Tests      int        `xml:"tests,attr"`
	Failures   int        `xml:"failures,attr"`
	Errors     int        `xml:"errors,attr"`
	Skipped    int        `xml:"skipped,attr"`
	Time       string     `xml:"time,attr"`
	Properties []property `xml:"properties>property,omitempty"`
	Cases      []testcase `xml:"testcase"`

	seconds float64
}

type property struct {
	Name  string `xml:"name,attr"`
	Value string `xml:"value,attr"`
}

type testcase struct {
	Name      string   `xml:"name,attr"`
	Classname string   `xml:"classname,attr"`
	Time      string   `xml:"time,attr"`
	Failure   *problem `xml:"failure,omitempty"`
	Error     *problem `xml:"error,omitempty"`
	Skipped   *problem `xml:"skipped,omitempty"`
}

type problem struct {
	Message string `xml:"message,attr,omitempty"`
	Type    string `xml:"type,attr,omitempty"`
	Body    string `xml:",chardata"`
}

// Write writes results as one <testsuites> document named suiteName. Results are grouped into
// <testsuite> elements by Result.Suite in order of first appearance, and keep their order
// inside a suite. Every string goes through encoding/xml, which escapes markup and replaces
// characters XML cannot carry, so a reason quoting hostile graph text still gives valid XML.
func Write(w io.Writer, suiteName string, results []harness.Result) error {
	doc := testsuites{Name: suiteName}
	index := map[string]int{}
	var total float64
	for _, r := range results {
		i, ok := index[r.Suite]
		if !ok {
			i = len(doc.Suites)
			index[r.Suite] = i
			doc.Suites = append(doc.Suites, testsuite{Name: r.Suite, Properties: properties(r)})
		}
		s := &doc.Suites[i]
		sec := r.Timing.TotalMS / 1000
		s.seconds += sec
		total += sec
		tc := testcase{Name: r.Case, Classname: classname(suiteName, r.Suite), Time: seconds(sec)}
		s.Tests++
		doc.Tests++
		switch r.Verdict {
		case harness.VerdictPass:
		case harness.VerdictSkip:
			tc.Skipped = &problem{Message: r.Reason}
			s.Skipped++
			doc.Skipped++
		case harness.VerdictError:
			tc.Error = &problem{Message: r.Reason, Type: typeOf(r, "error"), Body: details(r)}
			s.Errors++
			doc.Errors++
		default:
			// A fail, or a verdict this writer does not know: never report it as a pass.
			tc.Failure = &problem{Message: r.Reason, Type: typeOf(r, "fail"), Body: details(r)}
			s.Failures++
			doc.Failures++
		}
		s.Cases = append(s.Cases, tc)
	}
	for i := range doc.Suites {
		doc.Suites[i].Time = seconds(doc.Suites[i].seconds)
	}
	doc.Time = seconds(total)
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return fmt.Errorf("junit: %w", err)
	}
	_, err := io.WriteString(w, "\n")
	return err
}

// properties records where a suite ran, from its first result; CI shows them with the suite.
func properties(r harness.Result) []property {
	var ps []property
	for _, p := range []property{
		{"backend", r.Backend}, {"device", r.Device}, {"device_class", r.DeviceClass},
		{"engine_version", r.Env.EngineVersion}, {"commit", r.Env.Commit},
	} {
		if p.Value != "" {
			ps = append(ps, p)
		}
	}
	return ps
}

func classname(root, suite string) string {
	if root == "" {
		return suite
	}
	return root + "." + suite
}

func typeOf(r harness.Result, fallback string) string {
	if r.ErrorCode != "" {
		return r.ErrorCode
	}
	return fallback
}

// details is the failure body: every output's check, and how to replay the case.
func details(r harness.Result) string {
	var b strings.Builder
	if r.Reason != "" {
		b.WriteString(r.Reason + "\n")
	}
	for _, o := range r.Outputs {
		verdict := "ok"
		if !o.Check.Pass {
			verdict = "MISMATCH: " + o.Check.Reason
		}
		fmt.Fprintf(&b, "output %%%s %s%v [%s]: %s\n", o.Name, o.DType, o.Shape, o.Check.Mode, verdict)
	}
	if r.Seed != 0 {
		fmt.Fprintf(&b, "seed: %d\n", r.Seed)
	}
	if r.ScheduleHash != "" {
		fmt.Fprintf(&b, "schedule hash: %s\n", r.ScheduleHash)
	}
	if r.Replay != "" {
		fmt.Fprintf(&b, "replay: tessera-qa replay %s\n", r.Replay)
	}
	return b.String()
}

func seconds(s float64) string { return fmt.Sprintf("%.3f", s) }
