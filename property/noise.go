package property

import (
	"fmt"
	"maps"
	"math"
	"slices"

	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/engine/ref"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
	"github.com/tessera-qa/tessera-qa/harness"
)

// The noise model: how far a correct engine may legitimately be from the golden model, node
// by node. Judgeable runs the golden model with every inexact node perturbed this way; a case
// whose outputs then leave their tolerance is ill-conditioned (an exp of a value that carries
// rounding error, a log of a sum that cancels, a float->int cast of a value next to an
// integer, a layernorm of a nearly constant row) and is filtered out, because a failure on it
// would say nothing about the engine. The model is deliberately a few times coarser than what
// the CPU backend does, so that a case that survives it has margin on every backend:
//
//   - exact ops move no bits: movement, casts, neg/abs/relu, maximum/minimum, reduce_max and
//     everything on ints and bool (integer arithmetic wraps identically in any order);
//   - elementwise float ops compute in f32 (f64 for f64) and round to the output dtype; the
//     compute result is off by up to ±1/2 ulp (arithmetic, correctly rounded: this models the
//     double rounding of 16- and 8-bit results) or ±2 ulps (transcendentals, which GPUs
//     approximate) of the compute dtype;
//   - where that reach (or an accumulator's 2·u), plus two subnormal steps of the compute
//     dtype (below the normal range results round to a fixed absolute spacing), spans a
//     rounding boundary of the output dtype, the result is taken on the other side: such a
//     flip is rare and certain for its element, so it is modelled deterministically rather
//     than left to a draw; a flip includes the sign of a zero, and a zero that is a sum
//     (accumulating ops) has no defined sign at all;
//   - accumulating ops (sums, means, matmuls, norms, attention) compute exactly on
//     inputs moved by up to 2·u·sqrt(K) relative, u the accumulator's unit roundoff and K the
//     terms per output, plus a common factor of up to 2·u·K for an f16 or bf16 accumulator,
//     which stagnates on long sums: the backward error of a K-term sum, which also covers the
//     cancellation in a layernorm's mean and a sum that cancels to near zero; mse_loss, a sum
//     of squares that cannot cancel, is off by that much relative instead;
//   - layernorm also shifts each normalized row by up to that much of |mean|/std: the error of
//     the mean it subtracts, which moving the inputs does not reproduce; and both norms scale
//     a row by the relative error of its statistic (var+eps, mean(x²)+eps) when that is near
//     the subnormals of the accumulator, whose spacing then bounds its absolute error;
//   - softmax and log_softmax move each logit by up to 2·u relative to its distance from the
//     row maximum (they subtract the maximum first), and scale each row's result by up to
//     2·u·sqrt(K) (the sum); log_softmax shifts the row by that much instead;
//   - f16/bf16 attention rounds the probabilities to the storage dtype before multiplying by
//     V, so V moves by up to 2 storage roundoffs as well;
//   - attention_grad reads the engine's o and lse where the golden model recomputes them
//     exactly: the model feeds it the o and lse that the noise model gave the forward nodes
//     (savedStats), so a case whose gradient amplifies their rounding (fp8, or f16/bf16 where
//     dP - rowsum(dO*O) cancels) is not judgeable;
//   - an accumulating node whose accumulator could overflow, and an attention (or its
//     gradient) whose V (or dO) holds an infinity, are not modelled: their cases are not
//     judgeable (unmodelled);
//   - a matmul -> softmax -> matmul chain may be fused into one attention kernel that keeps
//     the scores unrounded, so those intermediates may also be one ulp off after rounding.

