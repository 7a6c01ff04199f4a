package property

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/onsi/gomega"
	"pgregory.net/rapid"

	"github.com/tessera-qa/tessera-qa/engine/autodiff"
	"github.com/tessera-qa/tessera-qa/engine/compiler"
	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/engine/ref"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
	"github.com/tessera-qa/tessera-qa/gradients"
	"github.com/tessera-qa/tessera-qa/harness"
)

// The gradient properties (docs/autodiff.md) draw random differentiable float graphs: the
// generator's graphs with every float value retyped to one float dtype (gradients.Retype:
// casts between floats become identities, casts to and from ints stay), kept when every op
// has a gradient rule, some float input reaches a float output, and the golden model's
// outputs are finite. The graphs are smaller than agree/ref's (GradConfig): the finite
// differences run the golden model ten times per input.

// GradConfig bounds the gradient properties' graphs: 1 to 6 ops, 512 elements per tensor.
func GradConfig() Config { return Config{MaxOps: 6, MaxElems: 512, MaxWork: 1 << 14} }

// GradCase is a random differentiable graph in one float dtype with its inputs.
type GradCase struct {
	Graph  *graph.Graph
	Inputs map[string]*tensor.Tensor
	DType  numerics.DType
	Seed   uint64
}

// GoString is what rapid prints for a drawn case: the graph.
func (c *GradCase) GoString() string { return graph.Print(c.Graph) }

// values lists the first few values of each input, for a failure's log.
func (c *GradCase) values() string {
	var b strings.Builder
	for _, v := range c.Graph.Inputs {
		x := c.Inputs[v.Name].Float64s()
		fmt.Fprintf(&b, "\n  %%%s = %v", v.Name, x[:min(len(x), 8)])
		if len(x) > 8 {
			b.WriteString(" ...")
		}
	}
	return b.String()
}

// gradCases draws GradCases in one of dts, from graphs of at least minOps steps bounded like
// cfg but no larger than GradConfig.
func gradCases(cfg Config, minOps int, dts ...numerics.DType) *rapid.Generator[*GradCase] {
	g := GradConfig()
	cfg.MaxOps, cfg.MaxElems, cfg.MaxWork = min(cfg.MaxOps, g.MaxOps), min(cfg.MaxElems, g.MaxElems), min(cfg.MaxWork, g.MaxWork)
	cfg.Special = false
	steps := rapid.SliceOfN(StepGen(), min(minOps, cfg.MaxOps), max(cfg.MaxOps, 1))
	return rapid.Custom(func(t *rapid.T) *GradCase {
		dt := drawDType(t, dts...)
		sp := Spec{Steps: steps.Draw(t, "steps")}
		sp.Storage = numerics.F32 // the retype decides the float dtype; ints only through casts
		for i := range sp.Steps {
			// No ±0/subnormal/±max/NaN sprinkles: a step from ±max leaves the range, and
			// NaN and Inf have no gradient to check (agree/nan-inf covers propagation).
			if Class(sp.Steps[i].Class)%numClasses == ClassSpecial {
				sp.Steps[i].Class = int(ClassNormal)
			}
		}
		c, err := Build(sp, cfg)
		if err != nil {
			t.Fatalf("generator bug: %v", err)
		}
		gc, why := differentiable(c, dt)
		if gc == nil {
			t.Skip("not a differentiable float graph: " + why) // rapid counts it as a filtered draw
		}
		gc.Seed = rapid.Uint64().Draw(t, "seed")
		return gc
	})
}

