// Package gradients checks reverse-mode gradients (engine/autodiff) op by op and dtype by
// dtype, in the style of JAX's check_grads, against two float64 references:
//
//   - central finite differences of the golden model (engine/ref) in float64, along random
//     directions: <grad, u> must match (F(x+hu) - F(x-hu)) / 2h;
//   - the same backward graph retyped to float64 and run by the golden model, compared with
//     the engine's gradient normwise: max|g - g64| <= RTol * max|g64|.
//
// F is <c, f(x)> for a random cotangent c, so every output element contributes. The point x
// is the case's input rounded to its dtype, so the engine and the references differentiate
// the same function at the same point; only the engine works in the narrow dtype.
package gradients

import (
	"fmt"
	"math"
	"slices"

	"github.com/tessera-qa/tessera-qa/engine/autodiff"
	"github.com/tessera-qa/tessera-qa/engine/backend"
	"github.com/tessera-qa/tessera-qa/engine/compiler"
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/engine/ref"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
	"github.com/tessera-qa/tessera-qa/harness"
)

// Tol is the documented budget of one dtype.
type Tol struct {
	// RTol bounds the engine's gradient against the float64 one, normwise (relative to the
	// largest float64 gradient element) and along each direction (relative to sum |g64*u|).
	RTol float64
	// ATol is one ulp of the dtype's subnormal range, added to the normwise bound (and
	// ATol*sum|u| to the directional one): a gradient below the normal range, such as a mean's
	// 1/N in fp8, is rounded to that grid whatever its relative size.
	ATol float64
}

// Step is the finite-difference step relative to each element of x (scaleDirection); with
// Richardson's extrapolation of central differences in float64 the truncation error is
// ~Step^4 and the rounding error ~1e-16/Step (fdResult.noise), both far below FDTol.
const Step = 1e-5

// FDTol bounds |<g64, u> - FD| relative to sum |g64*u|: the float64 rule against float64
// finite differences.
const FDTol = 1e-6

// Directions is the number of random directions per input.
const Directions = 2

// Tolerances: f64 and f32 differ from the float64 rule only by summation order and one
// rounding per stored value; 16- and 8-bit gradients carry the rounding of the forward
// values the rule reads (y of exp, softmax ...) and of the gradient itself, about one or two
// ulps of the format relative to the largest element.
var Tolerances = map[numerics.DType]Tol{
	numerics.F64:    {RTol: 1e-12, ATol: 0x1p-1074},
	numerics.F32:    {RTol: 5e-6, ATol: 0x1p-149},
	numerics.F16:    {RTol: 5e-3, ATol: 0x1p-24},
	numerics.BF16:   {RTol: 3e-2, ATol: 0x1p-133},
	numerics.F8E4M3: {RTol: 0.25, ATol: 0x1p-9},
	numerics.F8E5M2: {RTol: 0.6, ATol: 0x1p-16},
}

// Case is one single-op (or any) graph with its inputs.
type Case struct {
	Name   string
	Op     string
	DType  numerics.DType
	Graph  *graph.Graph
	Inputs map[string]*tensor.Tensor
	Seed   uint64
	// Tol, when not zero, replaces Tolerances[DType]: a random graph's budget (property's
	// grad/agree scales it to the graph's own rounding noise).
	Tol Tol
}

// Result is the verdict on one case: one Input per differentiated input.
type Result struct {
	Name   string         `json:"name"`
	Op     string         `json:"op"`
	DType  string         `json:"dtype"`
	Pass   bool           `json:"pass"`
	NoGrad string         `json:"no_grad,omitempty"` // the op has no gradient: why
	Err    string         `json:"error,omitempty"`
	Inputs []InputVerdict `json:"inputs,omitempty"`
	// Oracle is the comparison with an independent framework's autodiff (Options.Vs), nil
	// when none was asked for. Its disagreement or failure fails the case.
	Oracle *OracleVerdict `json:"oracle,omitempty"`
}