// Judgeable reports whether c can be judged under its tolerances: every golden output passes a
// check against itself (the magnitude guard finds it meaningful) and is not a varying tensor
// within tolerance of a constant, and perturbed by the noise model (five times) it still
// passes against the unperturbed one.
func Judgeable(c *Case) bool {
	for i, w := range c.Want {
		if !harness.Check(w, w, c.Tolerances[i]).Pass || nearlyConstant(w, c.Tolerances[i]) {
			return false
		}
	}
	seed := uint64(0x9e3779b97f4a7c15)
	if len(c.Spec.Steps) > 0 {
		seed ^= c.Spec.Steps[0].Seed
	}
	// Two random draws, and three that move neighbouring elements (and rows, and nodes) by
	// the full amount down, not at all and up, in all three phases: a random draw can leave
	// a sensitive pair almost unmoved (a layernorm row of two close values, the one row whose
	// log_softmax is 0), or move every element the same way; the cyclic ones give each
	// element each move, next to neighbours that moved otherwise.
	for _, src := range []source{randomSource(seed), randomSource(seed + 1), cyclic(0), cyclic(1), cyclic(2)} {
		got, err := perturb(c.Graph, c.Inputs, src)
		if err != nil {
			return false
		}
		for i := range got {
			if !harness.Check(got[i], c.Want[i], c.Tolerances[i]).Pass {
				return false
			}
		}
	}
	return true
}

// nearlyConstant reports whether want has two or more values that are all within tol of its
// first element: harness.Check fails any output that has one value where the reference varies,
// and a correct engine may well round such a reference's values to one.
func nearlyConstant(want *tensor.Tensor, tol harness.Tolerance) bool {
	if want.Len() < 2 || tol.Bitwise {
		return false
	}
	first := want.Float64(0)
	varies := false
	for i := 1; i < want.Len(); i++ {
		v := want.Float64(i)
		if math.IsNaN(v) != math.IsNaN(first) || (math.IsInf(v, 0) || math.IsInf(first, 0)) && v != first {
			return false
		}
		if d := math.Abs(v - first); d > tol.ATol+tol.RTol*math.Abs(v) {
			return false
		} else if d > 0 {
			varies = true
		}
	}
	return varies
}

// Perturb evaluates g on inputs like ref.Run, with every node's result moved by the noise
// model, deterministically for a seed.
func Perturb(g *graph.Graph, inputs map[string]*tensor.Tensor, seed uint64) ([]*tensor.Tensor, error) {
	return perturb(g, inputs, randomSource(seed))
}

func perturb(g *graph.Graph, inputs map[string]*tensor.Tensor, src source) ([]*tensor.Tensor, error) {
	env := map[*graph.Value]*tensor.Tensor{}
	for _, v := range g.Inputs {
		env[v] = inputs[v.Name]
	}
	loose := unroundedChains(g)
	for k, n := range g.Nodes {
		in := make([]*tensor.Tensor, len(n.Inputs))
		for i, v := range n.Inputs {
			in[i] = env[v]
		}
		ns := src.node(k)
		t, err := perturbNode(n, in, ns)
		if err != nil {
			return nil, err
		}
		if loose[n] {
			flip(t, ns)
		}
		env[n.Output] = t
	}
	outs := make([]*tensor.Tensor, len(g.Outputs))
	for i, v := range g.Outputs {
		outs[i] = env[v]
	}
	return outs, nil
}

// exactOps compute without rounding error (whatever their dtype).
// full_like rounds its float64 value once, as the golden model does; sign picks -1, 0 or +1.
var exactOps = map[string]bool{"neg": true, "abs": true, "relu": true, "maximum": true, "minimum": true, "reduce_max": true,
	"sign": true, "full_like": true}

// arithmeticOps are correctly rounded in f32, so only the second rounding of 16-bit results
// can differ.
var arithmeticOps = map[string]bool{"add": true, "sub": true, "mul": true, "div": true}

// Exact reports whether node n computes without rounding error in any correct engine.
func Exact(n *graph.Node) bool {
	k := n.Def().Kind
	return exactOps[n.Op] || k == graph.KindMovement || k == graph.KindCast || !n.Output.Type.DType.IsFloat() ||
		exactForm(n)
}

// exactForm: issue 21's forms that every correct engine computes to the same bits. A rounding
// division rounds the quotient to a fixed precision (correctly rounded) before it rounds to an
// integer; softmax of a scalar is exp(0)/exp(0) = 1 and log_softmax x - x - log 1 = 0.
func exactForm(n *graph.Node) bool {
	switch n.Op {
	case "div":
		return graph.DivRounding(n) != ""
	case "softmax", "log_softmax":
		return n.Inputs[0].Type.Rank() == 0
	}
	return false
}