// differentiable retypes c to dt and returns it, or nil and why it cannot be differentiated
// meaningfully.
func differentiable(c *Case, dt numerics.DType) (*GradCase, string) {
	for _, n := range c.Graph.Nodes {
		if ok, _ := autodiff.Differentiable(n.Op); !ok {
			return nil, n.Op + " has no gradient"
		}
	}
	g, err := gradients.Retype(c.Graph, dt)
	if err != nil {
		return nil, "retype: " + err.Error()
	}
	in := map[string]*tensor.Tensor{}
	for _, v := range g.Inputs {
		x := c.Inputs[v.Name]
		if x.DType.IsFloat() {
			x = tensor.FromFloat64(dt, x.Shape, x.Float64s())
		}
		if !finiteTensor(x) {
			return nil, "input %" + v.Name + " is not finite"
		}
		if hasZero(x) {
			// A zero (a narrow dtype's tiny value rounded, then widened) puts relu, abs and
			// ties of maximum/minimum on their kinks, where the rule's conventions give a
			// subgradient: min(max(x, -0), 0) is constant near x = 0, its rule says 1/4.
			return nil, "input %" + v.Name + " holds a zero"
		}
		in[v.Name] = x
	}
	// Every value finite, forward and backward (the float64 gradient for cotangents of ones):
	// exp(x) = Inf into erf gives a finite output and a NaN gradient (0 * Inf).
	env := map[*graph.Value]*tensor.Tensor{}
	for _, v := range g.Inputs {
		env[v] = in[v.Name]
	}
	for _, n := range g.Nodes {
		ins := make([]*tensor.Tensor, len(n.Inputs))
		for i, v := range n.Inputs {
			ins[i] = env[v]
		}
		if kinkedAtZero[n.Op] && hasZero(ins[0]) {
			// relu'(0) = 0 by convention, but relu(x) - relu(-x) = x is smooth at 0 with
			// slope 1: the conventions make a subgradient, not the derivative finite
			// differences see.
			return nil, n.Op + " of %" + n.Inputs[0].Name + " sits on its kink (an element is 0)"
		}
		y, err := ref.Eval(n, ins)
		if err != nil {
			return nil, "golden model: " + err.Error()
		}
		if why := tie(n, ins, y); why != "" {
			return nil, why
		}
		if !finiteTensor(y) {
			return nil, "%" + n.Output.Name + " is not finite"
		}
		env[n.Output] = y
	}
	if !reachesFloatOutput(g) {
		return nil, "no float input reaches a float output"
	}
	if ok, why := finiteGradient(g, in); !ok {
		return nil, why
	}
	return &GradCase{Graph: g, Inputs: in, DType: dt}, ""
}

// kinkedAtZero lists the unary ops whose derivative at 0 is a convention (docs/autodiff.md).
var kinkedAtZero = map[string]bool{"relu": true, "abs": true, "sign": true}

func hasZero(t *tensor.Tensor) bool {
	if !t.DType.IsFloat() {
		return false
	}
	for _, v := range t.Float64s() {
		if v == 0 {
			return true
		}
	}
	return false
}

// tie says where node n's inputs tie at a kink of n (maximum/minimum operands equal, a row of
// reduce_max with two maxima), "" where they do not: the rule shares the gradient among the
// tied elements by convention (torch's), but min(max(x, y), z) with all three equal is flat
// in some directions, where finite differences see 0. Operands that are one value (max(x, x))
// tie everywhere with one derivative and are not a kink.
func tie(n *graph.Node, ins []*tensor.Tensor, y *tensor.Tensor) string {
	if !y.DType.IsFloat() {
		return ""
	}
	switch n.Op {
	case "maximum", "minimum":
		if n.Inputs[0] == n.Inputs[1] {
			return ""
		}
		d := &graph.Node{Op: "sub", Inputs: n.Inputs, Output: &graph.Value{Name: "tie"}}
		t, err := graph.InferNode(d)
		if err != nil {
			return ""
		}
		d.Output.Type = t
		diff, err := ref.Eval(d, ins)
		if err == nil && hasZero(diff) {
			return n.Op + " %" + n.Output.Name + ": its operands tie"
		}
	case "reduce_max":
		x := ins[0]
		axes, err := graph.ReduceAxes(n, len(x.Shape))
		if err != nil {
			return ""
		}
		count := make([]int, y.Len())
		xs, ys := tensor.Strides(x.Shape), tensor.Strides(keepShape(x.Shape, axes))
		for i := range x.Len() {
			o, rem := 0, i
			for d := range x.Shape {
				idx := rem / xs[d]
				rem %= xs[d]
				if !slices.Contains(axes, d) {
					o += idx * ys[d]
				}
			}
			if x.Float64(i) == y.Float64(o) {
				if count[o]++; count[o] == 2 {
					return "reduce_max %" + n.Output.Name + ": a row has two maxima"
				}
			}
		}
	}
	return ""
}