// InputVerdict holds the numbers behind one input's verdict.
type InputVerdict struct {
	Name string `json:"name"`
	// NormErr is max|g - g64| / max|g64| (0/0 = 0 for a zero gradient).
	NormErr float64 `json:"norm_err"`
	// DirErr is the worst |<g,u> - FD| / (max|g64| sum|u|) over the directions (normwise,
	// like NormErr); RuleErr is |<g64,u> - FD| / sum|g64*u| (the float64 rule against finite
	// differences, judged sharply).
	DirErr  float64 `json:"dir_err"`
	RuleErr float64 `json:"rule_err"`
	// Kink: finite differences were not applicable along some direction (the one-sided
	// slopes differ: x sits on a kink of relu/abs/max; halving the step doubles them: a jump
	// of sign at 0; or a step left the float64 range), so that direction was judged against
	// the float64 rule only.
	Kink bool   `json:"kink,omitempty"`
	Fail string `json:"fail,omitempty"`
}

// Check differentiates c.Graph with respect to every float input and judges the engine's
// gradient on b.
func Check(b backend.Backend, c Case) Result {
	res, _ := checkCase(b, c, feedOf(c))
	return res
}

// checkCase is Check on a prepared feed; it also returns the engine's gradients (one per
// float input, in input order) for the oracle comparison, nil when there are none to compare.
func checkCase(b backend.Backend, c Case, f caseFeed) (Result, []*tensor.Tensor) {
	res := Result{Name: c.Name, Op: c.Op, DType: c.DType.String()}
	if d, ok := graph.Lookup(c.Op); ok && d.Grad == nil {
		_, why := autodiff.Differentiable(c.Op)
		res.NoGrad, res.Pass = why, true
		return res, nil
	}
	tol, ok := Tolerances[c.DType]
	if c.Tol != (Tol{}) {
		tol, ok = c.Tol, true
	}
	if !ok {
		res.Err = fmt.Sprintf("no gradient tolerance for dtype %s", c.DType)
		return res, nil
	}
	grads, err := check(b, c, f, tol, &res)
	if err != nil {
		res.Err = err.Error()
		return res, nil
	}
	res.Pass = true
	for _, in := range res.Inputs {
		res.Pass = res.Pass && in.Fail == ""
	}
	return res, grads
}

// Gradients runs the engine's backward of c on b at the inputs and cotangents Check uses and
// returns one gradient per float input, in input order. Each call compiles afresh (the
// determinism specs compare two calls bit for bit).
func Gradients(b backend.Backend, c Case) ([]*tensor.Tensor, error) {
	vg, err := autodiff.VJP(c.Graph)
	if err != nil {
		return nil, err
	}
	prog, err := compiler.Compile(vg, compiler.Options{})
	if err != nil {
		return nil, err
	}
	outs, err := b.Run(prog, feedOf(c).feed)
	if err != nil {
		return nil, err
	}
	return outs[len(c.Graph.Outputs):], nil
}

// caseFeed is what one case's gradient is taken at: its inputs, one cotangent d_<output> per
// distinct float output, and the inputs differentiated (VJP's default: every float input, in
// input order).
type caseFeed struct {
	feed map[string]*tensor.Tensor // inputs and cotangents
	cots map[string]*tensor.Tensor // d_<output> -> cotangent
	wrt  []string
}

func feedOf(c Case) caseFeed {
	f := caseFeed{feed: map[string]*tensor.Tensor{}, cots: map[string]*tensor.Tensor{}}
	for k, v := range c.Inputs {
		f.feed[k] = v
	}
	for i, o := range c.Graph.Outputs {
		name := autodiff.CotangentPrefix + o.Name
		if !o.Type.DType.IsFloat() || f.cots[name] != nil {
			continue // an output listed twice has one cotangent (autodiff.VJP)
		}
		f.cots[name] = harness.RandomTensor(o.Type.DType, o.Type.Shape, harness.SubSeed(c.Seed, fmt.Sprintf("cotangent/%d", i)), harness.DefaultDist(o.Type.DType))
		f.feed[name] = f.cots[name]
	}
	for _, in := range c.Graph.Inputs {
		if in.Type.DType.IsFloat() {
			f.wrt = append(f.wrt, in.Name)
		}
	}
	return f
}

