package gradients

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/autodiff"
	"github.com/tessera-qa/tessera-qa/engine/backend"
	"github.com/tessera-qa/tessera-qa/engine/compiler"
	"github.com/tessera-qa/tessera-qa/engine/dist"
	"github.com/tessera-qa/tessera-qa/engine/dist/run"
	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/engine/ref"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
	"github.com/tessera-qa/tessera-qa/golden"
	"github.com/tessera-qa/tessera-qa/harness"
)

// MeshCase is an SPMD graph with every rank's inputs (golden's DistCatalogue specs).
type MeshCase struct {
	Name       string
	Op         string
	DType      numerics.DType
	Graph      *graph.Graph
	RankInputs []map[string]*tensor.Tensor
	Seed       uint64
}

// MeshCases returns the float cases of the differentiable collectives from golden's
// DistCatalogue, PerPair per (op, dtype); ops filters by name (nil: all).
func MeshCases(ops []string) ([]MeshCase, error) {
	count := map[[2]string]int{}
	var out []MeshCase
	for _, s := range golden.DistCatalogue() {
		d, ok := graph.Lookup(s.Op)
		k := [2]string{s.Op, s.DType.String()}
		if !ok || d.Grad == nil || !s.DType.IsFloat() || count[k] == PerPair || (ops != nil && !contains(ops, s.Op)) {
			continue
		}
		in, err := s.RankInputs()
		if err != nil {
			return nil, err
		}
		fin := true
		for _, m := range in {
			fin = fin && finite(m)
		}
		if !fin {
			continue
		}
		count[k]++
		out = append(out, MeshCase{Name: s.Name, Op: s.Op, DType: s.DType, Graph: s.Graph, RankInputs: in, Seed: s.Seed})
	}
	return out, nil
}

// CheckMesh is Check over a mesh: the gradient of the sum over ranks of <c_r, y_r>, run by the
// engine with one goroutine per rank over the in-process transport (deterministic mode), and
// judged per rank and input against the golden model's float64 SPMD run (ref.RunDist) and its
// finite differences.
func CheckMesh(b backend.Backend, c MeshCase) Result {
	res := Result{Name: c.Name, Op: c.Op, DType: c.DType.String()}
	tol, ok := Tolerances[c.DType]
	if !ok {
		res.Err = fmt.Sprintf("no gradient tolerance for dtype %s", c.DType)
		return res
	}
	if err := checkMesh(b, c, tol, &res); err != nil {
		res.Err = err.Error()
		return res
	}
	res.Pass = true
	for _, in := range res.Inputs {
		res.Pass = res.Pass && in.Fail == ""
	}
	return res
}