// keepShape is shape with the axes set to 1.
func keepShape(shape, axes []int) []int {
	out := slices.Clone(shape)
	for _, a := range axes {
		out[a] = 1
	}
	return out
}

// finiteGradient reports whether g's float64 gradient at in, for cotangents of ones, is finite.
func finiteGradient(g *graph.Graph, in map[string]*tensor.Tensor) (bool, string) {
	g64, err := gradients.Retype(g, numerics.F64)
	if err != nil {
		return false, "retype: " + err.Error()
	}
	vg, err := autodiff.VJP(g64)
	if err != nil {
		return false, "autodiff: " + err.Error()
	}
	feed := map[string]*tensor.Tensor{}
	for _, v := range g64.Inputs {
		x := in[v.Name]
		if x.DType.IsFloat() {
			x = tensor.FromFloat64(numerics.F64, x.Shape, x.Float64s())
		}
		feed[v.Name] = x
	}
	for _, o := range g64.Outputs {
		if o.Type.DType.IsFloat() {
			ones := make([]float64, o.Type.NumElems())
			for i := range ones {
				ones[i] = 1
			}
			feed[autodiff.CotangentPrefix+o.Name] = tensor.FromFloat64(numerics.F64, o.Type.Shape, ones)
		}
	}
	outs, err := ref.Run(vg, feed)
	if err != nil {
		return false, "golden model backward: " + err.Error()
	}
	for _, o := range outs[len(g64.Outputs):] {
		if !finiteTensor(o) {
			return false, "the gradient is not finite"
		}
	}
	return true, ""
}

func finiteTensor(t *tensor.Tensor) bool {
	if !t.DType.IsFloat() {
		return true
	}
	for _, v := range t.Float64s() {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return false
		}
	}
	return true
}

// reachesFloatOutput reports whether some float output depends on some float input through
// float values (a path through an int cast carries no gradient).
func reachesFloatOutput(g *graph.Graph) bool {
	dep := map[*graph.Value]bool{}
	for _, v := range g.Inputs {
		dep[v] = v.Type.DType.IsFloat()
	}
	for _, n := range g.Nodes {
		for _, in := range n.Inputs {
			if dep[in] && n.Output.Type.DType.IsFloat() {
				dep[n.Output] = true
			}
		}
	}
	for _, o := range g.Outputs {
		if dep[o] {
			return true
		}
	}
	return false
}

var gradAgree = Property{
	Name:   "grad/agree",
	Judged: "tolerance",
	Checks: 100,
	Doc: "the gradient of a random differentiable graph (1-6 ops, f32 or f64) agrees with the float64 " +
		"backward on the golden model and with float64 finite differences (gradients.Check; budget: " +
		"the dtype's, or 8x the golden model's own rounding noise in that dtype if larger)",
	Body: func(e Env) func(*rapid.T) {
		gen := gradCases(e.Config, 1, numerics.F64, numerics.F32)
		return func(t *rapid.T) {
			c := gen.Draw(t, "case")
			gc := gradients.Case{Name: "grad-agree", DType: c.DType, Graph: c.Graph, Inputs: c.Inputs, Seed: c.Seed}
			tol, ok, err := AgreeTol(gc)
			gomega.NewWithT(t).Expect(err).NotTo(gomega.HaveOccurred(), "grad/agree: the golden model's backward of %s", ops(c.Graph))
			if !ok {
				t.Skip("the gradient is too ill-conditioned in " + c.DType.String() + " to judge") // a filtered draw
			}
			gc.Tol = tol
			r := gradients.Check(e.Backend, gc)
			if !r.Pass {
				t.Logf("graph:\n%s\ninputs: %s", graph.Print(c.Graph), c.values())
			}
			gomega.NewWithT(t).Expect(r.Pass).To(gomega.BeTrue(), "grad/agree on %s: %s %s (budget %.3g): %s %+v",
				e.Backend.Name(), c.DType, ops(c.Graph), tol.RTol, r.Err, r.Inputs)
		}
	},
}