func check(b backend.Backend, c Case, f caseFeed, tol Tol, res *Result) ([]*tensor.Tensor, error) {
	vg, err := autodiff.VJP(c.Graph)
	if err != nil {
		return nil, err
	}
	g64, err := Retype(c.Graph, numerics.F64)
	if err != nil {
		return nil, err
	}
	vg64, err := autodiff.VJP(g64)
	if err != nil {
		return nil, err
	}
	prog, err := compiler.Compile(vg, compiler.Options{})
	if err != nil {
		return nil, err
	}
	outs, err := b.Run(prog, f.feed)
	if err != nil {
		return nil, err
	}
	feed64 := widen(f.feed)
	outs64, err := ref.Run(vg64, feed64)
	if err != nil {
		return nil, err
	}
	nout := len(c.Graph.Outputs)
	for i, name := range f.wrt {
		v := InputVerdict{Name: name}
		got, want := outs[nout+i].Float64s(), outs64[nout+i].Float64s()
		v.NormErr = normErr(got, want, tol.ATol)
		if !(v.NormErr <= tol.RTol) {
			v.Fail = fmt.Sprintf("gradient of %%%s: max|g-g64| = %.3g of max|g64| (budget %.3g)", name, v.NormErr, tol.RTol)
		}
		for d := range Directions {
			u := harness.RandomTensor(numerics.F64, outs64[nout+i].Shape, harness.SubSeed(c.Seed, fmt.Sprintf("direction/%s/%d", name, d)), harness.DefaultDist(numerics.F64)).Float64s()
			scaleDirection(u, feed64[name].Float64s())
			fd, err := finiteDiff(g64, feed64, f.cots, name, u)
			if err != nil {
				return nil, err
			}
			u = fd.dir
			scale, usum, big := 0.0, 0.0, 0.0
			for k := range u {
				scale += math.Abs(want[k] * u[k])
				usum += math.Abs(u[k])
				big = max(big, math.Abs(want[k]))
			}
			// The engine's directional error is judged normwise, like NormErr: relative to
			// max|g64| sum|u|, what an error of RTol max|g64| in every element could reach
			// (relative to sum|g64 u| alone, a gradient large only where u is small would
			// turn a normwise-small error into a large directional one).
			dirScale := max(scale, big*usum)
			dg, d64 := dot(got, u), dot(want, u)
			slack := tol.ATol * usum
			// The engine is judged against FD with FD's own error budget added; FD's rounding
			// noise is forgiven on both.
			dirErr := relTo(max(math.Abs(dg-fd.value())-slack-fd.slack(), 0), dirScale) - FDTol
			ruleErr := relTo(max(math.Abs(d64-fd.value())-fd.slack(), 0), scale)
			if fd.nonSmooth(scale) {
				v.Kink = true
				dirErr, ruleErr = relTo(max(math.Abs(dg-d64)-slack, 0), dirScale), 0
			}
			dirErr = max(dirErr, 0)
			v.DirErr, v.RuleErr = max(v.DirErr, dirErr), max(v.RuleErr, ruleErr)
		}
		switch {
		case v.Fail != "":
		case !(v.RuleErr <= FDTol):
			v.Fail = fmt.Sprintf("gradient of %%%s: the float64 rule misses finite differences by %.3g (budget %.3g): the VJP rule is wrong", name, v.RuleErr, FDTol)
		case !(v.DirErr <= tol.RTol):
			v.Fail = fmt.Sprintf("gradient of %%%s: directional derivative off by %.3g (budget %.3g)", name, v.DirErr, tol.RTol)
		}
		res.Inputs = append(res.Inputs, v)
	}
	if len(res.Inputs) == 0 {
		return nil, errs.New(errs.Input, "gradcheck %s: no float input to differentiate", c.Name)
	}
	return outs[nout:], nil
}

