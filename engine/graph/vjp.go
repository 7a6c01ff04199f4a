package graph

import (
	"math"
	"slices"

	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

// GradRule is an op's vector-Jacobian product, written in graph ops so that the backward runs
// through the same compiler on every backend (engine/autodiff walks the graph and calls it).
type GradRule struct {
	// VJP returns, for every input i with need[i], the gradient of the loss with respect to
	// input i, given dy, the gradient with respect to n's output. A nil entry means zero.
	// Ops are added to b; a rule that cannot differentiate this node calls b.Fail.
	VJP func(b *Builder, n *Node, dy *Value, need []bool) []*Value
	// Upcast: for f16, bf16 and fp8 nodes autodiff applies VJP to f32 copies of the inputs,
	// output and dy and casts the gradients back, so the rule's intermediates round once, like
	// the forward op that computes in f32. Rules built on matmul/attention keep the storage dtype.
	Upcast bool
}

// Fail makes the builder's first error err (a rule's way to refuse a node).
func (b *Builder) Fail(err error) {
	if b.err == nil {
		b.err = err
	}
}

// Err is the builder's first error, nil while every op so far was valid.
func (b *Builder) Err() error { return b.err }

// Graph is the graph under construction (its inputs, nodes, outputs and mesh).
func (b *Builder) Graph() *Graph { return b.g }

// Extend returns a builder that appends to g; names already in g stay taken.
func Extend(g *Graph) *Builder {
	b := &Builder{g: g, names: map[string]bool{}}
	for _, v := range g.Inputs {
		b.names[v.Name] = true
	}
	for _, n := range g.Nodes {
		b.names[n.Output.Name] = true
	}
	return b
}

func gradOf(vjp func(b *Builder, n *Node, dy *Value, need []bool) []*Value, upcast bool) *GradRule {
	return &GradRule{VJP: vjp, Upcast: upcast}
}

// unary rules: dx = dy * f'(x), with y the node's output where that is cheaper.
func unaryRule(deriv func(b *Builder, x, y *Value) *Value) *GradRule {
	return gradOf(func(b *Builder, n *Node, dy *Value, need []bool) []*Value {
		return []*Value{b.Op("mul", nil, dy, deriv(b, n.Inputs[0], n.Output))}
	}, true)
}

// c is the constant v in x's shape and dtype.
func (b *Builder) c(x *Value, v float64) *Value {
	return b.Op("full_like", Attrs{"value": Float(v)}, x)
}

func (b *Builder) scaled(x *Value, v float64) *Value { return b.Op("mul", nil, x, b.c(x, v)) }

func ints64(s []int) []int64 {
	out := make([]int64, len(s))
	for i, d := range s {
		out[i] = int64(d)
	}
	return out
}

func (b *Builder) reshapeTo(x *Value, shape []int) *Value {
	if slices.Equal(x.Type.Shape, shape) {
		return x
	}
	return b.Op("reshape", Attrs{"shape": Ints(ints64(shape)...)}, x)
}

// sumTo reduces g (a broadcast result) to shape: the transpose of numpy broadcasting.
func (b *Builder) sumTo(g *Value, shape []int) *Value {
	gs := g.Type.Shape
	if slices.Equal(gs, shape) {
		return g
	}
	lead := len(gs) - len(shape)
	var axes []int64
	for d := range gs {
		if d < lead || (shape[d-lead] == 1 && gs[d] != 1) {
			axes = append(axes, int64(d))
		}
	}
	if len(axes) > 0 {
		g = b.Op("reduce_sum", Attrs{"axes": Ints(axes...)}, g)
	}
	return b.reshapeTo(g, shape)
}

// expand broadcasts g to like's shape (g's shape must broadcast to it).
func (b *Builder) expand(g, like *Value) *Value {
	if slices.Equal(g.Type.Shape, like.Type.Shape) {
		return g
	}
	return b.Op("mul", nil, b.c(like, 1), g)
}

// keptShape is shape with the reduced axes kept as size 1.
func keptShape(shape, axes []int) []int {
	out := slices.Clone(shape)
	for _, a := range axes {
		out[a] = 1
	}
	return out
}

func lastAxis() Attrs { return Attrs{"axes": Ints(-1), "keepdims": Bool(true)} }

// sumRows sums g over every axis but the last (the gradient of a [last]-shaped scale or shift).
func (b *Builder) sumRows(g *Value) *Value {
	r := g.Type.Rank()
	if r <= 1 {
		return g
	}
	axes := make([]int64, r-1)
	for i := range axes {
		axes[i] = int64(i)
	}
	return b.Op("reduce_sum", Attrs{"axes": Ints(axes...)}, g)
}

func binaryRule(f func(b *Builder, a, c, y, dy *Value, need []bool) (ga, gb *Value)) *GradRule {
	return gradOf(func(b *Builder, n *Node, dy *Value, need []bool) []*Value {
		a, c := n.Inputs[0], n.Inputs[1]
		ga, gb := f(b, a, c, n.Output, dy, need)
		out := []*Value{nil, nil}
		if need[0] && ga != nil {
			out[0] = b.sumTo(ga, a.Type.Shape)
		}
		if need[1] && gb != nil {
			out[1] = b.sumTo(gb, c.Type.Shape)
		}
		return out
	}, true)
}

// maxRule: the gradient goes to the larger input, half to each on a tie (torch's rule):
// with s = sign(a-b), a gets dy*(1+s)/2 and b gets dy*(1-s)/2.
func maxRule(first string) *GradRule {
	return binaryRule(func(b *Builder, a, c, _, dy *Value, _ []bool) (*Value, *Value) {
		s := b.Op("sign", nil, b.Op("sub", nil, a, c))
		if first == "b" {
			s = b.Op("neg", nil, s)
		}
		one := b.c(s, 1)
		ga := b.Op("mul", nil, dy, b.scaled(b.Op("add", nil, one, s), 0.5))
		gb := b.Op("mul", nil, dy, b.scaled(b.Op("sub", nil, one, s), 0.5))
		return ga, gb
	})
}

var unaryRules = map[string]*GradRule{
	"abs":  unaryRule(func(b *Builder, x, _ *Value) *Value { return b.Op("sign", nil, x) }),
	"relu": unaryRule(func(b *Builder, x, _ *Value) *Value { return b.Op("relu", nil, b.Op("sign", nil, x)) }),
	"exp":  unaryRule(func(b *Builder, _, y *Value) *Value { return y }),
	"log": gradOf(func(b *Builder, n *Node, dy *Value, _ []bool) []*Value {
		return []*Value{b.Op("div", nil, dy, n.Inputs[0])}
	}, true),
	"sqrt": gradOf(func(b *Builder, n *Node, dy *Value, _ []bool) []*Value {
		return []*Value{b.Op("div", nil, dy, b.Op("add", nil, n.Output, n.Output))}
	}, true),
	"rsqrt": unaryRule(func(b *Builder, _, y *Value) *Value {
		return b.scaled(b.Op("mul", nil, y, b.Op("mul", nil, y, y)), -0.5)
	}),
	"tanh": unaryRule(func(b *Builder, _, y *Value) *Value {
		return b.Op("sub", nil, b.c(y, 1), b.Op("mul", nil, y, y))
	}),
	"sigmoid": unaryRule(func(b *Builder, _, y *Value) *Value {
		return b.Op("mul", nil, b.Op("sub", nil, b.c(y, 1), y), y)
	}),
	"silu": unaryRule(func(b *Builder, x, _ *Value) *Value { // s(1 + x(1-s))
		s := b.Op("sigmoid", nil, x)
		return b.Op("mul", nil, s, b.Op("add", nil, b.c(x, 1), b.Op("mul", nil, x, b.Op("sub", nil, b.c(x, 1), s))))
	}),
	"erf": unaryRule(func(b *Builder, x, _ *Value) *Value { // 2/sqrt(pi) e^(-x^2)
		return b.scaled(b.Op("exp", nil, b.Op("neg", nil, b.Op("mul", nil, x, x))), 2/math.Sqrt(math.Pi))
	}),
	"gelu": gradOf(func(b *Builder, n *Node, dy *Value, _ []bool) []*Value {
		x := n.Inputs[0]
		if n.StringAttr("approx") == "tanh" {
			// 0.5(1+t) + 0.5x(1-t^2) k(1+3c x^2), t = tanh(k(x+c x^3)), k = sqrt(2/pi), c = 0.044715
			k, c := math.Sqrt(2/math.Pi), 0.044715
			x2 := b.Op("mul", nil, x, x)
			t := b.Op("tanh", nil, b.scaled(b.Op("add", nil, x, b.scaled(b.Op("mul", nil, x2, x), c)), k))
			left := b.scaled(b.Op("add", nil, b.c(x, 1), t), 0.5)
			dt := b.Op("sub", nil, b.c(x, 1), b.Op("mul", nil, t, t))
			inner := b.scaled(b.Op("add", nil, b.c(x, 1), b.scaled(x2, 3*c)), k)
			right := b.Op("mul", nil, b.scaled(x, 0.5), b.Op("mul", nil, dt, inner))
			return []*Value{b.Op("mul", nil, dy, b.Op("add", nil, left, right))}
		}
		// Phi(x) + x phi(x)
		phi := b.scaled(b.Op("add", nil, b.c(x, 1), b.Op("erf", nil, b.scaled(x, 1/math.Sqrt2))), 0.5)
		pdf := b.scaled(b.Op("exp", nil, b.scaled(b.Op("mul", nil, x, x), -0.5)), 1/math.Sqrt(2*math.Pi))
		return []*Value{b.Op("mul", nil, dy, b.Op("add", nil, phi, b.Op("mul", nil, x, pdf)))}
	}, true),
}

func init() {
	setGrad := func(op string, r *GradRule) {
		d, ok := registry[op]
		if !ok {
			panic("graph: gradient rule for unknown op " + op)
		}
		d.Grad = r
	}
	noGrad := func(reason string, ops ...string) {
		for _, op := range ops {
			registry[op].NoGrad = reason
		}
	}
	setGrad("neg", gradOf(func(b *Builder, _ *Node, dy *Value, _ []bool) []*Value {
		return []*Value{b.Op("neg", nil, dy)}
	}, false))
	for op, r := range unaryRules {
		setGrad(op, r)
	}
	// Constants of x's type and sign have a zero derivative: no gradient flows through them.
	zero := gradOf(func(*Builder, *Node, *Value, []bool) []*Value { return []*Value{nil} }, false)
	setGrad("full_like", zero)
	setGrad("sign", zero)

	setGrad("add", binaryRule(func(_ *Builder, _, _, _, dy *Value, _ []bool) (*Value, *Value) { return dy, dy }))
	setGrad("sub", binaryRule(func(b *Builder, _, _, _, dy *Value, need []bool) (*Value, *Value) {
		var gb *Value
		if need[1] {
			gb = b.Op("neg", nil, dy)
		}
		return dy, gb
	}))
	setGrad("mul", binaryRule(func(b *Builder, a, c, _, dy *Value, need []bool) (ga, gb *Value) {
		if need[0] {
			ga = b.Op("mul", nil, dy, c)
		}
		if need[1] {
			gb = b.Op("mul", nil, dy, a)
		}
		return ga, gb
	}))
	trueDiv := binaryRule(func(b *Builder, a, c, _, dy *Value, need []bool) (ga, gb *Value) {
		ga = b.Op("div", nil, dy, c)
		if need[1] { // -dy a / c^2, as (dy/c)(a/c) so that c^2 cannot overflow first
			gb = b.Op("neg", nil, b.Op("mul", nil, ga, b.Op("div", nil, a, c)))
		}
		return ga, gb
	})
	// trunc and floor division are step functions: torch 1.13 gives both operands a zero
	// gradient (measured: also at the steps, and for b's side), so no gradient flows.
	setGrad("div", gradOf(func(b *Builder, n *Node, dy *Value, need []bool) []*Value {
		if DivRounding(n) != "" {
			return []*Value{nil, nil}
		}
		return trueDiv.VJP(b, n, dy, need)
	}, true))
	setGrad("maximum", maxRule("a"))
	setGrad("minimum", maxRule("b"))

	setGrad("cast", gradOf(func(b *Builder, n *Node, dy *Value, _ []bool) []*Value {
		x := n.Inputs[0]
		if !x.Type.DType.IsFloat() || !n.Output.Type.DType.IsFloat() {
			return []*Value{nil} // integer values carry no gradient
		}
		return []*Value{b.Op("cast", Attrs{"to": DTypeAttr(x.Type.DType)}, dy)}
	}, false))

	setGrad("reduce_sum", gradOf(func(b *Builder, n *Node, dy *Value, _ []bool) []*Value {
		x := n.Inputs[0]
		axes, _ := ReduceAxes(n, x.Type.Rank())
		return []*Value{b.expand(b.reshapeTo(dy, keptShape(x.Type.Shape, axes)), x)}
	}, true))
	setGrad("reduce_mean", gradOf(func(b *Builder, n *Node, dy *Value, _ []bool) []*Value {
		x := n.Inputs[0]
		axes, _ := ReduceAxes(n, x.Type.Rank())
		count := x.Type.NumElems() / max(n.Output.Type.NumElems(), 1)
		return []*Value{b.Op("div", nil, b.reshapeTo(dy, keptShape(x.Type.Shape, axes)), b.c(x, float64(count)))}
	}, true))
	setGrad("reduce_max", gradOf(func(b *Builder, n *Node, dy *Value, _ []bool) []*Value {
		// Ties share the gradient evenly (torch.amax): mask = [x == max], dx = dy*mask/count.
		x := n.Inputs[0]
		axes, _ := ReduceAxes(n, x.Type.Rank())
		kept := keptShape(x.Type.Shape, axes)
		hit := b.Op("abs", nil, b.Op("sign", nil, b.Op("sub", nil, x, b.reshapeTo(n.Output, kept))))
		mask := b.Op("sub", nil, b.c(x, 1), hit)
		count := b.Op("reduce_sum", Attrs{"axes": Ints(ints64(axes)...), "keepdims": Bool(true)}, mask)
		return []*Value{b.Op("div", nil, b.Op("mul", nil, mask, b.reshapeTo(dy, kept)), count)}
	}, true))

	setGrad("softmax", gradOf(func(b *Builder, n *Node, dy *Value, _ []bool) []*Value {
		y := n.Output
		s := b.Op("reduce_sum", Attrs{"axes": Ints(n.IntAttr("axis")), "keepdims": Bool(true)}, b.Op("mul", nil, dy, y))
		return []*Value{b.Op("mul", nil, y, b.Op("sub", nil, dy, s))}
	}, true))
	setGrad("log_softmax", gradOf(func(b *Builder, n *Node, dy *Value, _ []bool) []*Value {
		s := b.Op("reduce_sum", Attrs{"axes": Ints(n.IntAttr("axis")), "keepdims": Bool(true)}, dy)
		return []*Value{b.Op("sub", nil, dy, b.Op("mul", nil, b.Op("exp", nil, n.Output), s))}
	}, true))
	setGrad("layernorm", gradOf(layernormVJP, true))
	setGrad("rmsnorm", gradOf(rmsnormVJP, true))
	setGrad("mse_loss", gradOf(func(b *Builder, n *Node, dy *Value, need []bool) []*Value {
		d := b.Op("sub", nil, n.Inputs[0], n.Inputs[1])
		scale := 2.0 // sum and none: d(a-b)^2/da = 2(a-b); dy is a scalar for sum, a's shape for none
		if n.StringAttr("reduction") == "mean" {
			scale = 2 / float64(max(d.Type.NumElems(), 1))
		}
		ga := b.Op("mul", nil, d, b.scaled(dy, scale))
		return []*Value{ga, b.Op("neg", nil, ga)}
	}, true))

	setGrad("matmul", gradOf(matmulVJP, false))
	setGrad("batch_matmul", gradOf(matmulVJP, false))
	setGrad("attention", gradOf(attentionVJP, false))
	noGrad("second derivatives of attention are not implemented", "attention_lse", "attention_grad")

	setGrad("transpose", gradOf(func(b *Builder, n *Node, dy *Value, _ []bool) []*Value {
		perm := n.IntsAttr("perm")
		inv := make([]int64, len(perm))
		for i, p := range perm {
			inv[p] = int64(i)
		}
		return []*Value{b.Op("transpose", Attrs{"perm": Ints(inv...)}, dy)}
	}, false))
	setGrad("reshape", gradOf(func(b *Builder, n *Node, dy *Value, _ []bool) []*Value {
		return []*Value{b.reshapeTo(dy, n.Inputs[0].Type.Shape)}
	}, false))
	setGrad("slice", gradOf(sliceVJP, false))
	setGrad("concat", gradOf(concatVJP, false))

	setGrad("all_reduce", gradOf(func(b *Builder, n *Node, dy *Value, _ []bool) []*Value {
		ax := n.Attrs["axis"]
		switch n.StringAttr("op") {
		case "sum", "avg": // both are symmetric linear maps over the group: their own transpose
			return []*Value{b.Op("all_reduce", n.Attrs.Clone(), dy)}
		}
		// max/min: every member's output is the extreme, so member r's input gets the sum of
		// the group's output gradients where it holds the extreme, shared among ties.
		hit := b.hits(n.Inputs[0], n.Output)
		sum := Attrs{"axis": ax, "op": String("sum")}
		return []*Value{b.Op("div", nil, b.Op("mul", nil, b.Op("all_reduce", sum, dy), hit), b.Op("all_reduce", sum.Clone(), hit))}
	}, false))
	setGrad("all_gather", gradOf(func(b *Builder, n *Node, dy *Value, _ []bool) []*Value {
		return []*Value{b.Op("reduce_scatter", Attrs{"axis": n.Attrs["axis"], "dim": Int(n.IntAttr("dim")), "op": String("sum")}, dy)}
	}, false))
	setGrad("reduce_scatter", gradOf(func(b *Builder, n *Node, dy *Value, _ []bool) []*Value {
		gather := Attrs{"axis": n.Attrs["axis"], "dim": Int(n.IntAttr("dim"))}
		g := b.Op("all_gather", gather, dy)
		switch n.StringAttr("op") {
		case "sum":
			return []*Value{g}
		case "avg":
			return []*Value{b.scaled(g, 1/float64(b.g.Mesh.Size(n.StringAttr("axis"))))}
		}
		// max/min: as all_reduce's, on the gathered extreme.
		hit := b.hits(n.Inputs[0], b.Op("all_gather", gather.Clone(), n.Output))
		cnt := b.Op("all_reduce", Attrs{"axis": n.Attrs["axis"], "op": String("sum")}, hit)
		return []*Value{b.Op("div", nil, b.Op("mul", nil, g, hit), cnt)}
	}, false))
	setGrad("all_to_all", gradOf(func(b *Builder, n *Node, dy *Value, _ []bool) []*Value {
		return []*Value{b.Op("all_to_all", Attrs{"axis": n.Attrs["axis"], "split_dim": Int(n.IntAttr("concat_dim")), "concat_dim": Int(n.IntAttr("split_dim"))}, dy)}
	}, false))
	noGrad("its transpose puts the gradient on one member and zeros elsewhere, which needs a rank-dependent op the set does not have", "broadcast", "chunk")
	noGrad("fp8 training recipes differentiate through a higher-precision matmul (the fp8 operands are a forward-only quantisation), as torch._scaled_mm has no backward", "scaled_matmul")
	noGrad("pipeline send/recv gradients (the reversed transfer) are not implemented", "send", "recv")
}

// hits is 1 where x equals the extreme y (same shape), else 0.
func (b *Builder) hits(x, y *Value) *Value {
	return b.Op("sub", nil, b.c(x, 1), b.Op("abs", nil, b.Op("sign", nil, b.Op("sub", nil, x, y))))
}

// GradError is the coded error autodiff returns for a node whose op has no gradient.
func GradError(n *Node) error {
	d := n.Def()
	reason := "no gradient rule"
	if d != nil && d.NoGrad != "" {
		reason = d.NoGrad
	}
	return errs.New(errs.Unsupported, "%s: %s has no gradient: %s", nodeRef(n), n.Op, reason)
}

func layernormVJP(b *Builder, n *Node, dy *Value, need []bool) []*Value {
	x, gamma := n.Inputs[0], n.Inputs[1]
	mean := b.Op("reduce_mean", lastAxis(), x)
	xc := b.Op("sub", nil, x, mean)
	variance := b.Op("reduce_mean", lastAxis(), b.Op("mul", nil, xc, xc))
	rstd := b.Op("rsqrt", nil, b.Op("add", nil, variance, b.c(variance, n.FloatAttr("eps"))))
	xhat := b.Op("mul", nil, xc, rstd)
	out := make([]*Value, 3)
	if need[0] {
		dxhat := b.Op("mul", nil, dy, gamma)
		a := b.Op("reduce_mean", lastAxis(), dxhat)
		c := b.Op("reduce_mean", lastAxis(), b.Op("mul", nil, dxhat, xhat))
		out[0] = b.Op("mul", nil, rstd, b.Op("sub", nil, b.Op("sub", nil, dxhat, a), b.Op("mul", nil, xhat, c)))
	}
	if need[1] {
		out[1] = b.sumRows(b.Op("mul", nil, dy, xhat))
	}
	if need[2] {
		out[2] = b.sumRows(dy)
	}
	return out
}

func rmsnormVJP(b *Builder, n *Node, dy *Value, need []bool) []*Value {
	x, gamma := n.Inputs[0], n.Inputs[1]
	ms := b.Op("reduce_mean", lastAxis(), b.Op("mul", nil, x, x))
	r := b.Op("rsqrt", nil, b.Op("add", nil, ms, b.c(ms, n.FloatAttr("eps"))))
	xhat := b.Op("mul", nil, x, r)
	out := make([]*Value, 2)
	if need[0] {
		dxhat := b.Op("mul", nil, dy, gamma)
		c := b.Op("reduce_mean", lastAxis(), b.Op("mul", nil, dxhat, xhat))
		out[0] = b.Op("mul", nil, r, b.Op("sub", nil, dxhat, b.Op("mul", nil, xhat, c)))
	}
	if need[1] {
		out[1] = b.sumRows(b.Op("mul", nil, dy, xhat))
	}
	return out
}

// matmulVJP: with op(A) the operand after its transpose flag, d op(A) = dy op(B)^T and
// d op(B) = op(A)^T dy; a transposed operand's gradient is the transpose of those, which the
// flags express without a transpose op.
func matmulVJP(b *Builder, n *Node, dy *Value, need []bool) []*Value {
	a, c := n.Inputs[0], n.Inputs[1]
	ta, tb := n.BoolAttr("transpose_a"), n.BoolAttr("transpose_b")
	mm := func(x, y *Value, tx, ty bool) *Value {
		at := Attrs{"transpose_a": Bool(tx), "transpose_b": Bool(ty)}
		if n.HasAttrSet("accum") {
			at["accum"] = n.Attrs["accum"]
		}
		return b.Op(n.Op, at, x, y)
	}
	out := make([]*Value, 2)
	if need[0] {
		if ta {
			out[0] = mm(c, dy, tb, true)
		} else {
			out[0] = mm(dy, c, false, !tb)
		}
	}
	if need[1] {
		if tb {
			out[1] = mm(dy, a, true, ta)
		} else {
			out[1] = mm(a, dy, !ta, false)
		}
	}
	return out
}

// attentionVJP saves the log-sum-exp of the scores (attention_lse) and computes each wanted
// input's gradient with the fused backward kernel.
func attentionVJP(b *Builder, n *Node, dy *Value, need []bool) []*Value {
	at := Attrs{"causal": Bool(n.BoolAttr("causal"))}
	for _, k := range []string{"scale", "accum"} {
		if n.HasAttrSet(k) {
			at[k] = n.Attrs[k]
		}
	}
	q, k, v, y := n.Inputs[0], n.Inputs[1], n.Inputs[2], n.Output
	lse := b.Op("attention_lse", at.Clone(), q, k)
	dt := q.Type.DType
	wide := dt == numerics.F8E4M3 || dt == numerics.F8E5M2 // fp8: the backward runs in bf16
	conv := func(x *Value, to numerics.DType) *Value {
		if !wide {
			return x
		}
		return b.Op("cast", Attrs{"to": DTypeAttr(to)}, x)
	}
	bq, bk, bv, by, bdy := conv(q, numerics.BF16), conv(k, numerics.BF16), conv(v, numerics.BF16), conv(y, numerics.BF16), conv(dy, numerics.BF16)
	out := make([]*Value, 3)
	for i, w := range []string{"q", "k", "v"} {
		if need[i] {
			a := at.Clone()
			a["wrt"] = String(w)
			out[i] = conv(b.Op("attention_grad", a, bq, bk, bv, by, bdy, lse), dt)
		}
	}
	return out
}

// sliceVJP pads dy with zeros back to x's shape, one axis at a time; each zero block is a
// full_like of the matching slice of x, so no op beyond the set is needed.
func sliceVJP(b *Builder, n *Node, dy *Value, _ []bool) []*Value {
	x := n.Inputs[0]
	st, en := n.IntsAttr("starts"), n.IntsAttr("ends")
	g := dy
	for d := range x.Type.Shape {
		pieces := []*Value{}
		zeros := func(lo, hi int) *Value {
			s, e := slices.Clone(st), slices.Clone(en)
			for a := 0; a < d; a++ {
				s[a], e[a] = 0, x.Type.Shape[a]
			}
			s[d], e[d] = lo, hi
			return b.c(b.Op("slice", Attrs{"starts": Ints(ints64(s)...), "ends": Ints(ints64(e)...)}, x), 0)
		}
		if st[d] > 0 {
			pieces = append(pieces, zeros(0, st[d]))
		}
		pieces = append(pieces, g)
		if en[d] < x.Type.Shape[d] {
			pieces = append(pieces, zeros(en[d], x.Type.Shape[d]))
		}
		if len(pieces) > 1 {
			g = b.Op("concat", Attrs{"axis": Int(int64(d))}, pieces...)
		}
	}
	return []*Value{g}
}

func concatVJP(b *Builder, n *Node, dy *Value, need []bool) []*Value {
	ax, _ := NormAxis(int(n.IntAttr("axis")), dy.Type.Rank())
	out := make([]*Value, len(n.Inputs))
	off := 0
	for i, in := range n.Inputs {
		if need[i] {
			s, e := make([]int, dy.Type.Rank()), slices.Clone(dy.Type.Shape)
			s[ax], e[ax] = off, off+in.Type.Shape[ax]
			out[i] = b.Op("slice", Attrs{"starts": Ints(ints64(s)...), "ends": Ints(ints64(e)...)}, dy)
		}
		off += in.Type.Shape[ax]
	}
	return out
}

// IsDifferentiable reports whether values of dt carry gradients (floats do).
func IsDifferentiable(dt numerics.DType) bool { return dt.IsFloat() }