// NoiseFactor and MaxNoise scale grad/agree's budget. A random graph's conditioning is
// unknown, so its budget is measured: the noise model (noise.go) runs the backward graph in
// the case's dtype five times with every node moved as far as a correct engine may move it,
// and the largest normwise distance of those gradients from the float64 rule, times
// NoiseFactor, is the budget when it exceeds the dtype's gradcheck budget. A graph whose noise
// exceeds MaxNoise is not judged (rapid draws another): its gradient says little in that dtype.
const (
	NoiseFactor = 2
	MaxNoise    = 1e-3
)

// AgreeTol is grad/agree's budget for c (NoiseFactor, MaxNoise); ok is false when c's
// gradient is too ill-conditioned in its dtype to judge, or the noise model cannot model a
// node of its backward.
func AgreeTol(c gradients.Case) (tol gradients.Tol, ok bool, err error) {
	vg, feed, want, err := gradients.Backward(c)
	if err != nil {
		return tol, false, err
	}
	noise := 0.0
	for _, src := range []source{randomSource(c.Seed), randomSource(c.Seed + 1), cyclic(0), cyclic(1), cyclic(2)} {
		got, err := perturb(vg, feed, src)
		if err != nil {
			return tol, false, nil // unmodelled
		}
		for i, w := range want {
			noise = max(noise, gradients.NormErr(got[len(c.Graph.Outputs)+i], w))
		}
	}
	tol = gradients.Tolerances[c.DType]
	tol.RTol = max(tol.RTol, NoiseFactor*noise)
	return tol, noise <= MaxNoise, nil
}

// runFn runs a graph: the engine (Env.runner) or the golden model (ref.Run).
type runFn func(g *graph.Graph, in map[string]*tensor.Tensor) ([]*tensor.Tensor, error)

// runner compiles g afresh and runs it on e's backend.
func (e Env) runner() runFn {
	return func(g *graph.Graph, in map[string]*tensor.Tensor) ([]*tensor.Tensor, error) {
		p, err := compiler.Compile(g, compiler.Options{})
		if err != nil {
			return nil, err
		}
		return e.Backend.Run(p, in)
	}
}

// vjpOf differentiates g (autodiff.VJP) and runs the backward with run at inputs and the
// cotangents cots, returning the gradients of g's float inputs in input order.
func vjpOf(run runFn, g *graph.Graph, inputs, cots map[string]*tensor.Tensor) ([]*tensor.Tensor, error) {
	vg, err := autodiff.VJP(g)
	if err != nil {
		return nil, err
	}
	in := map[string]*tensor.Tensor{}
	for k, v := range inputs {
		in[k] = v
	}
	for k, v := range cots {
		in[k] = v
	}
	outs, err := run(vg, in)
	if err != nil {
		return nil, err
	}
	return outs[len(g.Outputs):], nil
}

// Judging a relation between gradients of a random graph: the difference of the two sides is
// measured normwise over every input's gradient together (an input whose gradient is zero up
// to rounding, a per-row shift before a layernorm, is judged against the others' size). A
// graph whose gradient is rounding noise itself (softmax then a sum over its axis: the
// gradient is 0 plus a few ulps) satisfies no relation to any tolerance, so the golden model
// goes first: where the relation fails by more than RelNoise on the golden model, the case is
// not judged (rapid draws another); else the engine must satisfy it within the property's
// tolerance.
const RelNoise = 1e-6

