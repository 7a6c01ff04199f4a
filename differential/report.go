package differential

import (
	"slices"
	"strings"

	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/harness"
)

// Row verdicts.
const (
	RowPass        = "pass"
	RowFail        = "fail"        // an output disagreed with the oracle
	RowError       = "error"       // a case could not run (engine or oracle error)
	RowUnsupported = "unsupported" // the oracle cannot compute some case of the row
	RowNoCases     = "no cases"    // the catalogue has no spec for this (op, dtype)
)

// Row summarizes one (op, dtype) of a differential run.
type Row struct {
	Op          string `json:"op"`
	DType       string `json:"dtype"`
	Cases       int    `json:"cases"`
	Passed      int    `json:"passed"`
	Failed      int    `json:"failed"`
	Errors      int    `json:"errors"`
	Unsupported int    `json:"unsupported"`
	// MaxAbs, MaxRel and MaxULP are the largest over every compared output of the row.
	MaxAbs  float64 `json:"max_abs"`
	MaxRel  float64 `json:"max_rel"`
	MaxULP  uint64  `json:"max_ulp"`
	Verdict string  `json:"verdict"`
	// Mode lists, once each, how the oracle computed the row's cases (see Outcome.Mode).
	Mode string `json:"mode"`
	// Reason is the first failure, error or unsupported reason of the row.
	Reason string `json:"reason,omitempty"`
}

// OK reports whether the row counts as passed: unsupported rows are reported, not failed.
func (r Row) OK() bool { return r.Verdict == RowPass || r.Verdict == RowUnsupported }

// Summarize builds one row per (op, dtype) that the registry declares for ops (every op when
// ops is empty), in registry order, from the outcomes of a run. A pair with no outcome is a
// "no cases" row, so that a hole in the catalogue shows up instead of vanishing.
func Summarize(ops []string, outcomes []Outcome) []Row {
	type key struct{ op, dt string }
	byKey := map[key][]Outcome{}
	for _, o := range outcomes {
		k := key{o.Op, o.DType.String()}
		byKey[k] = append(byKey[k], o)
	}
	var rows []Row
	for _, def := range graph.Ops() {
		if len(ops) > 0 && !slices.Contains(ops, def.Name) {
			continue
		}
		for _, dt := range def.DTypes {
			rows = append(rows, summarizeRow(def.Name, dt.String(), byKey[key{def.Name, dt.String()}]))
		}
	}
	return rows
}

func summarizeRow(op, dt string, os []Outcome) Row {
	row := Row{Op: op, DType: dt, Cases: len(os)}
	var modes []string
	var firstFail, firstErr, firstSkip string
	for _, o := range os {
		r := o.Result
		if o.Mode != "" && !slices.Contains(modes, o.Mode) {
			modes = append(modes, o.Mode)
		}
		for _, out := range r.Outputs {
			row.MaxAbs = max(row.MaxAbs, out.Check.MaxAbs)
			row.MaxRel = max(row.MaxRel, out.Check.MaxRel)
			row.MaxULP = max(row.MaxULP, out.Check.MaxULP)
		}
		switch r.Verdict {
		case harness.VerdictPass:
			row.Passed++
		case harness.VerdictFail:
			row.Failed++
			firstFail = first(firstFail, r.Case+": "+r.Reason)
		case harness.VerdictSkip:
			row.Unsupported++
			firstSkip = first(firstSkip, r.Case+": "+r.Reason)
		default:
			row.Errors++
			firstErr = first(firstErr, r.Case+": "+r.Reason)
		}
	}
	row.Mode = strings.Join(modes, "; ")
	switch {
	case row.Failed > 0:
		row.Verdict, row.Reason = RowFail, firstFail
	case row.Errors > 0:
		row.Verdict, row.Reason = RowError, firstErr
	case row.Unsupported > 0:
		row.Verdict, row.Reason = RowUnsupported, firstSkip
	case row.Cases == 0:
		row.Verdict, row.Reason = RowNoCases, "the golden catalogue has no spec for "+op+"/"+dt
	default:
		row.Verdict = RowPass
	}
	return row
}

func first(have, s string) string {
	if have != "" {
		return have
	}
	return s
}

// RowsOK reports whether every row passed (or is reported unsupported).
func RowsOK(rows []Row) bool {
	for _, r := range rows {
		if !r.OK() {
			return false
		}
	}
	return true
}
