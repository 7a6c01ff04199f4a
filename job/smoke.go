package job

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"

	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/engine/ref"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
	"github.com/tessera-qa/tessera-qa/harness"
)

// The smoke generator draws small random graphs from the op registry: one "head" op per graph
// chosen among every registered op (by its kind, so a newly registered unary or binary op is
// smoke-tested without touching this file), random shapes that are often not multiples of any
// tile, random attributes, and for f32/f64 up to two well-conditioned followers (relu, tanh,
// sigmoid, neg, abs, add). Followers stay out of 16-bit graphs because a one-ulp difference in
// an intermediate rounded to f16/bf16 can legitimately become two ulps after the next op,
// which the per-dtype default tolerance does not allow.
//
// Every case is a pure function of (run seed, case index), so one case can be regenerated
// alone; its replay manifest carries the graph and inputs anyway.

// smokeDTypes are the dtypes smoke graphs use, with repeats as weights. fp8, int8 and bool are
// left to the golden catalogue, which pins their exact values.
var smokeDTypes = []numerics.DType{numerics.F32, numerics.F32, numerics.F32, numerics.F64, numerics.F16, numerics.BF16, numerics.I32}

// lowPrecision dtypes get no followers and no attention (see above).
func lowPrecision(dt numerics.DType) bool { return dt == numerics.F16 || dt == numerics.BF16 }

// dims is the pool shape dims are drawn from: small, primes, powers of two and their
// neighbours, so tiles are sometimes exact and sometimes masked.
var dims = []int{1, 2, 3, 4, 5, 7, 8, 9, 13, 16, 17, 31, 32, 33}

// smokeStream separates the generator's random stream from the inputs' (harness.SubSeed).
const smokeStream = 0x5e0c_e5ee_d000_0001

// SmokeSeed is the seed of smoke case i in a run seeded with seed.
func SmokeSeed(seed uint64, i int) uint64 { return harness.SubSeed(seed, "smoke/"+strconv.Itoa(i)) }

// maxAttempts bounds how often SmokeCase redraws a case whose reference output is degenerate.
const maxAttempts = 8

// SmokeCase draws smoke case i of a run seeded with seed: a graph, its inputs and tolerances
// scaled for the longest reduction in it. A candidate whose golden-model output would not be a
// meaningful check (all zeros after a relu, a log_softmax over an axis of length 1: the
// magnitude guard rightly refuses to judge those) is redrawn from the same stream, so the
// smoke suite never fails on the generator's bad luck. An error means a generator bug (a
// graph that does not build), which the caller reports as an errored case.
func SmokeCase(seed uint64, i int) (harness.Case, error) {
	cs := SmokeSeed(seed, i)
	r := rand.New(rand.NewPCG(cs, smokeStream))
	var c harness.Case
	var err error
	for attempt := range maxAttempts {
		inputSeed := cs
		if attempt > 0 {
			inputSeed = harness.SubSeed(cs, "attempt/"+strconv.Itoa(attempt))
		}
		c, err = drawCase(r, i, inputSeed)
		if err != nil || meaningful(c) {
			break
		}
	}
	return c, err
}

// meaningful reports whether every output of c, as the golden model computes it, can be
// judged under c's tolerances: comparing the reference with itself must pass.
func meaningful(c harness.Case) bool {
	want, err := ref.Run(c.Graph, c.Inputs)
	if err != nil {
		return true // let the run report it
	}
	for j, w := range want {
		if !harness.Check(w, w, c.Tolerances[j]).Pass {
			return false
		}
	}
	return true
}

func drawCase(r *rand.Rand, i int, inputSeed uint64) (harness.Case, error) {
	g := &gen{
		r:     r,
		b:     graph.NewBuilder(fmt.Sprintf("smoke_%03d", i)),
		dists: map[string]harness.Dist{},
		k:     1,
	}
	var heads []*graph.OpDef
	for _, d := range graph.Ops() {
		if g.canHead(d) {
			heads = append(heads, d)
		}
	}
	if len(heads) == 0 {
		return harness.Case{}, fmt.Errorf("smoke: no registered op can head a graph")
	}
	op := heads[g.r.IntN(len(heads))]
	dt := g.pickDType(op)
	out := g.head(op, dt)
	if out != nil && !lowPrecision(out.Type.DType) && out.Type.DType.IsFloat() && !attentionKind(op) {
		for range g.r.IntN(3) {
			out = g.follow(out)
		}
	}
	name := fmt.Sprintf("%03d-%s-%s", i, strings.Join(g.ops, "+"), dt)
	if out == nil {
		return harness.Case{}, fmt.Errorf("smoke case %s: generator built no value", name)
	}
	g.b.Output(out)
	gr, err := g.b.Build()
	if err != nil {
		return harness.Case{}, fmt.Errorf("smoke case %s: generated graph does not build: %w", name, err)
	}
	inputs, err := harness.RandomInputs(gr, inputSeed, g.dists)
	if err != nil {
		return harness.Case{}, fmt.Errorf("smoke case %s: %w", name, err)
	}
	tols := make([]harness.Tolerance, len(gr.Outputs))
	for j, v := range gr.Outputs {
		tols[j] = harness.DefaultTolerance(v.Type.DType).ForReduction(g.k)
	}
	return harness.Case{Suite: "smoke", Name: name, Graph: gr, Inputs: inputs, Seed: inputSeed, Tolerances: tols,
		Labels: []string{"smoke", dt.String()}}, nil
}

