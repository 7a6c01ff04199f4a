package optimizers

import (
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/tessera-qa/tessera-qa/engine/backend"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/engine/optim"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
)

// Shapes are the params of every problem: a vector loop with a tail (37*29 = 1073 elements), a
// short vector and a 0-dim param.
var Shapes = map[string][]int{"fc.w": {37, 29}, "fc.b": {29}, "scale": {}}

// Steps is how many updates each problem runs.
const Steps = 10

// Problem is one configuration's seeded run: initial params, a grad per step and a decaying
// learning-rate schedule.
type Problem struct {
	Config Config
	DType  numerics.DType
	Names  []string                    // param names, sorted
	Init   map[string]*tensor.Tensor   // params before step 1
	Grads  []map[string]*tensor.Tensor // grads of step k at [k-1]
	LRs    []float64
}

// NewProblem draws the problem of configuration index ci in dtype dt: params ~ N(0,1), grads
// over five decades with about one element in 16 exactly zero.
func NewProblem(ci int, c Config, dt numerics.DType) Problem {
	rng := rand.New(rand.NewPCG(uint64(ci), 2024))
	pr := Problem{Config: c, DType: dt, Names: slices.Sorted(maps.Keys(Shapes)), Init: map[string]*tensor.Tensor{}}
	for _, n := range pr.Names {
		v := make([]float64, tensor.NumElems(Shapes[n]))
		for i := range v {
			v[i] = rng.NormFloat64()
		}
		pr.Init[n] = tensor.FromFloat64(dt, Shapes[n], v)
	}
	for k := 1; k <= Steps; k++ {
		pr.LRs = append(pr.LRs, lrOf(c.Opt)*(1-0.05*float64(k-1)))
		g := map[string]*tensor.Tensor{}
		for _, n := range pr.Names {
			v := make([]float64, tensor.NumElems(Shapes[n]))
			for i := range v {
				if rng.IntN(16) != 0 {
					v[i] = rng.NormFloat64() * math.Pow(10, rng.Float64()*4-3)
				}
			}
			g[n] = tensor.FromFloat64(dt, Shapes[n], v)
		}
		pr.Grads = append(pr.Grads, g)
	}
	return pr
}

// Snapshot is every tensor after one step: "<param>" and "<param>/<buffer>".
type Snapshot map[string]*tensor.Tensor

// RunEngine runs the problem through engine/optim on b.
func RunEngine(b backend.Backend, pr Problem) ([]Snapshot, error) {
	params := map[string]*tensor.Tensor{}
	for n, t := range pr.Init {
		params[n] = t.Clone()
	}
	st := optim.NewState()
	var out []Snapshot
	for k := range Steps {
		if err := withLR(pr.Config.Opt, pr.LRs[k]).Step(b, params, pr.Grads[k], st); err != nil {
			return nil, err
		}
		snap := Snapshot(st.Tensors())
		for n, t := range params {
			snap[n] = t.Clone()
		}
		out = append(out, snap)
	}
	return out, nil
}

// RunReference runs the problem through the reference.
func RunReference(pr Problem) []Snapshot {
	cd := numerics.F32
	if pr.DType == numerics.F64 {
		cd = numerics.F64
	}
	params := map[string]*refParam{}
	for n, t := range pr.Init {
		params[n] = &refParam{p: t.Float64s(), buf: map[string][]float64{}}
	}
	var out []Snapshot
	for k := range Steps {
		grads := map[string][]float64{}
		for n, t := range pr.Grads[k] {
			grads[n] = t.Float64s()
		}
		refStep(pr.Config.Opt, pr.LRs[k], k+1, pr.DType, params, grads)
		snap := Snapshot{}
		for n, rp := range params {
			snap[n] = tensor.FromFloat64(pr.DType, Shapes[n], rp.p)
			for b, v := range rp.buf {
				snap[n+"/"+b] = tensor.FromFloat64(cd, Shapes[n], v)
			}
		}
		out = append(out, snap)
	}
	return out
}

// Bound is how closely two runs must agree.
type Bound int

const (
	// Bitwise: the same bytes.
	Bitwise Bound = iota
	// Normwise: max|a-b| <= 1e-14 * max|b| per tensor (f64, where engine/optim rounds an fma
	// twice and torch once).
	Normwise
)

