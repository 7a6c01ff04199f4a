// Command tally prints CI's closing line "N passed, N failed, N skipped" from a Ginkgo JSON
// report (Ginkgo specs) and the run's log (plain `go test` tests that Ginkgo ran, whose
// top-level "--- PASS/FAIL/SKIP:" lines it streams), plus extra named results.
//
//	tally -report ginkgo.json -log run.log [-extra name=pass|fail ...]
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"
)

type specReport struct {
	State    string `json:"State"`
	LeafText string `json:"LeafNodeText"`
}

type suiteReport struct {
	SuitePath      string       `json:"SuitePath"`
	SuiteSucceeded bool         `json:"SuiteSucceeded"`
	SpecReports    []specReport `json:"SpecReports"`
}

type extras []string

func (e *extras) String() string     { return strings.Join(*e, ",") }
func (e *extras) Set(s string) error { *e = append(*e, s); return nil }

func main() {
	report := flag.String("report", "", "Ginkgo JSON report")
	logPath := flag.String("log", "", "log of the run")
	var extra extras
	flag.Var(&extra, "extra", "name=pass|fail (repeatable)")
	flag.Parse()
	passed, failed, skipped := 0, 0, 0
	var failures []string
	if *report != "" {
		var suites []suiteReport
		b, err := os.ReadFile(*report)
		if err == nil {
			err = json.Unmarshal(b, &suites)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "tally: cannot read Ginkgo report %s: %v\n", *report, err)
			failed++
		}
		for _, s := range suites {
			for _, sp := range s.SpecReports {
				switch sp.State {
				case "passed":
					passed++
				case "skipped", "pending":
					skipped++
				case "":
					// setup nodes (BeforeSuite ...) report without a leaf; count only failures
				default:
					failed++
					failures = append(failures, s.SuitePath+": "+sp.LeafText+" ("+sp.State+")")
				}
			}
			if !s.SuiteSucceeded && len(s.SpecReports) == 0 {
				failed++
				failures = append(failures, s.SuitePath+": suite failed")
			}
		}
	}
	if *logPath != "" {
		f, err := os.Open(*logPath)
		if err != nil {
			fmt.Fprintf(os.Stderr, "tally: %v\n", err)
			failed++
		} else {
			sc := bufio.NewScanner(f)
			sc.Buffer(make([]byte, 1<<20), 1<<20)
			for sc.Scan() {
				line := sc.Text()
				switch {
				case strings.HasPrefix(line, "--- PASS: "):
					passed++
				case strings.HasPrefix(line, "--- SKIP: "):
					skipped++
				case strings.HasPrefix(line, "--- FAIL: "):
					failed++
					failures = append(failures, strings.TrimPrefix(line, "--- FAIL: "))
				}
			}
			f.Close()
		}
	}
	for _, e := range extra {
		name, verdict, _ := strings.Cut(e, "=")
		if verdict == "pass" {
			passed++
		} else {
			failed++
			failures = append(failures, name)
		}
	}
	for _, f := range failures {
		fmt.Println("FAILED:", f)
	}
	fmt.Printf("%d passed, %d failed, %d skipped\n", passed, failed, skipped)
	if failed > 0 {
		os.Exit(1)
	}
}