// LinearTol bounds grad/linear's max|VJP(a*c1 + c2) - (a*VJP(c1) + VJP(c2))| relative to the
// largest element of a*VJP(c1), VJP(c2) and VJP(a*c1 + c2) over all inputs, in f64: the sides
// differ by the rounding of the backward's products and sums.
const LinearTol = 1e-9

// linearity returns grad/linear's worst difference and scale for run.
func linearity(run runFn, c *GradCase, a float64) (worst, scale float64, err error) {
	c1, c2 := cotangents(c, "c1"), cotangents(c, "c2")
	mix := map[string]*tensor.Tensor{}
	for k := range c1 {
		x, y := c1[k].Float64s(), c2[k].Float64s()
		for i := range x {
			x[i] = a*x[i] + y[i]
		}
		mix[k] = tensor.FromFloat64(c1[k].DType, c1[k].Shape, x)
	}
	var g [3][]*tensor.Tensor
	for i, cots := range []map[string]*tensor.Tensor{c1, c2, mix} {
		if g[i], err = vjpOf(run, c.Graph, c.Inputs, cots); err != nil {
			return 0, 0, err
		}
	}
	for i := range g[0] {
		x, y, z := g[0][i].Float64s(), g[1][i].Float64s(), g[2][i].Float64s()
		for k := range z {
			worst = max(worst, math.Abs(z[k]-(a*x[k]+y[k])))
			scale = max(scale, math.Abs(a*x[k]), math.Abs(y[k]), math.Abs(z[k]))
		}
	}
	return worst, scale, nil
}

var gradLinear = Property{
	Name:   "grad/linear",
	Judged: "tolerance",
	Checks: 100,
	Doc: "the engine's VJP of a random differentiable f64 graph is linear in the cotangent: " +
		"VJP(a*c1 + c2) = a*VJP(c1) + VJP(c2) normwise within 1e-9",
	Body: func(e Env) func(*rapid.T) {
		gen := gradCases(e.Config, 1, numerics.F64)
		return func(t *rapid.T) {
			gm := gomega.NewWithT(t)
			c := gen.Draw(t, "case")
			a := rapid.SampledFrom([]float64{-3, -1, -0.5, 0.25, 2, 7.5}).Draw(t, "a")
			rw, rs, err := linearity(ref.Run, c, a)
			gm.Expect(err).NotTo(gomega.HaveOccurred(), "golden model")
			if !(rw <= RelNoise*rs) {
				t.Skip("the gradient is rounding noise") // a filtered draw
			}
			worst, scale, err := linearity(e.runner(), c, a)
			gm.Expect(err).NotTo(gomega.HaveOccurred(), "engine on %s", e.Backend.Name())
			if !(worst <= LinearTol*scale) {
				t.Logf("graph:\n%s\ninputs: %s", graph.Print(c.Graph), c.values())
			}
			gm.Expect(worst).To(gomega.BeNumerically("<=", LinearTol*scale),
				"grad/linear on %s: %s, a = %v: max|VJP(a c1 + c2) - a VJP(c1) - VJP(c2)| = %.3g of %.3g (golden model: %.3g of %.3g)",
				e.Backend.Name(), ops(c.Graph), a, worst, scale, rw, rs)
		}
	},
}

// ChainTol bounds grad/chain's difference between the whole graph's gradient and the one
// assembled across the split, relative to the largest gradient element of either side over
// all inputs, in f64: the same products summed in another order.
const ChainTol = 1e-10