// relTo is |x|/scale, with a zero scale (a zero gradient) accepting only an exact zero (the
// callers subtract their absolute slack first).
func relTo(x, scale float64) float64 {
	if scale == 0 {
		if x == 0 {
			return 0
		}
		return math.Inf(1)
	}
	return math.Abs(x) / scale
}

// normErr is (max|got-want| - atol) / max|want|, floored at 0.
func normErr(got, want []float64, atol float64) float64 {
	var worst, big float64
	for i := range want {
		if math.IsNaN(got[i]) != math.IsNaN(want[i]) {
			return math.Inf(1)
		}
		if math.IsNaN(want[i]) {
			continue
		}
		worst = max(worst, math.Abs(got[i]-want[i]))
		big = max(big, math.Abs(want[i]))
	}
	return relTo(max(worst-atol, 0), big)
}

func dot(a, b []float64) float64 {
	s := 0.0
	for i := range a {
		s += a[i] * b[i]
	}
	return s
}

// fdResult holds the finite differences of F along one direction.
type fdResult struct {
	central float64 // (F(x+hu) - F(x-hu)) / 2h
	half    float64 // the same with h/2
	right   float64 // (F(x+hu) - F(x)) / h
	left    float64 // (F(x) - F(x-hu)) / h
	// rightHalf and leftHalf are right and left with h/2.
	rightHalf, leftHalf float64
	// dir is the direction value differentiates along: u, as the rounded steps x + tu took it.
	dir []float64
	// noise bounds value's rounding error: each output element y carries up to fdULPs ulps
	// of float64 error, so a difference of F is off by up to 2 fdULPs eps sum|c y| (the
	// largest over the points evaluated); half divides that by h, central by 2h, and
	// Richardson's (4 half - central)/3 makes it 3 fdULPs eps sum|c y| / h. A gradient small
	// beside the terms of F (a layernorm of two values, whose outputs barely move) is known
	// only to that absolute precision.
	noise float64
	// spread is twice the largest difference between the central differences with h, h/2
	// and h/4: for a smooth F their truncation is O(h^2), so a larger spread is rounding that
	// the per-element model does not see (y = o - x3 that cancels carries the error of o).
	spread float64
}

// slack is what value may be off by: its rounding, modelled or measured.
func (f fdResult) slack() float64 { return max(f.noise, f.spread) }

// fdULPs is the float64 error, in ulps, assumed of each output element of the golden model
// (a few ops of plain loops in float64).
const fdULPs = 16

// value is the derivative's estimate: Richardson's extrapolation of the central differences
// with steps h and h/2, (4 D(h/2) - D(h)) / 3, whose truncation error is O(h^4) instead of
// O(h^2), so that an input a few hundred steps from a pole (1/x at x = 1e-3) is still
// differentiated to FDTol.
func (f fdResult) value() float64 { return (4*f.half - f.central) / 3 }

// nonSmooth reports that finite differences do not apply along this direction: a kink lies
// within the step (relu, abs, max: some element's slope changes, so right - left does not
// halve with the step, as it does for a smooth F, where it is h times the second derivative;
// it counts when that bend is beyond rounding and either reaches FDTol of scale = sum
// |g64*u| or 1e-3 of the one-sided slopes: log of a square 1e-16 from zero), F is not
// smooth at the step's scale (sign's jump at 0, a pole 1e-16 away: the central differences
// with h and h/2 disagree by more than 1e-3 of themselves and more than rounding), or a step
// left the float64 range or the function's domain (Inf or NaN).
func (f fdResult) nonSmooth(scale float64) bool {
	for _, v := range []float64{f.central, f.half, f.right, f.left, f.rightHalf, f.leftHalf, f.noise} {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return true
		}
	}
	bend := math.Abs((f.right - f.left) - 2*(f.rightHalf-f.leftHalf))
	kink := bend > 4*f.noise && (bend > FDTol*scale || bend > 1e-3*(math.Abs(f.right)+math.Abs(f.left)))
	// The two central differences disagree beyond rounding: not the O(h^2) of a smooth F.
	d := math.Abs(f.central - f.half)
	jump := d > 1e-3*(math.Abs(f.central)+math.Abs(f.half)) && d > 4*f.noise
	return kink || jump
}