type gen struct {
	r     *rand.Rand
	b     *graph.Builder
	dists map[string]harness.Dist
	ops   []string
	nIn   int
	k     int // longest reduction (terms summed into one output element) in the graph
}

var (
	distUnit     = harness.Dist{Kind: harness.DistUniform, Lo: -3, Hi: 3}
	distPositive = harness.Dist{Kind: harness.DistPositive, Lo: 0.5, Hi: 2}
	distGamma    = harness.Dist{Kind: harness.DistUniform, Lo: 0.5, Hi: 1.5}
	distLow      = harness.Dist{Kind: harness.DistUniform, Lo: -1, Hi: 1}
	distHigh     = harness.Dist{Kind: harness.DistUniform, Lo: 1.5, Hi: 3}
)

// positiveDomain lists ops defined (or well conditioned) only for positive inputs.
var positiveDomain = map[string]bool{"log": true, "sqrt": true, "rsqrt": true}

func (g *gen) input(dt numerics.DType, shape []int, d *harness.Dist) *graph.Value {
	name := fmt.Sprintf("x%d", g.nIn)
	g.nIn++
	if d != nil && dt.IsFloat() {
		g.dists[name] = *d
	}
	return g.b.Input(name, dt, shape...)
}

func (g *gen) pick(xs []int) int { return xs[g.r.IntN(len(xs))] }

// shape draws a shape of rank lo..hi with at most ~4k elements.
func (g *gen) shape(lo, hi int) []int {
	s := make([]int, lo+g.r.IntN(hi-lo+1))
	n := 1
	for i := range s {
		s[i] = g.pick(dims)
		for n*s[i] > 4096 {
			s[i] = 1 + s[i]/2
		}
		n *= s[i]
	}
	return s
}

// attentionKind reports whether d is attention or one of its gradient ops: they get no 16-bit
// dtypes (above; attention_grad also reads o stored in 16 bits, which the default tolerance
// does not allow for) and no followers.
func attentionKind(d *graph.OpDef) bool {
	return d.Kind == graph.KindAttention || d.Kind == graph.KindAttentionGrad
}

func (g *gen) pickDType(op *graph.OpDef) numerics.DType {
	ok := dtypesFor(op)
	return ok[g.r.IntN(len(ok))]
}

// dtypesFor is the smoke dtypes op accepts as a head; an op made for one dtype outside them
// (scaled_matmul: e4m3 only) gets its own.
func dtypesFor(op *graph.OpDef) []numerics.DType {
	var ok []numerics.DType
	for _, dt := range smokeDTypes {
		if op.Supports(dt) && !(attentionKind(op) && lowPrecision(dt)) {
			ok = append(ok, dt)
		}
	}
	if op.Name == "scaled_matmul" {
		ok = op.DTypes
	}
	return ok
}

// canHead reports whether the generator knows how to build op: its kind has a template and
// the op's arity fits it, and it accepts a smoke dtype.
func (g *gen) canHead(d *graph.OpDef) bool {
	if len(dtypesFor(d)) == 0 {
		return false
	}
	switch d.Kind {
	case graph.KindUnary, graph.KindCast:
		return d.MinArgs <= 1 && (d.MaxArgs < 0 || d.MaxArgs >= 1) && requiredAttrsKnown(d, "to", "value")
	case graph.KindBinary, graph.KindLoss:
		return d.MinArgs <= 2 && (d.MaxArgs < 0 || d.MaxArgs >= 2) && requiredAttrsKnown(d)
	case graph.KindReduce:
		return d.MinArgs <= 1 && requiredAttrsKnown(d)
	case graph.KindRowwise:
		return d.MinArgs >= 1 && d.MinArgs <= 3 && requiredAttrsKnown(d)
	case graph.KindMatmul:
		return d.Name == "matmul" || d.Name == "batch_matmul" || d.Name == "scaled_matmul"
	case graph.KindAttention:
		return d.MinArgs == 3
	case graph.KindAttentionGrad:
		return d.Name == "attention_lse" || d.Name == "attention_grad"
	case graph.KindMovement:
		return slices.Contains([]string{"transpose", "reshape", "slice", "concat"}, d.Name)
	}
	return false
}

