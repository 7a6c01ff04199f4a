package junit

import (
	"bytes"
	"encoding/xml"
	"strings"
	"testing"

	"github.com/tessera-qa/tessera-qa/harness"
)

func result(suite, name, verdict, reason string) harness.Result {
	return harness.Result{Suite: suite, Case: name, Verdict: verdict, Reason: reason, Backend: "cpu",
		Timing: harness.Timing{TotalMS: 1500}}
}

// parsed mirrors the JUnit schema independently of the writer's own types.
type parsed struct {
	XMLName  xml.Name `xml:"testsuites"`
	Name     string   `xml:"name,attr"`
	Tests    int      `xml:"tests,attr"`
	Failures int      `xml:"failures,attr"`
	Errors   int      `xml:"errors,attr"`
	Skipped  int      `xml:"skipped,attr"`
	Suites   []struct {
		Name     string `xml:"name,attr"`
		Tests    int    `xml:"tests,attr"`
		Failures int    `xml:"failures,attr"`
		Time     string `xml:"time,attr"`
		Props    []struct {
			Name  string `xml:"name,attr"`
			Value string `xml:"value,attr"`
		} `xml:"properties>property"`
		Cases []struct {
			Name      string `xml:"name,attr"`
			Classname string `xml:"classname,attr"`
			Failure   *struct {
				Message string `xml:"message,attr"`
				Type    string `xml:"type,attr"`
				Body    string `xml:",chardata"`
			} `xml:"failure"`
			Error *struct {
				Message string `xml:"message,attr"`
			} `xml:"error"`
			Skipped *struct {
				Message string `xml:"message,attr"`
			} `xml:"skipped"`
		} `xml:"testcase"`
	} `xml:"testsuite"`
}

func write(t *testing.T, rs []harness.Result) (string, parsed) {
	t.Helper()
	var buf bytes.Buffer
	if err := Write(&buf, "tessera-qa", rs); err != nil {
		t.Fatal(err)
	}
	var p parsed
	if err := xml.Unmarshal(buf.Bytes(), &p); err != nil {
		t.Fatalf("output is not valid XML: %v\n%s", err, buf.String())
	}
	return buf.String(), p
}

func TestWriteGroupsAndCounts(t *testing.T) {
	fail := result("golden", "matmul/f32", harness.VerdictFail, "output %y: 3 of 16 elements out of tolerance")
	fail.ErrorCode = ""
	fail.Replay = "out/replay/golden--matmul_f32--cpu.replay.json"
	errd := result("smoke", "s1", harness.VerdictError, "E_SHAPE: bad")
	errd.ErrorCode = "E_SHAPE"
	rs := []harness.Result{
		result("golden", "add/f32", harness.VerdictPass, ""),
		result("smoke", "s0", harness.VerdictPass, ""),
		fail,
		errd,
		result("smoke", "s2", harness.VerdictSkip, "E_NO_DEVICE: no GPU"),
	}
	text, p := write(t, rs)
	if !strings.HasPrefix(text, "<?xml") {
		t.Errorf("no XML header:\n%s", text)
	}
	if p.Name != "tessera-qa" || p.Tests != 5 || p.Failures != 1 || p.Errors != 1 || p.Skipped != 1 {
		t.Errorf("totals: %+v", p)
	}
	if len(p.Suites) != 2 || p.Suites[0].Name != "golden" || p.Suites[1].Name != "smoke" {
		t.Fatalf("suites not grouped in first-appearance order: %+v", p.Suites)
	}
	g := p.Suites[0]
	if g.Tests != 2 || g.Failures != 1 || g.Time != "3.000" {
		t.Errorf("golden suite: tests %d failures %d time %s", g.Tests, g.Failures, g.Time)
	}
	if g.Cases[0].Failure != nil || g.Cases[0].Classname != "tessera-qa.golden" {
		t.Errorf("passing case: %+v", g.Cases[0])
	}
	f := g.Cases[1].Failure
	if f == nil || f.Type != "fail" || !strings.Contains(f.Message, "out of tolerance") ||
		!strings.Contains(f.Body, "tessera-qa replay out/replay/golden--matmul_f32--cpu.replay.json") {
		t.Errorf("failure element: %+v", f)
	}
	s := p.Suites[1]
	if s.Cases[1].Error == nil || s.Cases[2].Skipped == nil || s.Cases[0].Error != nil {
		t.Errorf("smoke verdict elements: %+v", s.Cases)
	}
	if len(g.Props) == 0 || g.Props[0].Name != "backend" || g.Props[0].Value != "cpu" {
		t.Errorf("properties: %+v", g.Props)
	}
}

func TestWriteEscapesHostileText(t *testing.T) {
	reason := "E_PARSE: x.tg:1:2: ]]></failure><testcase name=\"evil\"/> & \x00\x1b bad"
	rs := []harness.Result{result("golden", "a<b>&\"c\"", harness.VerdictFail, reason)}
	_, p := write(t, rs)
	if p.Tests != 1 || len(p.Suites) != 1 || len(p.Suites[0].Cases) != 1 {
		t.Fatalf("hostile text changed the document's structure: %+v", p)
	}
	c := p.Suites[0].Cases[0]
	if c.Name != "a<b>&\"c\"" {
		t.Errorf("case name round trip: %q", c.Name)
	}
	if c.Failure == nil || !strings.Contains(c.Failure.Message, "</failure><testcase") {
		t.Errorf("message lost its text: %+v", c.Failure)
	}
}

func TestWriteUnknownVerdictIsAFailure(t *testing.T) {
	_, p := write(t, []harness.Result{result("x", "y", "weird", "")})
	if p.Failures != 1 {
		t.Errorf("an unknown verdict must not read as a pass: %+v", p)
	}
}

func TestWriteEmpty(t *testing.T) {
	_, p := write(t, nil)
	if p.Tests != 0 || len(p.Suites) != 0 {
		t.Errorf("empty: %+v", p)
	}
}
