package graph

import (
	"fmt"
	"math"
	"slices"

	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

// Ops that reverse mode needs besides the forward set: a constant of a value's shape, sign and
// erf for the derivatives of abs/relu/max and gelu, and attention's saved statistics and fused
// backward. They are ordinary ops: every backend runs them and users may write them.
func init() {
	register(&OpDef{Name: "full_like", Kind: KindUnary, MinArgs: 1, MaxArgs: 1, DTypes: numeric, Infer: fullLikeInfer,
		Attrs: []AttrSpec{{Name: "value", Kind: AttrFloat, Doc: "the constant, rounded to the dtype as cast rounds"}},
		Doc:   "a tensor of x's shape and dtype whose every element is value (x is read for its type only)"})
	register(&OpDef{Name: "sign", Kind: KindUnary, MinArgs: 1, MaxArgs: 1, DTypes: numeric, Infer: same,
		Doc: "-1, 0 or +1; sign(±0) = +0, sign(NaN) = NaN"})
	register(&OpDef{Name: "erf", Kind: KindUnary, MinArgs: 1, MaxArgs: 1, DTypes: floats, Infer: same,
		Doc: "the error function"})

	attnAttrs := []AttrSpec{
		{Name: "causal", Kind: AttrBool, Default: dflt(Bool(false)), Doc: "mask key j > query i (top-left aligned, as torch)"},
		{Name: "scale", Kind: AttrFloat, Optional: true, Doc: "score scale; absent: 1/sqrt(D)"},
		accumSpec,
	}
	register(&OpDef{Name: "attention_lse", Kind: KindAttentionGrad, MinArgs: 2, MaxArgs: 2, DTypes: floats, Attrs: attnAttrs,
		Infer: attentionLSEInfer,
		Doc:   "log-sum-exp over keys of the scaled, masked scores q k^T: q[...,Sq,D], k[...,Sk,D] -> [...,Sq] in the accumulator dtype"})
	// fp8 attention differentiates through bf16 (attentionVJP): a gradient computed in fp8
	// would round dS and dP at 2-3 bits.
	register(&OpDef{Name: "attention_grad", Kind: KindAttentionGrad, MinArgs: 6, MaxArgs: 6, DTypes: gradFloats, SharedDTypeArgs: 5,
		Attrs: append(slices.Clone(attnAttrs), AttrSpec{Name: "wrt", Kind: AttrString, Values: []string{"q", "k", "v"}, Doc: `"q", "k" or "v": the input whose gradient this node computes`}),
		Infer: attentionGradInfer,
		Doc:   "gradient of attention(q,k,v) for output gradient do: inputs q, k, v, o (the forward output), do, lse (attention_lse); one fused kernel per wrt"})
}

// gradFloats are the dtypes attention's backward computes in.
var gradFloats = []numerics.DType{numerics.F64, numerics.F32, numerics.F16, numerics.BF16}

func fullLikeInfer(n *Node, in []Type) (Type, error) {
	if v := n.FloatAttr("value"); math.IsNaN(v) && !in[0].DType.IsFloat() {
		return Type{}, fmt.Errorf("value NaN has no %s encoding", in[0].DType)
	}
	return same(n, in)
}

// lseDType is the dtype attention_lse stores: the accumulator's, at least f32, so that
// exp(s - lse) in the backward keeps the forward's precision.
func lseDType(n *Node, q numerics.DType) numerics.DType {
	if n.HasAttrSet("accum") {
		return n.DTypeAttr("accum")
	}
	if q == numerics.F64 {
		return numerics.F64
	}
	return numerics.F32
}

func attentionLSEInfer(n *Node, in []Type) (Type, error) {
	q, k := in[0], in[1]
	r := q.Rank()
	if r < 2 || k.Rank() != r {
		return Type{}, fmt.Errorf("q and k need one rank >= 2")
	}
	if !slices.Equal(q.Shape[:r-2], k.Shape[:r-2]) {
		return Type{}, fmt.Errorf("leading dims differ")
	}
	if q.Shape[r-1] != k.Shape[r-1] {
		return Type{}, fmt.Errorf("head dim of q (%d) and k (%d) differ", q.Shape[r-1], k.Shape[r-1])
	}
	if err := checkHeadDim(q); err != nil {
		return Type{}, err
	}
	if err := checkAccum(n, q.DType); err != nil {
		return Type{}, err
	}
	return Type{DType: lseDType(n, q.DType), Shape: slices.Clone(q.Shape[:r-1])}, nil
}

func attentionGradInfer(n *Node, in []Type) (Type, error) {
	out, err := attentionInfer(n, in[:3])
	if err != nil {
		return Type{}, err
	}
	if !in[3].Equal(out) || !in[4].Equal(out) {
		return Type{}, fmt.Errorf("o %s and do %s must be the attention output's type %s", in[3], in[4], out)
	}
	lse, err := attentionLSEInfer(n, in[:2])
	if err != nil {
		return Type{}, err
	}
	if !in[5].Equal(lse) {
		return Type{}, fmt.Errorf("lse %s must be %s (attention_lse of q, k)", in[5], lse)
	}
	if i := slices.Index([]string{"q", "k", "v"}, n.StringAttr("wrt")); i >= 0 {
		return Type{DType: in[i].DType, Shape: slices.Clone(in[i].Shape)}, nil
	}
	return Type{}, fmt.Errorf(`wrt %q: want "q", "k" or "v"`, n.StringAttr("wrt"))
}