func perturbNode(n *graph.Node, in []*tensor.Tensor, r source) (*tensor.Tensor, error) {
	if Exact(n) {
		return ref.Eval(n, in)
	}
	dt := n.Output.Type.DType
	if why := unmodelled(n, in); why != "" {
		return nil, errs.New(errs.Input, "noise model: %s: %s", n.Op, why)
	}
	wide := make([]*tensor.Tensor, len(in))
	for i, t := range in {
		wide[i] = toF64(t)
	}
	acc := accumOf(n)
	u := unitRoundoff(acc)
	k := float64(Terms(n))
	// Rounding errors of a K-term sum grow like sqrt(K) while they are random. An accumulator
	// narrower than f32 also stagnates on long sums (terms below half an ulp of the partial
	// sum are lost, all the same way), which is a common error of up to about K·u.
	random, systematic := 2*u*math.Sqrt(k), 0.0
	if mantissaBits(acc) < mantissaBits(numerics.F32) {
		systematic = 2 * u * k
	}
	// reach is how far (relative) the unrounded result may be from the golden model's;
	// rounded to a narrower output dtype that may land on the other side of a rounding
	// boundary, and finish does that wherever it can (see roundAway).
	reach := 2 * u
	// Below the normal range a result rounds to the subnormal spacing of the dtype it is
	// computed in, whatever its size: an absolute error that no relative one covers.
	floor := 2 * numerics.Decode(acc, 1)
	var post func(*tensor.Tensor)
	switch n.Def().Kind {
	case graph.KindUnary, graph.KindBinary:
		ulps := 2.0
		if arithmeticOps[n.Op] {
			ulps = 0.5
		}
		reach = ulps * math.Ldexp(1, -mantissaBits(computeDType(dt)))
		floor = 2 * numerics.Decode(computeDType(dt), 1)
		post = func(t *tensor.Tensor) { scaleEach(t, r, reach) }
	case graph.KindLoss:
		// A sum of squares has no cancellation: its error is relative to the result. (Moving
		// the inputs instead would swamp a loss of two nearly equal tensors, whose
		// difference the engine computes exactly.)
		post = func(t *tensor.Tensor) { scaleEach(t, r, random+systematic) }
	case graph.KindRowwise:
		if n.Op == "softmax" || n.Op == "log_softmax" {
			ax, _ := graph.NormAxis(int(n.IntAttr("axis")), len(in[0].Shape))
			towardMax(wide[0], ax, r, 2*u)
			post = func(t *tensor.Tensor) { rowNoise(t, ax, r, random+systematic, n.Op == "log_softmax") }
			break
		}
		if n.Op == "layernorm" || n.Op == "rmsnorm" {
			nm := norm{x: slices.Clone(wide[0].Float64s()), gamma: wide[1].Float64s(), eps: n.FloatAttr("eps"),
				centred: n.Op == "layernorm", rel: random + systematic, floor: float64(Terms(n)+1) * numerics.Decode(acc, 1)}
			if len(wide) > 2 {
				nm.beta = wide[2].Float64s()
			}
			post = func(t *tensor.Tensor) { nm.perturb(t, r) }
		}
		fallthrough
	default:
		for _, t := range wide {
			scaleEach(t, r, random)
			scaleAll(t, r, systematic)
		}
		if n.Op == "attention_grad" {
			fix, err := savedStats(n, in, wide, r, random)
			if err != nil {
				return nil, err
			}
			post = fix
		}
		if transform(n) {
			// A fast transform's error is normwise, not elementwise: every output is off by
			// up to about u·sqrt(K) times the norm of its input line, so an output that is 0
			// exactly (a real input's bin 0 imaginary part) comes out as rounding residue,
			// which moving the inputs cannot produce.
			abs := random * math.Sqrt(k) * 2 * maxAbs(in[0])
			post = func(t *tensor.Tensor) { shiftEach(t, r, abs) }
		}
		if n.Def().Kind == graph.KindAttention && (dt == numerics.F16 || dt == numerics.BF16) {
			// The kernel rounds the probabilities P to the storage dtype before P x V, as
			// tensor-core kernels do (golden/tolerance.go, tolAttention): one storage
			// roundoff per term of the second product.
			scaleEach(wide[2], r, 2*unitRoundoff(dt))
		}
	}
	probe := &graph.Node{Op: n.Op, Inputs: n.Inputs, Attrs: n.Attrs, Output: &graph.Value{Name: n.Output.Name}}
	out, err := ref.Eval(probe, wide)
	if err != nil {
		return nil, errs.Wrap(errs.Internal, err, "noise model")
	}
	vals := out.Float64s()
	if post != nil {
		post(out)
	}
	// A transform's zero is already moved off zero by its normwise shift (above), sign and all.
	sumZero := n.Def().Kind != graph.KindUnary && n.Def().Kind != graph.KindBinary && !transform(n)
	for i, moved := range out.Float64s() {
		vals[i] = roundAway(dt, vals[i], reach, floor, moved, sumZero, r.delta(i))
	}
	return tensor.FromFloat64(dt, n.Output.Type.Shape, vals), nil
}