// chain returns grad/chain's worst difference and scale for run, split at v.
func chain(run runFn, c *GradCase, v string) (worst, scale float64, err error) {
	g1, g2, err := Split(c.Graph, v)
	if err != nil {
		return 0, 0, err
	}
	cots := cotangents(c, "c")
	whole, err := vjpOf(run, c.Graph, c.Inputs, cots)
	if err != nil {
		return 0, 0, err
	}
	in1 := map[string]*tensor.Tensor{}
	for _, x := range g1.Inputs {
		in1[x.Name] = c.Inputs[x.Name]
	}
	vv, err := run(g1, in1) // v's value, from the same runner's forward
	if err != nil {
		return 0, 0, err
	}
	in2 := map[string]*tensor.Tensor{v: vv[0]}
	for _, x := range g2.Inputs {
		if x.Name != v {
			in2[x.Name] = c.Inputs[x.Name]
		}
	}
	direct, err := vjpOf(run, g2, in2, cots)
	if err != nil {
		return 0, 0, err
	}
	parts := map[string][]*tensor.Tensor{}
	for i, name := range floatInputs(g2) {
		parts[name] = append(parts[name], direct[i])
	}
	dv := parts[v][0]
	through, err := vjpOf(run, g1, in1, map[string]*tensor.Tensor{autodiff.CotangentPrefix + v: dv})
	if err != nil {
		return 0, 0, err
	}
	for i, name := range floatInputs(g1) {
		parts[name] = append(parts[name], through[i])
	}
	for i, name := range floatInputs(c.Graph) {
		want := whole[i].Float64s()
		for k := range want {
			got := 0.0
			for _, p := range parts[name] {
				got += p.Float64(k)
				scale = max(scale, math.Abs(p.Float64(k)))
			}
			worst = max(worst, math.Abs(got-want[k]))
			scale = max(scale, math.Abs(want[k]))
		}
	}
	return worst, scale, nil
}

var gradChain = Property{
	Name:   "grad/chain",
	Judged: "tolerance",
	Checks: 100,
	Doc: "the chain rule across a split: a random differentiable f64 graph cut at an inner value v " +
		"into g1 (inputs -> v) and g2 (inputs and v -> outputs); g2's VJP gives dv and its direct " +
		"gradients, g1's VJP of dv adds the rest, and the sum is the whole graph's VJP within 1e-10",
	Body: func(e Env) func(*rapid.T) {
		gen := gradCases(e.Config, 2, numerics.F64)
		return func(t *rapid.T) {
			gm := gomega.NewWithT(t)
			c := gen.Draw(t, "case")
			inner := innerValues(c.Graph)
			if len(inner) == 0 {
				t.Skip("no inner float value to split at") // a filtered draw
			}
			v := inner[rapid.IntRange(0, len(inner)-1).Draw(t, "split")].Name
			rw, rs, err := chain(ref.Run, c, v)
			gm.Expect(err).NotTo(gomega.HaveOccurred(), "golden model")
			if !(rw <= RelNoise*rs) {
				t.Skip("the gradient is rounding noise") // a filtered draw
			}
			worst, scale, err := chain(e.runner(), c, v)
			gm.Expect(err).NotTo(gomega.HaveOccurred(), "engine on %s", e.Backend.Name())
			if !(worst <= ChainTol*scale) {
				g1, g2, _ := Split(c.Graph, v)
				t.Logf("graph:\n%s\ng1:\n%s\ng2:\n%s\ninputs: %s", graph.Print(c.Graph), graph.Print(g1), graph.Print(g2), c.values())
			}
			gm.Expect(worst).To(gomega.BeNumerically("<=", ChainTol*scale),
				"grad/chain on %s: %s split at %%%s: off by %.3g of %.3g (golden model: %.3g of %.3g)",
				e.Backend.Name(), ops(c.Graph), v, worst, scale, rw, rs)
		}
	},
}

// floatInputs names g's float inputs in order: the gradients VJP returns by default.
func floatInputs(g *graph.Graph) []string {
	var out []string
	for _, v := range g.Inputs {
		if v.Type.DType.IsFloat() {
			out = append(out, v.Name)
		}
	}
	return out
}

// cotangents draws one cotangent d_<output> per distinct float output of c, seeded by label.
func cotangents(c *GradCase, label string) map[string]*tensor.Tensor {
	out := map[string]*tensor.Tensor{}
	for i, o := range c.Graph.Outputs {
		name := autodiff.CotangentPrefix + o.Name
		if o.Type.DType.IsFloat() && out[name] == nil {
			out[name] = harness.RandomTensor(o.Type.DType, o.Type.Shape, harness.SubSeed(c.Seed, fmt.Sprintf("%s/%d", label, i)), harness.DefaultDist(o.Type.DType))
		}
	}
	return out
}