// scaleDirection scales each element of the direction u by the magnitude of x's element
// (the tensor's rms for a zero, 1 for an all-zero tensor; clamped to 2^±600), so that a step
// of Step moves every element by Step relative to itself: a tensor holding 3e38 and 0.6 is differentiated at
// both, and a tiny input is not stepped across zero.
func scaleDirection(u, x []float64) {
	rms := 0.0
	for _, v := range x {
		rms += v * v
	}
	rms = math.Sqrt(rms / float64(max(len(x), 1)))
	if rms == 0 || math.IsInf(rms, 0) {
		rms = 1
	}
	for k, v := range x {
		m := math.Abs(v)
		if v == 0 {
			m = rms
		}
		// Within 2^±600, so that u and its products with a gradient stay finite.
		u[k] *= min(max(m, 0x1p-600), 0x1p600)
	}
}

// finiteDiff takes the finite differences of F = sum <c, f(x)> along u at input name, in
// float64 on the golden model. Each output element's difference is taken before the sum,
// F(x+hu) - F(x-hu) = sum c (y(x+hu) - y(x-hu)), so that a large output elsewhere (another
// output of 1e120) cannot absorb a small one's change.
func finiteDiff(g64 *graph.Graph, feed64 map[string]*tensor.Tensor, cots map[string]*tensor.Tensor, name string, u []float64) (fdResult, error) {
	x := feed64[name]
	h := Step               // u is scaled to the elements of x (scaleDirection)
	var weights [][]float64 // the cotangent of each output, nil for one without (or a repeat)
	seen := map[string]bool{}
	for _, o := range g64.Outputs {
		c, ok := cots[autodiff.CotangentPrefix+o.Name]
		if !ok || seen[o.Name] {
			weights = append(weights, nil)
			continue
		}
		seen[o.Name] = true
		weights = append(weights, c.Float64s())
	}
	var steps [7][]float64 // the displacement each evaluation actually made: fl(x+tu) - x
	at := func(j int, t float64) ([][]float64, error) {
		moved := x.Clone()
		steps[j] = make([]float64, len(u))
		for i, v := range x.Float64s() {
			moved.SetFloat64(i, v+t*u[i])
			steps[j][i] = moved.Float64(i) - v
		}
		in := map[string]*tensor.Tensor{}
		for _, v := range g64.Inputs {
			in[v.Name] = feed64[v.Name]
		}
		in[name] = moved
		outs, err := ref.Run(g64, in)
		if err != nil {
			return nil, err
		}
		ys := make([][]float64, len(outs))
		for i, o := range outs {
			ys[i] = o.Float64s()
		}
		return ys, nil
	}
	var ys [7][][]float64 // outputs at -h, -h/2, 0, h/2, h, -h/4, h/4
	for i, t := range []float64{-h, -h / 2, 0, h / 2, h, -h / 4, h / 4} {
		var err error
		if ys[i], err = at(i, t); err != nil {
			return fdResult{}, err
		}
	}
	// delta is F(a) - F(b), summed element by element.
	delta := func(a, b [][]float64) float64 {
		s := 0.0
		for i, w := range weights {
			for k, c := range w {
				s += c * (a[i][k] - b[i][k])
			}
		}
		return s
	}
	size := 0.0 // the largest sum |c y| over the points evaluated (y(x+hu) may dwarf y(x))
	for _, y := range ys {
		sum := 0.0
		for i, w := range weights {
			for k, c := range w {
				sum += math.Abs(c * y[i][k])
			}
		}
		size = max(size, sum)
	}
	// x + tu rounds: value estimates <g, dir> for the direction the rounded steps took, which
	// matters where the step is a few ulps of something that cancels (mse_loss of near copies).
	dir := make([]float64, len(u))
	for k := range dir {
		dir[k] = (4*(steps[3][k]-steps[1][k])/h - (steps[4][k]-steps[0][k])/(2*h)) / 3
	}
	r := fdResult{dir: dir, central: delta(ys[4], ys[0]) / (2 * h), half: delta(ys[3], ys[1]) / h,
		right: delta(ys[4], ys[2]) / h, left: delta(ys[2], ys[0]) / h,
		rightHalf: 2 * delta(ys[3], ys[2]) / h, leftHalf: 2 * delta(ys[2], ys[1]) / h,
		noise: 3 * fdULPs * 0x1p-52 * size / h}
	quarter := 2 * delta(ys[6], ys[5]) / h
	r.spread = 2 * max(math.Abs(r.central-r.half), math.Abs(r.half-quarter))
	return r, nil
}