// transform reports whether n is a Fourier transform (one axis or two), not one of the
// elementwise complex helpers.
func transform(n *graph.Node) bool {
	k := n.Def().Kind
	return k == graph.KindSpectral || k == graph.KindComplex && n.Op != "complex_mul" && n.Op != "conj"
}

// unmodelled says why the noise model cannot bound how far a correct engine may be from the
// golden model on node n, or returns "". Such a node makes its case unjudgeable:
//   - its accumulator could overflow where the golden model's float64 does not (an f32 sum of
//     squares of values near f32's maximum, any sum in an f16 accumulator): the engine may
//     then return Inf or NaN. The bound is deliberately crude: the largest finite input
//     magnitude, squared for products (matmul, attention scores, norms, losses), times the
//     number of terms;
//   - it is an attention whose V holds an infinity: a probability that underflows to 0 in the
//     engine's accumulator (or in its rounding to the storage dtype) but not in float64 turns
//     0·Inf into NaN where the golden model has ±Inf.
func unmodelled(n *graph.Node, in []*tensor.Tensor) string {
	kind := n.Def().Kind
	if kind == graph.KindUnary || kind == graph.KindBinary || n.Op == "softmax" || n.Op == "log_softmax" {
		return ""
	}
	var peak float64
	for _, t := range in {
		for i := range t.Len() {
			if v := math.Abs(t.Float64(i)); !math.IsInf(v, 0) && !math.IsNaN(v) {
				peak = math.Max(peak, v)
			}
		}
	}
	bound := 4 * peak * peak
	if kind == graph.KindReduce {
		bound = peak
	}
	if bound*float64(Terms(n)) > numerics.MaxFinite(accumOf(n))/2 {
		return "its accumulator may overflow"
	}
	if kind == graph.KindAttention {
		for i := range in[2].Len() {
			if math.IsInf(in[2].Float64(i), 0) {
				return "V holds an infinity"
			}
		}
	}
	if n.Op == "attention_grad" {
		// As attention's: a probability that is 0 in one and not in the other turns 0·Inf into
		// NaN.
		for _, t := range []*tensor.Tensor{in[2], in[4]} {
			for i := range t.Len() {
				if v := t.Float64(i); math.IsInf(v, 0) {
					return "V or dO holds an infinity"
				}
			}
		}
	}
	return ""
}