func checkMesh(b backend.Backend, c MeshCase, tol Tol, res *Result) error {
	vg, err := autodiff.VJP(c.Graph)
	if err != nil {
		return err
	}
	g64, err := Retype(c.Graph, numerics.F64)
	if err != nil {
		return err
	}
	vg64, err := autodiff.VJP(g64)
	if err != nil {
		return err
	}
	world := len(c.RankInputs)
	feeds, cots := meshFeeds(c)
	feeds64 := make([]map[string]*tensor.Tensor, world)
	for r := range world {
		feeds64[r] = widen(feeds[r])
	}
	outs, err := runMesh(b, vg, feeds)
	if err != nil {
		return err
	}
	outs64, err := ref.RunDist(vg64, feeds64)
	if err != nil {
		return err
	}
	// outputs runs the float64 SPMD graph: every rank's outputs.
	outputs := func(in []map[string]*tensor.Tensor) ([][][]float64, error) {
		ys, err := ref.RunDist(g64, in)
		if err != nil {
			return nil, err
		}
		out := make([][][]float64, world)
		for r := range world {
			for _, y := range ys[r] {
				out[r] = append(out[r], y.Float64s())
			}
		}
		return out, nil
	}
	// delta is the objective's change sum_r <c_r, y_r(a) - y_r(b)>, element by element (see
	// finiteDiff).
	delta := func(a, b [][][]float64) float64 {
		f := 0.0
		for r := range world {
			for i, o := range g64.Outputs {
				for k, c := range cots[r][autodiff.CotangentPrefix+o.Name].Float64s() {
					f += c * (a[r][i][k] - b[r][i][k])
				}
			}
		}
		return f
	}
	nout := len(c.Graph.Outputs)
	var wrt []string
	for _, in := range c.Graph.Inputs {
		if in.Type.DType.IsFloat() {
			wrt = append(wrt, in.Name)
		}
	}
	for r := range world {
		for i, name := range wrt {
			v := InputVerdict{Name: fmt.Sprintf("%s@rank%d", name, r)}
			got, want := outs[r][nout+i].Float64s(), outs64[r][nout+i].Float64s()
			v.NormErr = normErr(got, want, tol.ATol)
			if !(v.NormErr <= tol.RTol) {
				v.Fail = fmt.Sprintf("gradient of %%%s: max|g-g64| = %.3g of max|g64| (budget %.3g)", v.Name, v.NormErr, tol.RTol)
			}
			u := harness.RandomTensor(numerics.F64, outs64[r][nout+i].Shape, harness.SubSeed(c.Seed, "direction/"+v.Name), harness.DefaultDist(numerics.F64)).Float64s()
			h := Step
			move := func(t float64) ([][][]float64, error) {
				in := make([]map[string]*tensor.Tensor, world)
				for q := range world {
					in[q] = map[string]*tensor.Tensor{}
					for _, gv := range g64.Inputs {
						in[q][gv.Name] = feeds64[q][gv.Name]
					}
				}
				x := feeds64[r][name].Clone()
				for k, xv := range x.Float64s() {
					x.SetFloat64(k, xv+t*u[k])
				}
				in[r][name] = x
				return outputs(in)
			}
			fp, err := move(h)
			if err != nil {
				return err
			}
			fm, err := move(-h)
			if err != nil {
				return err
			}
			fd := delta(fp, fm) / (2 * h)
			scale := 0.0
			for k := range u {
				scale += math.Abs(want[k] * u[k])
			}
			v.RuleErr = relTo(dot(want, u)-fd, scale)
			v.DirErr = max(relTo(dot(got, u)-fd, scale)-FDTol, 0)
			switch {
			case v.Fail != "":
			case !(v.RuleErr <= FDTol):
				v.Fail = fmt.Sprintf("gradient of %%%s: the float64 rule misses finite differences by %.3g: the VJP rule is wrong", v.Name, v.RuleErr)
			case !(v.DirErr <= tol.RTol):
				v.Fail = fmt.Sprintf("gradient of %%%s: directional derivative off by %.3g (budget %.3g)", v.Name, v.DirErr, tol.RTol)
			}
			res.Inputs = append(res.Inputs, v)
		}
	}
	return nil
}

// meshFeeds is every rank's inputs and cotangents (d_<output>), and the cotangents alone.
func meshFeeds(c MeshCase) (feeds, cots []map[string]*tensor.Tensor) {
	world := len(c.RankInputs)
	feeds, cots = make([]map[string]*tensor.Tensor, world), make([]map[string]*tensor.Tensor, world)
	for r := range world {
		feeds[r], cots[r] = map[string]*tensor.Tensor{}, map[string]*tensor.Tensor{}
		for k, v := range c.RankInputs[r] {
			feeds[r][k] = v
		}
		for i, o := range c.Graph.Outputs {
			name := autodiff.CotangentPrefix + o.Name
			t := harness.RandomTensor(o.Type.DType, o.Type.Shape, harness.SubSeed(c.Seed, fmt.Sprintf("cotangent/%d@%d", i, r)), harness.DefaultDist(o.Type.DType))
			feeds[r][name], cots[r][name] = t, t
		}
	}
	return feeds, cots
}

// runMesh compiles the SPMD backward vg and runs it with one goroutine per rank over the
// in-process transport, in deterministic mode.
func runMesh(b backend.Backend, vg *graph.Graph, feeds []map[string]*tensor.Tensor) ([][]*tensor.Tensor, error) {
	dp, err := compiler.CompileDist(vg, compiler.Options{})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return run.Inproc(ctx, dp, b, dist.Options{Mode: dist.Deterministic}, feeds)
}

// MeshGradients runs the engine's SPMD backward of c on b at the inputs and cotangents
// CheckMesh uses and returns every rank's gradients (one per float input, in input order).
// Each call compiles afresh.
func MeshGradients(b backend.Backend, c MeshCase) ([][]*tensor.Tensor, error) {
	vg, err := autodiff.VJP(c.Graph)
	if err != nil {
		return nil, err
	}
	feeds, _ := meshFeeds(c)
	outs, err := runMesh(b, vg, feeds)
	if err != nil {
		return nil, err
	}
	for r := range outs {
		outs[r] = outs[r][len(c.Graph.Outputs):]
	}
	return outs, nil
}
