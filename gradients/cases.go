package gradients

import (
	"math"
	"slices"
	"strings"

	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/golden"
)

// PerPair bounds the cases drawn per (op, dtype) from the golden catalogue.
const PerPair = 3

// Cases returns gradient cases for every float (op, dtype) pair of the registry, taken from
// the golden catalogue (same graphs, shapes and input distributions), skipping specs whose
// inputs hold NaN or Inf (edge-value cases: their gradients are not defined). ops filters by
// op name (nil: all).
func Cases(ops []string) ([]Case, error) {
	var out []Case
	for _, def := range graph.Ops() {
		if ops != nil && !contains(ops, def.Name) {
			continue
		}
		for _, dt := range def.DTypes {
			if !dt.IsFloat() {
				continue
			}
			n := 0
			for _, s := range golden.SpecsFor(def.Name, dt) {
				if n == PerPair {
					break
				}
				in, err := s.Inputs()
				if err != nil {
					return nil, err
				}
				if !finite(in) {
					continue
				}
				out = append(out, Case{Name: s.Name, Op: def.Name, DType: dt, Graph: s.Graph, Inputs: in, Seed: s.Seed})
				n++
			}
		}
	}
	return out, nil
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

func finite[T interface{ Float64s() []float64 }](in map[string]T) bool {
	for _, t := range in {
		for _, v := range t.Float64s() {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return false
			}
		}
	}
	return true
}

var _ = numerics.F32

// CasesTagged returns gradient cases from the golden specs of op whose tag (the part of the
// name after op/dtype/) starts with one of tags, in the given float dtypes: the cases of one
// attribute form (issue 21: rounding divisions, axes=[], scalar dims, mse_loss reductions),
// which Cases may not reach past PerPair.
func CasesTagged(op string, dts []numerics.DType, tags ...string) ([]Case, error) {
	var out []Case
	for _, dt := range dts {
		for _, s := range golden.SpecsFor(op, dt) {
			tag := strings.TrimPrefix(s.Name, op+"/"+dt.String()+"/")
			if !slices.ContainsFunc(tags, func(p string) bool { return strings.HasPrefix(tag, p) }) {
				continue
			}
			in, err := s.Inputs()
			if err != nil {
				return nil, err
			}
			if finite(in) {
				out = append(out, Case{Name: s.Name, Op: op, DType: dt, Graph: s.Graph, Inputs: in, Seed: s.Seed})
			}
		}
	}
	return out, nil
}