// Terms is the number of terms node n sums into one output element: its reduction length K
// (1 for elementwise and exact ops). Tolerances scale with the largest K upstream.
func Terms(n *graph.Node) int {
	if Exact(n) {
		return 1
	}
	in := n.Inputs[0].Type
	switch n.Def().Kind {
	case graph.KindReduce:
		axes, _ := graph.ReduceAxes(n, in.Rank())
		k := 1
		for _, a := range axes {
			k *= in.Shape[a]
		}
		return k
	case graph.KindRowwise:
		ax := in.Rank() - 1
		if n.Op == "softmax" || n.Op == "log_softmax" {
			ax, _ = graph.NormAxis(int(n.IntAttr("axis")), in.Rank())
		}
		return in.Shape[ax]
	case graph.KindMatmul:
		_, _, _, k, _ := graph.MatmulDims(n, in, n.Inputs[1].Type)
		return k
	case graph.KindAttention:
		r := in.Rank()
		return max(n.Inputs[1].Type.Shape[r-2], in.Shape[r-1])
	case graph.KindAttentionGrad:
		// attention_lse sums over keys (and D in the scores); attention_grad's dQ sums over keys,
		// dK and dV over queries, dP and rowsum(dO*O) over Dv.
		r := in.Rank()
		k := max(n.Inputs[1].Type.Shape[r-2], in.Shape[r-1])
		if len(n.Inputs) > 2 {
			k = max(k, in.Shape[r-2], n.Inputs[2].Type.Shape[r-1])
		}
		return k
	case graph.KindLoss:
		return in.NumElems()
	case graph.KindSpectral, graph.KindComplex:
		return spectralTerms(n) // templates_spectral.go
	case graph.KindConv:
		k := n.Inputs[1].Type.NumElems() / n.Inputs[1].Type.Shape[0]
		return k
	}
	return 1
}

// accumOf is the accumulator dtype of n: its accum attribute, else f64 for f64 inputs and f32
// for other floats (graph/ops.go).
func accumOf(n *graph.Node) numerics.DType {
	if n.HasAttrSet("accum") {
		return n.DTypeAttr("accum")
	}
	if n.Inputs[0].Type.DType == numerics.F64 {
		return numerics.F64
	}
	return numerics.F32
}

// computeDType is the dtype elementwise float work is done in (compiler/lower.go).
func computeDType(dt numerics.DType) numerics.DType {
	if dt == numerics.F64 {
		return dt
	}
	return numerics.F32
}

// unitRoundoff is half an ulp at 1.0.
func unitRoundoff(dt numerics.DType) float64 { return math.Ldexp(1, -mantissaBits(dt)-1) }

// unroundedChains marks the matmul and softmax of every matmul -> softmax -> matmul chain whose
// intermediates have one reader: the compiler may fuse it into attention (design.md §4),
// which keeps them in the accumulator instead of rounding them to the storage dtype.
func unroundedChains(g *graph.Graph) map[*graph.Node]bool {
	prod, users := g.Producers(), g.Users()
	sole := func(v *graph.Value) *graph.Node {
		if len(users[v]) != 1 || slices.Contains(g.Outputs, v) {
			return nil
		}
		return users[v][0]
	}
	out := map[*graph.Node]bool{}
	for _, sm := range g.Nodes {
		if sm.Op != "softmax" {
			continue
		}
		qk := prod[sm.Inputs[0]]
		pv := sole(sm.Output)
		if qk == nil || pv == nil || qk.Def().Kind != graph.KindMatmul || pv.Def().Kind != graph.KindMatmul || sole(qk.Output) != sm {
			continue
		}
		out[qk], out[sm] = true, true
	}
	return out
}