// EngineBound is how the engine must agree with the reference for params of dt.
func EngineBound(dt numerics.DType) Bound {
	if dt == numerics.F64 {
		return Normwise
	}
	return Bitwise
}

// Compare checks run a against run b (the reference, or torch) under bound: every tensor of b
// present in a with its type, within the bound, on every step; and b's params must have moved
// (the magnitude guard: a run where nothing changes agrees with anything). It returns one line
// per problem, the first per tensor.
func Compare(pr Problem, a, b []Snapshot, bound Bound) []string {
	var out []string
	if len(a) != len(b) {
		return []string{fmt.Sprintf("%d steps against %d", len(a), len(b))}
	}
	bad := map[string]bool{}
	for k := range b {
		if len(a[k]) != len(b[k]) {
			out = append(out, fmt.Sprintf("step %d: %d tensors (%s) against %d (%s)", k+1, len(a[k]), keys(a[k]), len(b[k]), keys(b[k])))
		}
		for _, key := range slices.Sorted(maps.Keys(b[k])) {
			want, got := b[k][key], a[k][key]
			if bad[key] {
				continue
			}
			if got == nil || got.DType != want.DType || !slices.Equal(got.Shape, want.Shape) {
				bad[key] = true
				out = append(out, fmt.Sprintf("step %d %s: missing or of another type (want %s)", k+1, key, want.TypeString()))
				continue
			}
			if why := within(got, want, bound); why != "" {
				bad[key] = true
				out = append(out, fmt.Sprintf("step %d %s: %s", k+1, key, why))
			}
		}
	}
	if moved, n := changed(pr.Init[guarded], b[len(b)-1][guarded]); moved < n/4 {
		out = append(out, fmt.Sprintf("only %d of %d elements of %s changed in %d steps: the run proves little", moved, n, guarded, len(b)))
	}
	return out
}

// guarded is the param whose movement Compare requires (a quarter of its elements: bf16 at lr
// 1e-3 moves about a third of them in ten steps): the small ones may legitimately stay
// put (a 16-bit param loses every update under half an ulp).
const guarded = "fc.w"

func changed(before, after *tensor.Tensor) (moved, n int) {
	if before == nil || after == nil {
		return 0, 1
	}
	for i := range before.Len() {
		if before.Bits(i) != after.Bits(i) {
			moved++
		}
	}
	return moved, before.Len()
}

func within(got, want *tensor.Tensor, bound Bound) string {
	differ, first := 0, -1
	var maxAbs, scale float64
	for i := range want.Len() {
		if got.Bits(i) != want.Bits(i) {
			differ++
			if first < 0 {
				first = i
			}
		}
		maxAbs = max(maxAbs, math.Abs(got.Float64(i)-want.Float64(i)))
		scale = max(scale, math.Abs(want.Float64(i)))
	}
	switch {
	case bound == Bitwise && differ > 0:
		return fmt.Sprintf("%d of %d elements differ in their bits (first [%d]: %v, want %v; %d ulp)", differ, want.Len(), first,
			got.Float64(first), want.Float64(first), numerics.ULPDistance(want.DType, got.Bits(first), want.Bits(first)))
	case bound == Normwise && (maxAbs > 1e-14*scale || math.IsNaN(maxAbs)):
		return fmt.Sprintf("max abs difference %g over 1e-14 of the largest element %g", maxAbs, scale)
	}
	return ""
}

func keys(s Snapshot) string { return strings.Join(slices.Sorted(maps.Keys(s)), ",") }

// Check runs every configuration of the grid in every dtype through the engine on b and the
// reference, and returns one line per disagreement, prefixed by configuration and dtype.
func Check(b backend.Backend) ([]string, error) {
	var out []string
	for ci, c := range Configs() {
		for _, dt := range DTypes {
			pr := NewProblem(ci, c, dt)
			ours, err := RunEngine(b, pr)
			if err != nil {
				return nil, fmt.Errorf("%s %s: %w", c.Name, dt, err)
			}
			for _, line := range Compare(pr, ours, RunReference(pr), EngineBound(dt)) {
				out = append(out, fmt.Sprintf("%s %s: %s", c.Name, dt, line))
			}
		}
	}
	return out, nil
}
