package graph

import (
	"fmt"
	"slices"

	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/failpoint"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

// The op set. Semantics every layer (ref, compiler, backends) must agree on:
//   - Float ops compute on decoded values and round the result to the output dtype once.
//     16- and 8-bit float inputs are computed in f32 by the engine, f64 by the golden model.
//   - Integer arithmetic wraps (two's complement) at the dtype's width.
//   - Binary ops broadcast numpy-style; inputs must share one dtype (no implicit promotion).
//   - Accumulating ops (matmul, reductions, norms, softmax, attention, mse_loss) accumulate
//     in attribute `accum` when given, else f64 for f64 inputs, int64 for ints, f32 otherwise.
var (
	floats   = numerics.Floats
	numeric  = append(slices.Clone(numerics.Floats), numerics.Ints...)
	anyDType = numerics.All
)

func dflt(a Attr) *Attr { return &a }

var accumSpec = AttrSpec{Name: "accum", Kind: AttrDType, Optional: true, Doc: "accumulator dtype"}

func init() {
	for _, u := range []struct {
		name   string
		dtypes []numerics.DType
		doc    string
	}{
		{"neg", numeric, "-x"},
		{"abs", numeric, "|x|"},
		{"relu", numeric, "max(x, 0); NaN stays NaN"},
		{"exp", floats, "e^x"},
		{"log", floats, "natural log; log(0) = -Inf, log(<0) = NaN"},
		{"sqrt", floats, "square root"},
		{"rsqrt", floats, "1/sqrt(x)"},
		{"tanh", floats, "hyperbolic tangent"},
		{"sigmoid", floats, "1/(1+e^-x)"},
		{"silu", floats, "x*sigmoid(x)"},
	} {
		register(&OpDef{Name: u.name, Kind: KindUnary, MinArgs: 1, MaxArgs: 1, DTypes: u.dtypes, Infer: same, Doc: u.doc})
	}
	register(&OpDef{Name: "gelu", Kind: KindUnary, MinArgs: 1, MaxArgs: 1, DTypes: floats, Infer: same,
		Attrs: []AttrSpec{{Name: "approx", Kind: AttrString, Default: dflt(String("erf")), Doc: `"erf" (exact) or "tanh"`,
			Values: []string{"erf", "tanh"}, Aliases: map[string]string{"none": "erf"}}}, // torch: approximate="none"
		Doc: "x*Phi(x); approx=tanh: 0.5x(1+tanh(sqrt(2/pi)(x+0.044715x^3)))"})

	for _, b := range []struct {
		name   string
		dtypes []numerics.DType
		doc    string
	}{
		{"add", numeric, "a+b"}, {"sub", numeric, "a-b"}, {"mul", numeric, "a*b"},
		{"maximum", numeric, "max(a,b); NaN if either is NaN"},
		{"minimum", numeric, "min(a,b); NaN if either is NaN"},
	} {
		register(&OpDef{Name: b.name, Kind: KindBinary, MinArgs: 2, MaxArgs: 2, DTypes: b.dtypes, Infer: broadcastInfer, Doc: b.doc})
	}
	register(&OpDef{Name: "div", Kind: KindBinary, MinArgs: 2, MaxArgs: 2, DTypes: numeric, Infer: divInfer,
		Attrs: []AttrSpec{{Name: "rounding_mode", Kind: AttrString, Optional: true,
			Doc:    `absent: true division (floats only); "trunc": toward zero; "floor": toward -Inf (torch.div's rounding_mode)`,
			Values: DivRoundingModes}},
		Doc: "a/b (IEEE: x/0 = ±Inf, 0/0 = NaN); rounding_mode trunc/floor also for ints (x/0 = 0 for ints)"})

	register(&OpDef{Name: "cast", Kind: KindCast, MinArgs: 1, MaxArgs: 1, DTypes: anyDType,
		Attrs: []AttrSpec{{Name: "to", Kind: AttrDType, Doc: "target dtype"}},
		Infer: func(n *Node, in []Type) (Type, error) {
			return Type{DType: n.DTypeAttr("to"), Shape: slices.Clone(in[0].Shape)}, validDType(n.DTypeAttr("to"))
		},
		Doc: "convert: float->float RNE (fp8 saturates), float->int truncates and saturates (NaN->0), int->int wraps, x->bool is x!=0"})

	for _, r := range []struct {
		name   string
		dtypes []numerics.DType
		doc    string
	}{
		{"reduce_sum", numeric, "sum over axes, in increasing index order"},
		{"reduce_max", numeric, "max over axes; NaN if any is NaN"},
		{"reduce_mean", floats, "sum/count over axes"},
	} {
		register(&OpDef{Name: r.name, Kind: KindReduce, MinArgs: 1, MaxArgs: 1, DTypes: r.dtypes, Infer: reduceInfer, Doc: r.doc,
			Attrs: []AttrSpec{
				{Name: "axes", Kind: AttrInts, Optional: true, Doc: "axes to reduce (negative counts from the end); absent: all"},
				{Name: "keepdims", Kind: AttrBool, Default: dflt(Bool(false))},
				accumSpec,
			}})
	}

	axisSpec := AttrSpec{Name: "axis", Kind: AttrInt, Default: dflt(Int(-1))}
	register(&OpDef{Name: "softmax", Kind: KindRowwise, MinArgs: 1, MaxArgs: 1, DTypes: floats, Infer: axisInfer,
		Attrs: []AttrSpec{axisSpec, accumSpec}, Doc: "exp(x-max)/sum(exp(x-max)) along axis; a row of all -Inf gives NaN"})
	register(&OpDef{Name: "log_softmax", Kind: KindRowwise, MinArgs: 1, MaxArgs: 1, DTypes: floats, Infer: axisInfer,
		Attrs: []AttrSpec{axisSpec, accumSpec}, Doc: "x-max-log(sum(exp(x-max))) along axis"})
	register(&OpDef{Name: "layernorm", Kind: KindRowwise, MinArgs: 3, MaxArgs: 3, DTypes: floats, Infer: normInfer,
		Attrs: []AttrSpec{{Name: "eps", Kind: AttrFloat, Default: dflt(Float(1e-5))}, accumSpec},
		Doc:   "(x-mean)/sqrt(var+eps)*gamma+beta over the last axis (biased variance); inputs x, gamma[last], beta[last]"})
	register(&OpDef{Name: "rmsnorm", Kind: KindRowwise, MinArgs: 2, MaxArgs: 2, DTypes: floats, Infer: normInfer,
		Attrs: []AttrSpec{{Name: "eps", Kind: AttrFloat, Default: dflt(Float(1e-6))}, accumSpec},
		Doc:   "x/sqrt(mean(x^2)+eps)*gamma over the last axis; inputs x, gamma[last]"})

	mmAttrs := []AttrSpec{
		{Name: "transpose_a", Kind: AttrBool, Default: dflt(Bool(false))},
		{Name: "transpose_b", Kind: AttrBool, Default: dflt(Bool(false))},
		{Name: "tile", Kind: AttrInts, Optional: true, Doc: "tile-shape hint [BM,BN,BK]"},
		accumSpec,
	}
	register(&OpDef{Name: "matmul", Kind: KindMatmul, MinArgs: 2, MaxArgs: 2, DTypes: numeric, Attrs: mmAttrs,
		Infer: func(n *Node, in []Type) (Type, error) { return matmulInfer(n, in, 2) },
		Doc:   "[M,K]x[K,N] -> [M,N] (transpose flags apply to the operands first)"})
	register(&OpDef{Name: "batch_matmul", Kind: KindMatmul, MinArgs: 2, MaxArgs: 2, DTypes: numeric, Attrs: mmAttrs,
		Infer: func(n *Node, in []Type) (Type, error) { return matmulInfer(n, in, 3) },
		Doc:   "[B,M,K]x[B,K,N] -> [B,M,N]"})
	register(&OpDef{Name: "scaled_matmul", Kind: KindMatmul, MinArgs: 4, MaxArgs: 4, DTypes: []numerics.DType{numerics.F8E4M3},
		SharedDTypeArgs: 2, Infer: scaledMatmulInfer,
		Attrs: []AttrSpec{
			{Name: "out_dtype", Kind: AttrDType, Default: dflt(DTypeAttr(numerics.BF16)), Doc: "bf16, f16 or f32"},
			{Name: "tile", Kind: AttrInts, Optional: true, Doc: "tile-shape hint [BM,BN,BK]"},
		},
		Doc: "torch._scaled_mm: (a x b^T) * scale_a * scale_b with f32 accumulation, rounded once to out_dtype; " +
			"a[M,K] and b[N,K] fp8 e4m3 (b stored as torch's column-major [K,N] operand is), scale_a and scale_b f32 scalars ([] or [1])"})

	register(&OpDef{Name: "attention", Kind: KindAttention, MinArgs: 3, MaxArgs: 3, DTypes: floats, Infer: attentionInfer,
		Attrs: []AttrSpec{
			{Name: "causal", Kind: AttrBool, Default: dflt(Bool(false)), Doc: "mask key j > query i (top-left aligned, as torch)"},
			{Name: "scale", Kind: AttrFloat, Optional: true, Doc: "score scale; absent: 1/sqrt(D)"},
			accumSpec,
		},
		Doc: "softmax(q k^T * scale [+ causal mask]) v; q[...,Sq,D], k[...,Sk,D], v[...,Sk,Dv] -> [...,Sq,Dv]"})

	register(&OpDef{Name: "transpose", Kind: KindMovement, MinArgs: 1, MaxArgs: 1, DTypes: anyDType, Infer: transposeInfer,
		Attrs: []AttrSpec{{Name: "perm", Kind: AttrInts, Doc: "output axis i is input axis perm[i]"}}, Doc: "permute axes"})
	register(&OpDef{Name: "reshape", Kind: KindMovement, MinArgs: 1, MaxArgs: 1, DTypes: anyDType, Infer: reshapeInfer,
		Attrs: []AttrSpec{{Name: "shape", Kind: AttrInts, Doc: "new shape; one dim may be -1"}}, Doc: "same elements, new shape (row-major)"})
	register(&OpDef{Name: "slice", Kind: KindMovement, MinArgs: 1, MaxArgs: 1, DTypes: anyDType, Infer: sliceInfer,
		Attrs: []AttrSpec{{Name: "starts", Kind: AttrInts}, {Name: "ends", Kind: AttrInts}},
		Doc:   "x[starts[i]:ends[i]] per axis, 0 <= start <= end <= dim (start = end: an empty axis, as torch)"})
	register(&OpDef{Name: "concat", Kind: KindMovement, MinArgs: 1, MaxArgs: -1, DTypes: anyDType, Infer: concatInfer,
		Attrs: []AttrSpec{{Name: "axis", Kind: AttrInt}}, Doc: "join along axis; other dims equal"})

	register(&OpDef{Name: "mse_loss", Kind: KindLoss, MinArgs: 2, MaxArgs: 2, DTypes: floats,
		Attrs: []AttrSpec{{Name: "reduction", Kind: AttrString, Default: dflt(String("mean")), Values: MSEReductions,
			Doc: `"mean" (a scalar), "sum" (a scalar) or "none" ((a-b)^2 per element, a's shape), as F.mse_loss`}, accumSpec},
		Infer: func(n *Node, in []Type) (Type, error) {
			if !slices.Equal(in[0].Shape, in[1].Shape) {
				return Type{}, fmt.Errorf("shapes differ")
			}
			if err := checkAccum(n, in[0].DType); err != nil {
				return Type{}, err
			}
			if n.StringAttr("reduction") == "none" {
				return same(n, in)
			}
			return Type{DType: in[0].DType}, nil
		},
		Doc: "mean((a-b)^2) over all elements -> scalar; reduction=sum: the sum; reduction=none: (a-b)^2 elementwise"})
}

func validDType(d numerics.DType) error {
	if !d.Valid() {
		return errs.New(errs.DType, "invalid dtype")
	}
	return nil
}

func same(_ *Node, in []Type) (Type, error) {
	return Type{DType: in[0].DType, Shape: slices.Clone(in[0].Shape)}, nil
}

// Broadcast returns the numpy broadcast of two shapes.
func Broadcast(a, b []int) ([]int, error) {
	n := max(len(a), len(b))
	out := make([]int, n)
	for i := range n {
		da, db := dimFromEnd(a, n-1-i), dimFromEnd(b, n-1-i)
		switch {
		case da == db || db == 1:
			out[i] = da
		case da == 1:
			out[i] = db
		default:
			return nil, fmt.Errorf("shapes %v and %v do not broadcast (axis %d: %d vs %d)", a, b, i, da, db)
		}
	}
	return out, nil
}

func dimFromEnd(s []int, k int) int {
	if k < len(s) {
		return s[len(s)-1-k]
	}
	return 1
}

func broadcastInfer(_ *Node, in []Type) (Type, error) {
	s, err := Broadcast(in[0].Shape, in[1].Shape)
	return Type{DType: in[0].DType, Shape: s}, err
}

// DivRoundingModes are the values of div's rounding_mode (torch.div's; absent is true division).
var DivRoundingModes = []string{"trunc", "floor"}

// MSEReductions are the values of mse_loss's reduction (F.mse_loss's).
var MSEReductions = []string{"mean", "sum", "none"}

// DivRounding is the node's rounding mode: "" (true division), "trunc" or "floor".
func DivRounding(n *Node) string {
	if !n.HasAttrSet("rounding_mode") {
		return ""
	}
	return n.StringAttr("rounding_mode")
}

// divInfer: true division of integers would need a float result (torch promotes), and this op
// set has no implicit promotion, so integer inputs need a rounding mode.
func divInfer(n *Node, in []Type) (Type, error) {
	if in[0].DType.IsInt() && DivRounding(n) == "" {
		return Type{}, errs.New(errs.DType, "%s inputs need rounding_mode=\"trunc\" or \"floor\" (true division of integers is a float; cast first)", in[0].DType)
	}
	return broadcastInfer(n, in)
}

// NormAxis maps a possibly negative axis into [0, rank).
func NormAxis(axis, rank int) (int, error) {
	if axis < 0 {
		axis += rank
	}
	if axis < 0 || axis >= rank {
		return 0, fmt.Errorf("axis out of range for rank %d", rank)
	}
	return axis, nil
}

// NormDim is NormAxis for the ops where torch reads a scalar as one axis of one element
// (reductions, softmax, log_softmax: torch.sum(s, dim=0) and dim=-1 are fine, dim=1 is an
// IndexError). A scalar's only dim is 0; every other rank is NormAxis.
func NormDim(axis, rank int) (int, error) {
	if rank == 0 {
		if axis != 0 && axis != -1 {
			return 0, fmt.Errorf("axis %d out of range for a scalar (rank 0 takes axis 0 or -1)", axis)
		}
		return 0, nil
	}
	return NormAxis(axis, rank)
}

// ReduceAxes returns the node's reduced axes, normalized, sorted and unique. Absent and [] both
// mean every axis (torch.sum(x, dim=[]) reduces all). On a scalar the named dims (0 or -1)
// give no axis to fold: the one element is the result, with or without keepdims, as torch.
func ReduceAxes(n *Node, rank int) ([]int, error) {
	raw := n.IntsAttr("axes")
	if len(raw) == 0 {
		out := make([]int, rank)
		for i := range out {
			out[i] = i
		}
		return out, nil
	}
	var out []int
	seen := map[int]bool{}
	for _, a := range raw {
		ax, err := NormDim(a, rank)
		if err != nil {
			return nil, fmt.Errorf("axes %v: %w", raw, err)
		}
		if seen[ax] {
			return nil, fmt.Errorf("axes %v: axis %d repeated", raw, ax)
		}
		seen[ax] = true
		if rank > 0 {
			out = append(out, ax)
		}
	}
	slices.Sort(out)
	if out == nil {
		out = []int{}
	}
	return out, nil
}

func reduceInfer(n *Node, in []Type) (Type, error) {
	axes, err := ReduceAxes(n, in[0].Rank())
	if err != nil {
		return Type{}, err
	}
	if err := checkAccum(n, in[0].DType); err != nil {
		return Type{}, err
	}
	if err := checkIdentity(n, in[0].Shape, axes); err != nil {
		return Type{}, err
	}
	var s []int
	for i, d := range in[0].Shape {
		switch {
		case !slices.Contains(axes, i):
			s = append(s, d)
		case n.BoolAttr("keepdims"):
			s = append(s, 1)
		}
	}
	return Type{DType: in[0].DType, Shape: s}, nil
}

// checkIdentity refuses a reduction without an identity (max) over an empty axis, as torch
// does: sum over nothing is 0 and mean is 0/0 = NaN, but max over nothing has no value. An
// empty axis that is not reduced is fine (max over [0,3] along axis 1 is [0]).
func checkIdentity(n *Node, shape, axes []int) error {
	if n.Op != "reduce_max" {
		return nil
	}
	for _, ax := range axes {
		if shape[ax] == 0 {
			return fmt.Errorf("reduction over axis %d of size 0 in %v: max has no identity (torch: Expected reduction dim %d to have non-zero size)", ax, shape, ax)
		}
	}
	return nil
}

func checkAccum(n *Node, dt numerics.DType) error {
	if a, ok := n.Attrs["accum"]; ok {
		if dt.IsFloat() != a.DType.IsFloat() || !a.DType.Valid() || a.DType == numerics.Bool {
			return fmt.Errorf("accum %s does not fit %s inputs", a.DType, dt)
		}
	}
	return nil
}

// axisInfer: softmax and log_softmax. A scalar is a row of one element (torch accepts dim 0
// and -1 on it), so softmax gives 1 and log_softmax 0 there (NaN for ±Inf and NaN).
func axisInfer(n *Node, in []Type) (Type, error) {
	if _, err := NormDim(int(n.IntAttr("axis")), in[0].Rank()); err != nil && !failpoint.Enabled(failpoint.GraphAxisRangeUnchecked) {
		return Type{}, fmt.Errorf("axis %d: %w", n.IntAttr("axis"), err)
	}
	return same(n, in)
}

func normInfer(n *Node, in []Type) (Type, error) {
	x := in[0]
	if x.Rank() == 0 {
		return Type{}, fmt.Errorf("needs rank >= 1")
	}
	last := x.Shape[x.Rank()-1]
	for _, p := range in[1:] {
		if len(p.Shape) != 1 || p.Shape[0] != last {
			return Type{}, fmt.Errorf("scale/shift must be [%d], got %v", last, p.Shape)
		}
	}
	if e := n.FloatAttr("eps"); !(e >= 0) {
		return Type{}, fmt.Errorf("eps must be >= 0, got %g", e)
	}
	return same(n, in)
}

// MatmulDims returns batch, M, N, K for a (batch_)matmul node's input types.
func MatmulDims(n *Node, a, b Type) (batch, m, nn, k int, err error) {
	r := a.Rank()
	if r != b.Rank() || (r != 2 && r != 3) {
		return 0, 0, 0, 0, fmt.Errorf("operand ranks %d and %d", a.Rank(), b.Rank())
	}
	batch = 1
	if r == 3 {
		if a.Shape[0] != b.Shape[0] {
			return 0, 0, 0, 0, fmt.Errorf("batch dims differ: %d vs %d", a.Shape[0], b.Shape[0])
		}
		batch = a.Shape[0]
	}
	m, k = a.Shape[r-2], a.Shape[r-1]
	if n.BoolAttr("transpose_a") {
		m, k = k, m
	}
	kb, nn := b.Shape[r-2], b.Shape[r-1]
	if n.BoolAttr("transpose_b") || n.Op == "scaled_matmul" { // scaled_matmul's b is always [N,K]
		kb, nn = nn, kb
	}
	if k != kb && !failpoint.Enabled(failpoint.GraphMatmulInnerUnchecked) {
		return 0, 0, 0, 0, fmt.Errorf("inner dims differ: K=%d vs %d", k, kb)
	}
	return batch, m, nn, k, nil
}

func matmulInfer(n *Node, in []Type, rank int) (Type, error) {
	if in[0].Rank() != rank || in[1].Rank() != rank {
		return Type{}, fmt.Errorf("%s needs rank-%d operands", n.Op, rank)
	}
	batch, m, nn, _, err := MatmulDims(n, in[0], in[1])
	if err != nil {
		return Type{}, err
	}
	if t := n.IntsAttr("tile"); t != nil && (len(t) != 3 || t[0] < 1 || t[1] < 1 || t[2] < 1) {
		return Type{}, fmt.Errorf("tile hint must be 3 positive ints [BM,BN,BK], got %v", t)
	}
	if err := checkAccum(n, in[0].DType); err != nil {
		return Type{}, err
	}
	s := []int{m, nn}
	if rank == 3 {
		s = []int{batch, m, nn}
	}
	return Type{DType: in[0].DType, Shape: s}, nil
}

// ScaledMatmulOuts are the output dtypes scaled_matmul may round to.
var ScaledMatmulOuts = []numerics.DType{numerics.BF16, numerics.F16, numerics.F32}

// scaledMatmulInfer: a [M,K], b [N,K] (K-major, the layout fp8 tensor cores read), two f32
// scalar scales. The operand dtypes were checked by the declaration (SharedDTypeArgs 2).
func scaledMatmulInfer(n *Node, in []Type) (Type, error) {
	a, b := in[0], in[1]
	if a.Rank() != 2 || b.Rank() != 2 {
		return Type{}, fmt.Errorf("scaled_matmul needs rank-2 a [M,K] and b [N,K]")
	}
	if a.Shape[1] != b.Shape[1] {
		return Type{}, fmt.Errorf("inner dims differ: a is [M,K=%d], b is [N,K=%d]", a.Shape[1], b.Shape[1])
	}
	for i, s := range in[2:] {
		if s.DType != numerics.F32 || s.NumElems() != 1 || s.Rank() > 1 {
			return Type{}, errs.New(errs.DType, "%s must be an f32 scalar ([] or [1]), got %s", []string{"scale_a", "scale_b"}[i], s)
		}
	}
	if t := n.IntsAttr("tile"); t != nil && (len(t) != 3 || t[0] < 1 || t[1] < 1 || t[2] < 1) {
		return Type{}, fmt.Errorf("tile hint must be 3 positive ints [BM,BN,BK], got %v", t)
	}
	out := n.DTypeAttr("out_dtype")
	if !slices.Contains(ScaledMatmulOuts, out) {
		return Type{}, errs.New(errs.DType, "out_dtype %s: want one of %v", out, ScaledMatmulOuts)
	}
	return Type{DType: out, Shape: []int{a.Shape[0], b.Shape[0]}}, nil
}

func attentionInfer(n *Node, in []Type) (Type, error) {
	q, k, v := in[0], in[1], in[2]
	r := q.Rank()
	if r < 2 || k.Rank() != r || v.Rank() != r {
		return Type{}, fmt.Errorf("q, k, v need one rank >= 2")
	}
	if !slices.Equal(q.Shape[:r-2], k.Shape[:r-2]) || !slices.Equal(q.Shape[:r-2], v.Shape[:r-2]) {
		return Type{}, fmt.Errorf("leading dims differ")
	}
	if q.Shape[r-1] != k.Shape[r-1] {
		return Type{}, fmt.Errorf("head dim of q (%d) and k (%d) differ", q.Shape[r-1], k.Shape[r-1])
	}
	if err := checkHeadDim(q); err != nil {
		return Type{}, err
	}
	if k.Shape[r-2] != v.Shape[r-2] {
		return Type{}, fmt.Errorf("k and v sequence lengths differ")
	}
	if err := checkAccum(n, q.DType); err != nil {
		return Type{}, err
	}
	s := slices.Clone(q.Shape)
	s[r-1] = v.Shape[r-1]
	return Type{DType: q.DType, Shape: s}, nil
}

// checkHeadDim refuses a head dim of 0. Empty batches, no queries and no keys are fine, but
// with D = 0 every score is an empty dot product times 1/sqrt(0) = Inf, which torch 1.13's
// composition makes NaN and torch 2's SDPA (scaling q and k by sqrt(scale) first) makes a
// uniform softmax: there is no one PyTorch answer to match.
func checkHeadDim(q Type) error {
	if d := q.Shape[q.Rank()-1]; d == 0 {
		return fmt.Errorf("head dim D = 0 in q %s: attention over empty q/k vectors has no agreed value (the scale 1/sqrt(D) is infinite)", q)
	}
	return nil
}

func transposeInfer(n *Node, in []Type) (Type, error) {
	perm := n.IntsAttr("perm")
	r := in[0].Rank()
	if len(perm) != r {
		return Type{}, fmt.Errorf("perm %v has %d entries for rank %d", perm, len(perm), r)
	}
	s := make([]int, r)
	seen := make([]bool, r)
	for i, p := range perm {
		if p < 0 || p >= r || seen[p] {
			return Type{}, fmt.Errorf("perm %v is not a permutation", perm)
		}
		seen[p] = true
		s[i] = in[0].Shape[p]
	}
	return Type{DType: in[0].DType, Shape: s}, nil
}

func reshapeInfer(n *Node, in []Type) (Type, error) {
	want := n.IntsAttr("shape")
	s := slices.Clone(want)
	prod, hole := 1, -1
	bound := 1 // product with zeros counted as 1, the bound CheckType applies
	for i, d := range s {
		switch {
		case d == -1 && hole < 0:
			hole = i
		case d < 0:
			return Type{}, fmt.Errorf("reshape to %v: dims must be >= 0 (one may be -1)", want)
		case d > MaxElements || bound > MaxElements/max(d, 1):
			return Type{}, fmt.Errorf("reshape to %v: more than %d elements", want, MaxElements)
		default:
			prod *= d
			bound *= max(d, 1)
		}
	}
	total := in[0].NumElems()
	if hole >= 0 {
		if prod == 0 {
			// torch: "the unspecified dimension size -1 can be any value and is ambiguous".
			return Type{}, fmt.Errorf("reshape %v to %v: -1 is ambiguous next to a 0 dim", in[0].Shape, want)
		}
		if total%prod != 0 {
			return Type{}, fmt.Errorf("reshape %v to %v: %d elements", in[0].Shape, want, total)
		}
		s[hole] = total / prod
		prod = total
	}
	if prod != total {
		return Type{}, fmt.Errorf("reshape %v (%d elements) to %v (%d)", in[0].Shape, total, want, prod)
	}
	return Type{DType: in[0].DType, Shape: s}, nil
}

func sliceInfer(n *Node, in []Type) (Type, error) {
	st, en := n.IntsAttr("starts"), n.IntsAttr("ends")
	r := in[0].Rank()
	if len(st) != r || len(en) != r {
		return Type{}, fmt.Errorf("starts %v / ends %v need %d entries", st, en, r)
	}
	s := make([]int, r)
	for i := range r {
		if st[i] < 0 || st[i] > en[i] || (en[i] > in[0].Shape[i] && !failpoint.Enabled(failpoint.GraphSliceEndUnchecked)) {
			return Type{}, fmt.Errorf("axis %d: [%d:%d] outside 0..%d or reversed", i, st[i], en[i], in[0].Shape[i])
		}
		s[i] = en[i] - st[i]
	}
	return Type{DType: in[0].DType, Shape: s}, nil
}

func concatInfer(n *Node, in []Type) (Type, error) {
	r := in[0].Rank()
	ax, err := NormAxis(int(n.IntAttr("axis")), r)
	if err != nil {
		return Type{}, fmt.Errorf("axis %d: %w", n.IntAttr("axis"), err)
	}
	s := slices.Clone(in[0].Shape)
	for i, t := range in[1:] {
		if t.Rank() != r {
			return Type{}, fmt.Errorf("input %d has rank %d, want %d", i+1, t.Rank(), r)
		}
		for d := range r {
			if d != ax && t.Shape[d] != s[d] {
				return Type{}, fmt.Errorf("input %d: dim %d is %d, want %d", i+1, d, t.Shape[d], s[d])
			}
		}
		s[ax] += t.Shape[ax]
	}
	return Type{DType: in[0].DType, Shape: s}, nil
}