// requiredAttrsKnown reports whether every required attribute of d is one the templates set.
func requiredAttrsKnown(d *graph.OpDef, known ...string) bool {
	for _, a := range d.Attrs {
		if a.Default == nil && !a.Optional && !slices.Contains(known, a.Name) {
			return false
		}
	}
	return true
}

func (g *gen) op(name string, attrs graph.Attrs, in ...*graph.Value) *graph.Value {
	g.ops = append(g.ops, name)
	return g.b.Op(name, attrs, in...)
}

func (g *gen) head(d *graph.OpDef, dt numerics.DType) *graph.Value {
	switch d.Kind {
	case graph.KindUnary:
		dist := &distUnit
		if positiveDomain[d.Name] {
			dist = &distPositive
		}
		var attrs graph.Attrs
		if d.Name == "gelu" && g.r.IntN(2) == 0 {
			attrs = graph.Attrs{"approx": graph.String("tanh")}
		}
		if d.Name == "full_like" {
			attrs = graph.Attrs{"value": graph.Float(fullValues[g.r.IntN(len(fullValues))])}
		}
		return g.op(d.Name, attrs, g.input(dt, g.shape(1, 3), dist))
	case graph.KindCast:
		to := []numerics.DType{numerics.F64, numerics.F32, numerics.F16, numerics.BF16, numerics.I32}
		to = slices.DeleteFunc(to, func(t numerics.DType) bool { return t == dt })
		return g.op(d.Name, graph.Attrs{"to": graph.DTypeAttr(to[g.r.IntN(len(to))])}, g.input(dt, g.shape(1, 3), &distUnit))
	case graph.KindBinary:
		return g.binary(d.Name, dt)
	case graph.KindLoss:
		s := g.shape(1, 3)
		g.k = max(g.k, tensor.NumElems(s))
		// Disjoint ranges keep every squared difference >= 1/4: a scalar loss near zero would
		// make the magnitude guard call the check meaningless.
		return g.op(d.Name, nil, g.input(dt, s, &distLow), g.input(dt, s, &distHigh))
	case graph.KindReduce:
		return g.reduce(d.Name, dt)
	case graph.KindRowwise:
		return g.rowwise(d, dt)
	case graph.KindMatmul:
		return g.matmul(d.Name, dt)
	case graph.KindAttention:
		return g.attention(d.Name, dt)
	case graph.KindAttentionGrad:
		return g.attentionGrad(d.Name, dt)
	case graph.KindMovement:
		return g.movement(d.Name, dt)
	}
	return nil
}

// fullValues are full_like's constants: inexact in binary (0.3, -2.7), exact, and beyond int8
// (127 after saturation in int8; truncated to 300 in int32). The smoke graph's output is the
// constant itself, so a zero (which the magnitude guard refuses) is not among them.
var fullValues = []float64{0.3, -2.7, 1.5, -3, 300.7}

// binary broadcasts one operand against the other: the second shape keeps a suffix of the
// first with some dims set to 1, and the operands are swapped half the time.
func (g *gen) binary(op string, dt numerics.DType) *graph.Value {
	a := g.shape(1, 3)
	b := slices.Clone(a[g.r.IntN(len(a)):])
	for i := range b {
		if g.r.IntN(3) == 0 {
			b[i] = 1
		}
	}
	var db *harness.Dist
	var attrs graph.Attrs
	if op == "div" {
		db = &distPositive
		// Integers divide with a rounding mode only; floats draw one of the three forms.
		if modes := append([]string{""}, graph.DivRoundingModes...); dt.IsInt() {
			attrs = graph.Attrs{"rounding_mode": graph.String(graph.DivRoundingModes[g.r.IntN(2)])}
		} else if m := modes[g.r.IntN(len(modes))]; m != "" {
			attrs = graph.Attrs{"rounding_mode": graph.String(m)}
		}
	}
	if g.r.IntN(2) == 0 && db == nil {
		a, b = b, a
	}
	return g.op(op, attrs, g.input(dt, a, nil), g.input(dt, b, db))
}