// widen decodes every tensor to float64 (exactly: every format's values are float64 values).
func widen(in map[string]*tensor.Tensor) map[string]*tensor.Tensor {
	out := map[string]*tensor.Tensor{}
	for k, t := range in {
		if !t.DType.IsFloat() {
			out[k] = t
			continue
		}
		w := tensor.New(numerics.F64, slices.Clone(t.Shape))
		for i, v := range t.Float64s() {
			w.SetFloat64(i, v)
		}
		out[k] = w
	}
	return out
}

// Retype rebuilds g with every float value in dt: float inputs, cast targets, and no accum
// attribute (the accumulator follows the dtype).
func Retype(g *graph.Graph, dt numerics.DType) (*graph.Graph, error) {
	b := graph.NewBuilder(g.Name)
	b.Mesh(g.Mesh)
	m := map[*graph.Value]*graph.Value{}
	for _, v := range g.Inputs {
		t := v.Type.DType
		if t.IsFloat() {
			t = dt
		}
		m[v] = b.Input(v.Name, t, v.Type.Shape...)
	}
	for _, n := range g.Nodes {
		attrs := n.Attrs.Clone()
		delete(attrs, "accum")
		if to, ok := attrs["to"]; ok && to.Kind == graph.AttrDType && to.DType.IsFloat() {
			attrs["to"] = graph.DTypeAttr(dt)
		}
		ins := make([]*graph.Value, len(n.Inputs))
		for i, v := range n.Inputs {
			ins[i] = m[v]
		}
		m[n.Output] = b.Named(n.Output.Name, n.Op, attrs, ins...)
	}
	for _, o := range g.Outputs {
		b.Output(m[o])
	}
	return b.Build()
}

// Backward returns what Check computes c's gradient with: the backward graph (autodiff.VJP of
// c.Graph), the feed it runs at (c's inputs and the cotangents d_<output>), and the float64
// rule's gradients there (the backward retyped to float64 on the golden model), one per float
// input in input order. property's grad/agree runs the noise model on the first two to
// scale a random graph's budget.
func Backward(c Case) (vg *graph.Graph, feed map[string]*tensor.Tensor, want []*tensor.Tensor, err error) {
	f := feedOf(c)
	if vg, err = autodiff.VJP(c.Graph); err != nil {
		return nil, nil, nil, err
	}
	g64, err := Retype(c.Graph, numerics.F64)
	if err != nil {
		return nil, nil, nil, err
	}
	vg64, err := autodiff.VJP(g64)
	if err != nil {
		return nil, nil, nil, err
	}
	wide, err := ref.Run(vg64, widen(f.feed))
	if err != nil {
		return nil, nil, nil, err
	}
	return vg, f.feed, wide[len(c.Graph.Outputs):], nil
}

// NormErr is max|got - want| / max|want| over the elements (NaN where NaN, else +Inf; 0/0 is
// 0): the normwise error Check judges gradients by, without the ATol.
func NormErr(got, want *tensor.Tensor) float64 { return normErr(got.Float64s(), want.Float64s(), 0) }