// innerValues lists g's float node outputs that another node reads and that are not outputs
// of g: the values a graph can be split at.
func innerValues(g *graph.Graph) []*graph.Value {
	read := map[*graph.Value]bool{}
	for _, n := range g.Nodes {
		for _, in := range n.Inputs {
			read[in] = true
		}
	}
	var out []*graph.Value
	for _, n := range g.Nodes {
		if v := n.Output; read[v] && v.Type.DType.IsFloat() && !slices.Contains(g.Outputs, v) {
			out = append(out, v)
		}
	}
	return out
}

// Split cuts g at its inner value v: g1 computes v from the inputs it needs (its only output);
// g2 takes g's inputs and v as an input named v and computes g's outputs, without v's node
// and without nodes that no output needs any more. Every path from an input to an output
// either passes through v (g1 then g2) or not (g2 alone), so the gradient of g with respect
// to input x is g2's with respect to x plus g1's with respect to x for the cotangent g2 gives
// v: the chain rule.
func Split(g *graph.Graph, v string) (g1, g2 *graph.Graph, err error) {
	val := g.Value(v)
	if val == nil {
		return nil, nil, fmt.Errorf("split: graph %s has no value %%%s", g.Name, v)
	}
	def := map[*graph.Value]*graph.Node{}
	for _, n := range g.Nodes {
		def[n.Output] = n
	}
	if def[val] == nil {
		return nil, nil, fmt.Errorf("split: %%%s is an input of %s", v, g.Name)
	}
	// g1: the ancestors of v.
	need1 := map[*graph.Value]bool{val: true}
	for i := len(g.Nodes) - 1; i >= 0; i-- {
		if n := g.Nodes[i]; need1[n.Output] {
			for _, in := range n.Inputs {
				need1[in] = true
			}
		}
	}
	g1, err = subgraph(g.Name+"_to_"+v, g, need1, nil, []*graph.Value{val})
	if err != nil {
		return nil, nil, err
	}
	// g2: what the outputs need once v is an input.
	need2 := map[*graph.Value]bool{}
	for _, o := range g.Outputs {
		need2[o] = true
	}
	for i := len(g.Nodes) - 1; i >= 0; i-- {
		if n := g.Nodes[i]; need2[n.Output] && n.Output != val {
			for _, in := range n.Inputs {
				need2[in] = true
			}
		}
	}
	need2[val] = true
	g2, err = subgraph(g.Name+"_from_"+v, g, need2, val, g.Outputs)
	return g1, g2, err
}

// subgraph copies g's inputs and nodes whose values need holds, with cut (if any) turned into
// an input after g's own, and the given outputs.
func subgraph(name string, g *graph.Graph, need map[*graph.Value]bool, cut *graph.Value, outs []*graph.Value) (*graph.Graph, error) {
	b := graph.NewBuilder(name)
	b.Mesh(g.Mesh)
	m := map[*graph.Value]*graph.Value{}
	for _, x := range g.Inputs {
		if need[x] {
			m[x] = b.Input(x.Name, x.Type.DType, x.Type.Shape...)
		}
	}
	if cut != nil {
		m[cut] = b.Input(cut.Name, cut.Type.DType, cut.Type.Shape...)
	}
	for _, n := range g.Nodes {
		if !need[n.Output] || n.Output == cut {
			continue
		}
		ins := make([]*graph.Value, len(n.Inputs))
		for i, x := range n.Inputs {
			ins[i] = m[x]
		}
		m[n.Output] = b.Named(n.Output.Name, n.Op, n.Attrs.Clone(), ins...)
	}
	for _, o := range outs {
		b.Output(m[o])
	}
	return b.Build()
}