func (g *gen) reduce(op string, dt numerics.DType) *graph.Value {
	s := g.shape(1, 3)
	attrs := graph.Attrs{}
	terms := tensor.NumElems(s)
	if g.r.IntN(3) > 0 {
		var axes []int64
		terms = 1
		for i := range s {
			if g.r.IntN(2) == 0 {
				ax := int64(i)
				if g.r.IntN(2) == 0 {
					ax -= int64(len(s))
				}
				axes = append(axes, ax)
				terms *= s[i]
			}
		}
		if len(axes) == 0 {
			axes, terms = []int64{int64(len(s) - 1)}, s[len(s)-1]
		}
		attrs["axes"] = graph.Ints(axes...)
	}
	if g.r.IntN(2) == 0 {
		attrs["keepdims"] = graph.Bool(true)
	}
	g.k = max(g.k, terms)
	var dist *harness.Dist
	if tensor.NumElems(s)/terms < 4 {
		// A few zero-mean sums could all land near zero, where the magnitude guard (rightly)
		// refuses to judge; positive terms keep them away from it.
		dist = &distPositive
	}
	return g.op(op, attrs, g.input(dt, s, dist))
}

func (g *gen) rowwise(d *graph.OpDef, dt numerics.DType) *graph.Value {
	s := g.shape(1, 3)
	if d.MinArgs == 3 {
		// Layernorm subtracts the row mean: over 2..6 values the variance is too often tiny
		// next to the mean, where f32 cancellation legitimately exceeds the default tolerance.
		for s[len(s)-1] > 1 && s[len(s)-1] < 7 {
			s[len(s)-1] = g.pick(dims)
		}
	}
	x := g.input(dt, s, nil)
	last := s[len(s)-1]
	switch d.MinArgs {
	case 1: // softmax-like: along a random axis
		ax := g.r.IntN(len(s))
		g.k = max(g.k, s[ax])
		if g.r.IntN(2) == 0 {
			ax -= len(s)
		}
		return g.op(d.Name, graph.Attrs{"axis": graph.Int(int64(ax))}, x)
	case 2: // rmsnorm-like: x, gamma[last]
		g.k = max(g.k, last)
		return g.op(d.Name, nil, x, g.input(dt, []int{last}, &distGamma))
	default: // layernorm-like: x, gamma[last], beta[last]
		g.k = max(g.k, last)
		return g.op(d.Name, nil, x, g.input(dt, []int{last}, &distGamma), g.input(dt, []int{last}, &distUnit))
	}
}

func (g *gen) matmul(op string, dt numerics.DType) *graph.Value {
	m, n, k := g.pick(dims), g.pick(dims), g.pick(dims)
	if op == "scaled_matmul" { // b is [N,K]; positive scales; any output dtype
		g.k = max(g.k, k)
		outs := graph.ScaledMatmulOuts
		return g.op(op, graph.Attrs{"out_dtype": graph.DTypeAttr(outs[g.r.IntN(len(outs))])},
			g.input(dt, []int{m, k}, nil), g.input(dt, []int{n, k}, nil),
			g.input(numerics.F32, nil, &distPositive), g.input(numerics.F32, []int{1}, &distPositive))
	}
	ta, tb := g.r.IntN(2) == 0, g.r.IntN(2) == 0
	a, b := []int{m, k}, []int{k, n}
	if ta {
		a = []int{k, m}
	}
	if tb {
		b = []int{n, k}
	}
	if op == "batch_matmul" {
		batch := 1 + g.r.IntN(3)
		a, b = append([]int{batch}, a...), append([]int{batch}, b...)
	}
	attrs := graph.Attrs{}
	if ta {
		attrs["transpose_a"] = graph.Bool(true)
	}
	if tb {
		attrs["transpose_b"] = graph.Bool(true)
	}
	if g.r.IntN(3) == 0 {
		// An explicit tile hint exercises masked edge tiles on every dim.
		ts := []int64{1, 2, 4, 8, 16, 32}
		attrs["tile"] = graph.Ints(ts[g.r.IntN(len(ts))], ts[g.r.IntN(len(ts))], ts[g.r.IntN(len(ts))])
	}
	g.k = max(g.k, k)
	return g.op(op, attrs, g.input(dt, a, nil), g.input(dt, b, nil))
}