// savedStats makes the golden model's attention_grad (which recomputes P and O from q, k, v)
// compute what the fused kernel computes from its saved inputs: P' = exp(S - lse') with the
// lse' it is given, and D' = rowsum(dO*o') with the o' it is given. wide holds the node's
// inputs as the model moves them (q, k, v, o', dO, lse'), in the original ones. With
// c_i = exp(lse_i - lse'_i) (lse exact from q, k) and ΔD_i = rowsum(dO*(o' - O))_i (O exact),
// the kernel's dS_ij = c_i P_ij (dP_ij - D_i) - c_i P_ij ΔD_i. The first term is the golden
// model's with row i of dO scaled by c_i, which this applies to wide[4] now (dV = P'^T dO
// follows too); the second is linear in ΔD and is added by the returned function to the
// output: for dQ, -scale c_i ΔD_i (P K)_i (an attention with K as V); for dK,
// -scale Σ_i P_ij c_i ΔD_i Q_i (a dV with c∘ΔD∘Q as dO). dV does not read D. ΔD also takes
// the kernel's roundoff in that row sum, up to rel·rowsum(|dO*o'|), drawn from r.
func savedStats(n *graph.Node, in, wide []*tensor.Tensor, r source, rel float64) (func(*tensor.Tensor), error) {
	q, k, v, do := wide[0], wide[1], wide[2], wide[4]
	rk := len(q.Shape)
	d := q.Shape[rk-1]
	scale := 1 / math.Sqrt(float64(d))
	if n.HasAttr("scale") {
		scale = n.FloatAttr("scale")
	}
	causal := n.BoolAttr("causal")
	attrs := graph.Attrs{"causal": graph.Bool(causal), "scale": graph.Float(scale)}
	eval := func(op string, extra graph.Attrs, ts ...*tensor.Tensor) (*tensor.Tensor, error) {
		a := maps.Clone(attrs)
		maps.Copy(a, extra)
		vals := make([]*graph.Value, len(ts))
		for i, t := range ts {
			vals[i] = &graph.Value{Name: fmt.Sprintf("in%d", i), Type: graph.Type{DType: t.DType, Shape: slices.Clone(t.Shape)}}
		}
		p := &graph.Node{Op: op, Inputs: vals, Attrs: a, Output: &graph.Value{Name: n.Output.Name}}
		t, err := ref.Eval(p, ts)
		if err != nil {
			return nil, errs.Wrap(errs.Internal, err, "noise model: %s of attention_grad", op)
		}
		return t, nil
	}
	o, err := eval("attention", nil, q, k, v)
	if err != nil {
		return nil, err
	}
	lse, err := eval("attention_lse", nil, q, k)
	if err != nil {
		return nil, err
	}
	sq, dv := q.Shape[rk-2], v.Shape[rk-1]
	uo := unitRoundoff(in[3].DType)
	rowsN := tensor.NumElems(q.Shape[:rk-1]) // batch x queries
	c := make([]float64, rowsN)
	dD := make([]float64, rowsN)
	for i := range rowsN {
		c[i] = math.Exp(lse.Float64(i) - in[5].Float64(i))
		var mag, spread float64
		for j := range dv {
			e := i*dv + j
			g, og := do.Float64(e), in[3].Float64(e)
			dD[i] += g * (og - o.Float64(e))
			mag += math.Abs(g * og)
			t := g * (math.Abs(og-o.Float64(e)) + uo*math.Abs(og))
			spread += t * t
		}
		// o' is one draw of the forward's error; the engine's o has its own, of the same size
		// but other signs: the row sum may come out twice the RMS of its terms either way. And
		// the kernel's own sum rowsum(dO*o') rounds, apart from dP's (which moving dO and V
		// models): dP - D may cancel, so both count.
		dD[i] += r.delta(i) * (rel*mag + 2*math.Sqrt(spread))
	}
	for i := range rowsN {
		for j := range dv {
			do.SetFloat64(i*dv+j, do.Float64(i*dv+j)*c[i])
		}
	}
	var corr *tensor.Tensor
	switch n.StringAttr("wrt") {
	case "q":
		pk, err := eval("attention", nil, q, k, k)
		if err != nil {
			return nil, err
		}
		for i := range rowsN {
			for j := range d {
				pk.SetFloat64(i*d+j, -scale*c[i]*dD[i]*pk.Float64(i*d+j))
			}
		}
		corr = pk
	case "k":
		w := tensor.New(numerics.F64, q.Shape)
		for i := range rowsN {
			for j := range d {
				w.SetFloat64(i*d+j, -scale*c[i]*dD[i]*q.Float64(i*d+j))
			}
		}
		lead := q.Shape[:rk-2]
		zo := tensor.New(numerics.F64, q.Shape)
		zl := tensor.New(numerics.F64, append(slices.Clone(lead), sq))
		t, err := eval("attention_grad", graph.Attrs{"wrt": graph.String("v")}, q, k, k, zo, w, zl)
		if err != nil {
			return nil, err
		}
		corr = t
	}
	return func(out *tensor.Tensor) {
		if corr == nil {
			return
		}
		for i := range out.Len() {
			out.SetFloat64(i, out.Float64(i)+corr.Float64(i))
		}
	}, nil
}
