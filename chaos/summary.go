package chaos

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// Summary aggregates the reports of several runs (the --count runs of a random schedule).
type Summary struct {
	Runs              int      `json:"runs"`
	Passed            int      `json:"passed"`
	Faults            int      `json:"faults"`
	Detected          int      `json:"detected"`
	Tolerated         int      `json:"tolerated"`
	Masked            int      `json:"masked"`
	Undetected        int      `json:"undetected"`
	SilentCorruptions int      `json:"silent_corruptions"` // runs whose applied steps or final bits differ from the fault-free run
	Hangs             int      `json:"hangs"`              // runs that did not end within their bound
	Recovered         int      `json:"recovered_runs"`     // runs with a restart that finished with identical bits
	TTD               Quantile `json:"time_to_detect_s"`
	TTR               Quantile `json:"time_to_recover_s"`
	LostSteps         int      `json:"lost_steps"`
	Restarts          int      `json:"restarts"`
	Worst             []Worst  `json:"worst,omitempty"`
}

// Quantile summarizes a set of durations (seconds).
type Quantile struct {
	N   int     `json:"n"`
	P50 float64 `json:"p50"`
	P95 float64 `json:"p95"`
	Max float64 `json:"max"`
}

// Worst is one of the slowest recoveries, with what reproduces it.
type Worst struct {
	Scenario string  `json:"scenario"`
	Fault    string  `json:"fault"`
	TTD      float64 `json:"time_to_detect_s"`
	TTR      float64 `json:"time_to_recover_s"`
}

func quantile(xs []float64) Quantile {
	if len(xs) == 0 {
		return Quantile{}
	}
	s := slices.Sorted(slices.Values(xs))
	at := func(p float64) float64 { return s[int(math.Ceil(p*float64(len(s))))-1] }
	return Quantile{N: len(s), P50: at(0.5), P95: at(0.95), Max: s[len(s)-1]}
}

// Summarize aggregates reports; worst lists the n slowest recoveries.
func Summarize(reps []*Report, worst int) Summary {
	var s Summary
	var ttd, ttr []float64
	var all []Worst
	for _, r := range reps {
		s.Runs++
		if r.Passed {
			s.Passed++
		}
		if r.Hung {
			s.Hangs++
		}
		for _, v := range r.Violations {
			if strings.HasPrefix(v, "silent corruption") || strings.HasPrefix(v, "final parameters") {
				s.SilentCorruptions++
				break
			}
		}
		if r.Restarts > 0 && r.Finished && r.BitsIdentical {
			s.Recovered++
		}
		s.LostSteps += r.LostSteps
		s.Restarts += r.Restarts
		for _, f := range r.Faults {
			s.Faults++
			switch {
			case f.Outcome == "detected":
				s.Detected++
				ttd = append(ttd, f.TTD)
			case f.Outcome == "tolerated":
				s.Tolerated++
			case strings.HasPrefix(f.Outcome, "masked"):
				s.Masked++
			default:
				s.Undetected++
			}
			if f.TTR > 0 {
				ttr = append(ttr, f.TTR)
			}
			all = append(all, Worst{Scenario: r.Scenario, Fault: f.ID + " " + f.Fault, TTD: f.TTD, TTR: f.TTR})
		}
	}
	s.TTD, s.TTR = quantile(ttd), quantile(ttr)
	slices.SortStableFunc(all, func(a, b Worst) int { return -cmpF(a.TTR+a.TTD, b.TTR+b.TTD) })
	s.Worst = all[:min(worst, len(all))]
	return s
}

func cmpF(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// String is the summary as a few lines.
func (s Summary) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d/%d run(s) passed; %d fault(s): %d detected, %d tolerated, %d masked, %d undetected; %d silent corruption(s), %d hang(s); %d restart(s), %d step(s) lost to rollbacks\n",
		s.Passed, s.Runs, s.Faults, s.Detected, s.Tolerated, s.Masked, s.Undetected, s.SilentCorruptions, s.Hangs, s.Restarts, s.LostSteps)
	fmt.Fprintf(&b, "time to detect:  p50 %s  p95 %s  max %s  (%d)\n", dur(s.TTD.P50), dur(s.TTD.P95), dur(s.TTD.Max), s.TTD.N)
	fmt.Fprintf(&b, "time to recover: p50 %s  p95 %s  max %s  (%d)\n", dur(s.TTR.P50), dur(s.TTR.P95), dur(s.TTR.Max), s.TTR.N)
	return b.String()
}

// Document is what `tessera-qa chaos --json` writes and `tessera-qa report ingest` reads
// (report/parse, kind "tessera-chaos").
type Document struct {
	Schema        int         `json:"schema"` // DocumentSchema
	Kind          string      `json:"kind"`   // DocumentKind
	Started       time.Time   `json:"started"`
	Machine       string      `json:"machine,omitempty"`
	Command       string      `json:"command,omitempty"`
	Passed        bool        `json:"passed"`
	BitsIdentical bool        `json:"bits_identical"` // every run ended with the fault-free run's parameters
	Summary       Summary     `json:"summary"`
	Scenarios     []*Report   `json:"scenarios"`
	Specs         []*Scenario `json:"scenario_specs"`
}

// The chaos document's schema and kind.
const (
	DocumentSchema = 1
	DocumentKind   = "tessera-chaos"
)