// attentionDims draws an attention problem: query and key lengths, head dims, an optional
// batch dim (shape builds [batch..., a, b]) and an optional causal mask.
func (g *gen) attentionDims() (sq, sk, d, dv int, shape func(a, b int) []int, attrs graph.Attrs) {
	sq, sk, d, dv = g.pick(dims), g.pick(dims), g.pick(dims), g.pick(dims)
	lead := []int{}
	if g.r.IntN(2) == 0 {
		lead = []int{1 + g.r.IntN(3)}
	}
	shape = func(a, b int) []int { return append(slices.Clone(lead), a, b) }
	attrs = graph.Attrs{}
	if g.r.IntN(2) == 0 {
		attrs["causal"] = graph.Bool(true)
	}
	return sq, sk, d, dv, shape, attrs
}

func (g *gen) attention(op string, dt numerics.DType) *graph.Value {
	sq, sk, d, dv, shape, attrs := g.attentionDims()
	g.k = max(g.k, sk, d)
	return g.op(op, attrs, g.input(dt, shape(sq, d), nil), g.input(dt, shape(sk, d), nil), g.input(dt, shape(sk, dv), nil))
}

// attentionGrad builds attention_lse(q, k), or attention_grad as reverse mode emits it: the
// forward o = attention(q, k, v) and lse = attention_lse(q, k) are nodes of the graph (so the
// saved values are the forward's, as the op requires), dO is an input, wrt q, k or v. Only
// the head is named in the case name (and counted by the smoke test's head detection).
func (g *gen) attentionGrad(op string, dt numerics.DType) *graph.Value {
	sq, sk, d, dv, shape, attrs := g.attentionDims()
	q, k := g.input(dt, shape(sq, d), nil), g.input(dt, shape(sk, d), nil)
	if op == "attention_lse" {
		g.k = max(g.k, sk, d)
		return g.op(op, attrs, q, k)
	}
	// dQ sums over keys, dK and dV over queries, dP and rowsum(dO*O) over Dv.
	g.k = max(g.k, sq, sk, d, dv)
	v, do := g.input(dt, shape(sk, dv), nil), g.input(dt, shape(sq, dv), nil)
	o := g.b.Op("attention", attrs, q, k, v)
	lse := g.b.Op("attention_lse", attrs, q, k)
	ga := maps.Clone(attrs)
	ga["wrt"] = graph.String([]string{"q", "k", "v"}[g.r.IntN(3)])
	return g.op(op, ga, q, k, v, o, do, lse)
}

func (g *gen) movement(op string, dt numerics.DType) *graph.Value {
	s := g.shape(1, 3)
	switch op {
	case "transpose":
		perm := g.r.Perm(len(s))
		p := make([]int64, len(perm))
		for i, v := range perm {
			p[i] = int64(v)
		}
		return g.op(op, graph.Attrs{"perm": graph.Ints(p...)}, g.input(dt, s, nil))
	case "reshape":
		// Split the element count as [a, -1] where a is one of the dims, or flatten.
		to := []int64{-1}
		if g.r.IntN(2) == 0 {
			to = []int64{int64(s[g.r.IntN(len(s))]), -1}
		}
		return g.op(op, graph.Attrs{"shape": graph.Ints(to...)}, g.input(dt, s, nil))
	case "slice":
		st, en := make([]int64, len(s)), make([]int64, len(s))
		for i, d := range s {
			a := g.r.IntN(d)
			st[i], en[i] = int64(a), int64(a+1+g.r.IntN(d-a))
		}
		return g.op(op, graph.Attrs{"starts": graph.Ints(st...), "ends": graph.Ints(en...)}, g.input(dt, s, nil))
	default: // concat
		ax := g.r.IntN(len(s))
		n := 2 + g.r.IntN(2)
		ins := make([]*graph.Value, n)
		for i := range ins {
			si := slices.Clone(s)
			si[ax] = g.pick(dims)
			ins[i] = g.input(dt, si, nil)
		}
		return g.op(op, graph.Attrs{"axis": graph.Int(int64(ax))}, ins...)
	}
}

// follow appends one well-conditioned op to x: none of them amplifies an absolute error.
func (g *gen) follow(x *graph.Value) *graph.Value {
	choices := []string{"relu", "tanh", "sigmoid", "neg", "abs", "add"}
	var ok []string
	for _, c := range choices {
		if d, found := graph.Lookup(c); found && d.Supports(x.Type.DType) {
			ok = append(ok, c)
		}
	}
	if len(ok) == 0 {
		return x
	}
	op := ok[g.r.IntN(len(ok))]
	if op == "add" {
		return g.op(op, nil, x, g.input(x.Type.DType, slices.Clone(x.Type.Shape), nil))
	}
	return g.op(op, nil, x)
}
