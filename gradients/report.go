package gradients

import (
	"fmt"

	"github.com/tessera-qa/tessera-qa/engine/autodiff"
	"github.com/tessera-qa/tessera-qa/engine/backend"
	"github.com/tessera-qa/tessera-qa/engine/graph"
)

// Verdicts of a Row.
const (
	Pass   = "pass"
	Fail   = "FAIL"
	NoGrad = "no gradient"
)

// Row is one (op, dtype) line of the gradcheck table: every op of the registry appears, the
// differentiable ones once per dtype.
type Row struct {
	Op      string  `json:"op"`
	DType   string  `json:"dtype,omitempty"`
	Verdict string  `json:"verdict"`
	Cases   int     `json:"cases"`
	Worst   float64 `json:"worst"`  // largest NormErr or DirErr over the cases
	Budget  float64 `json:"budget"` // the dtype's RTol
	Reason  string  `json:"reason,omitempty"`
	// Vs is the oracle comparison's verdict when one was asked for (Options.Vs): one of the
	// Oracle* statuses, "" for rows without a gradient. VsCompared counts the cases the
	// oracle computed, VsWorst is their largest NormErr against it, VsReason says why cases
	// were not compared or failed. A FAIL or error here makes the row's Verdict FAIL.
	Vs         string  `json:"vs,omitempty"`
	VsCompared int     `json:"vs_compared,omitempty"`
	VsWorst    float64 `json:"vs_worst,omitempty"`
	VsReason   string  `json:"vs_reason,omitempty"`
}

// MeshNote is why collective rows have no oracle comparison.
const MeshNote = "collective over a mesh: torch and jax have no SPMD autodiff to compare with (checked against the float64 references only)"

// Run checks every case of the selected ops (nil: all) on b, single-device and mesh ones,
// calling progress after each.
func Run(b backend.Backend, ops []string, progress func(Result)) ([]Result, error) {
	return RunWith(b, ops, Options{Progress: progress})
}

// RunWith is Run with Options: o.Vs adds the oracle comparison (CheckAll); mesh cases get an
// OracleNA verdict saying why they have none.
func RunWith(b backend.Backend, ops []string, o Options) ([]Result, error) {
	cs, err := Cases(ops)
	if err != nil {
		return nil, err
	}
	ms, err := MeshCases(ops)
	if err != nil {
		return nil, err
	}
	out := CheckAll(b, cs, o)
	for _, c := range ms {
		r := CheckMesh(b, c)
		if fw := o.Vs.Framework(); fw != "" {
			r.Oracle = &OracleVerdict{Framework: fw, Device: o.Vs.Target.Device, Status: OracleNA, Note: MeshNote}
		}
		if o.Progress != nil {
			o.Progress(r)
		}
		out = append(out, r)
	}
	return out, nil
}

// Rows summarizes results per (op, dtype) for every registry op selected by ops (nil: all),
// collectives included (their cases run over a mesh: CheckMesh). With oracle verdicts in the
// results, each row also carries the oracle's.
func Rows(results []Result, ops []string) []Row {
	by := map[[2]string][]Result{}
	framework := "" // the oracle's name when the results hold its verdicts
	for _, r := range results {
		k := [2]string{r.Op, r.DType}
		by[k] = append(by[k], r)
		if r.Oracle != nil && framework == "" {
			framework = r.Oracle.Framework
			if framework == "" {
				framework = "oracle"
			}
		}
	}
	var rows []Row
	for _, def := range append(graph.Ops(), graph.CollectiveOps()...) {
		if ops != nil && !contains(ops, def.Name) {
			continue
		}
		if ok, why := autodiff.Differentiable(def.Name); !ok {
			rows = append(rows, Row{Op: def.Name, Verdict: NoGrad, Reason: why})
			continue
		}
		for _, dt := range def.DTypes {
			row := Row{Op: def.Name, DType: dt.String(), Budget: Tolerances[dt].RTol}
			switch {
			case !dt.IsFloat():
				row.Verdict, row.Reason = NoGrad, "integer and bool values carry no gradient"
			default:
				rs := by[[2]string{def.Name, dt.String()}]
				row.Cases, row.Verdict = len(rs), Pass
				if len(rs) == 0 {
					row.Verdict, row.Reason = Fail, "no case in the golden catalogue"
				}
				for _, r := range rs {
					if !r.Pass && r.Oracle.failed() && firstFailure(r) == "failed" {
						row.Verdict, row.Reason = Fail, r.Name+": "+framework+": "+oracleFailure(r.Oracle)
					} else if !r.Pass {
						row.Verdict, row.Reason = Fail, r.Name+": "+firstFailure(r)
					}
					for _, in := range r.Inputs {
						row.Worst = max(row.Worst, in.NormErr, in.DirErr)
					}
				}
				if framework != "" {
					vsRow(&row, rs, framework)
				}
			}
			rows = append(rows, row)
		}
	}
	return rows
}

// vsRow fills a row's oracle columns from its cases' verdicts: FAIL when one case disagreed,
// error when one could not be compared for a reason other than support, pass when at least
// one was compared and none failed, else unsupported or n/a with the first reason.
func vsRow(row *Row, rs []Result, framework string) {
	var failed, errored, unsupported, na []string
	for _, r := range rs {
		ov := r.Oracle
		if ov == nil {
			continue
		}
		switch ov.Status {
		case OraclePass, OracleFail:
			row.VsCompared++
			for _, in := range ov.Inputs {
				row.VsWorst = max(row.VsWorst, in.NormErr)
			}
			if ov.Status == OracleFail {
				failed = append(failed, r.Name+": "+oracleFailure(ov))
			}
		case OracleError:
			errored = append(errored, r.Name+": "+ov.Note)
		case OracleUnsupported:
			unsupported = append(unsupported, r.Name+": "+ov.Note)
		default:
			na = append(na, ov.Note)
		}
	}
	switch {
	case len(failed) > 0:
		row.Vs, row.VsReason = OracleFail, failed[0]
	case len(errored) > 0:
		row.Vs, row.VsReason = OracleError, errored[0]
	case row.VsCompared > 0:
		row.Vs = OraclePass
		if len(unsupported) > 0 {
			row.VsReason = fmt.Sprintf("%d of %d cases compared; unsupported: %s", row.VsCompared, len(rs), unsupported[0])
		}
	case len(unsupported) > 0:
		row.Vs, row.VsReason = OracleUnsupported, unsupported[0]
	case len(na) > 0:
		row.Vs, row.VsReason = OracleNA, na[0]
	case len(rs) > 0:
		row.Vs, row.VsReason = OracleNA, "no case was sent to "+framework
	}
	if row.Op != "" && isCollective(row.Op) && row.Vs == "" {
		row.Vs, row.VsReason = OracleNA, MeshNote
	}
}

func isCollective(op string) bool {
	for _, d := range graph.CollectiveOps() {
		if d.Name == op {
			return true
		}
	}
	return false
}

func oracleFailure(ov *OracleVerdict) string {
	for _, in := range ov.Inputs {
		if in.Fail != "" {
			return in.Fail
		}
	}
	if ov.Note != "" {
		return ov.Note
	}
	return ov.Status
}

func firstFailure(r Result) string {
	if r.Err != "" {
		return r.Err
	}
	for _, in := range r.Inputs {
		if in.Fail != "" {
			return in.Fail
		}
	}
	return "failed"
}

// RowsOK reports whether no row failed.
func RowsOK(rows []Row) bool {
	for _, r := range rows {
		if r.Verdict == Fail {
			return false
		}
	}
	return true
}
