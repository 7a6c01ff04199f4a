package gradcheck

import (
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
}

// Run checks every case of the selected ops (nil: all) on b, single-device and mesh ones,
// calling progress after each.
func Run(b backend.Backend, ops []string, progress func(Result)) ([]Result, error) {
	cs, err := Cases(ops)
	if err != nil {
		return nil, err
	}
	ms, err := MeshCases(ops)
	if err != nil {
		return nil, err
	}
	out := make([]Result, 0, len(cs)+len(ms))
	add := func(r Result) {
		if progress != nil {
			progress(r)
		}
		out = append(out, r)
	}
	for _, c := range cs {
		add(Check(b, c))
	}
	for _, c := range ms {
		add(CheckMesh(b, c))
	}
	return out, nil
}

// Rows summarizes results per (op, dtype) for every registry op selected by ops (nil: all),
// collectives included (their cases run over a mesh: CheckMesh).
func Rows(results []Result, ops []string) []Row {
	by := map[[2]string][]Result{}
	for _, r := range results {
		k := [2]string{r.Op, r.DType}
		by[k] = append(by[k], r)
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
					if !r.Pass {
						row.Verdict, row.Reason = Fail, r.Name+": "+firstFailure(r)
					}
					for _, in := range r.Inputs {
						row.Worst = max(row.Worst, in.NormErr, in.DirErr)
					}
				}
			}
			rows = append(rows, row)
		}
	}
	return rows
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
