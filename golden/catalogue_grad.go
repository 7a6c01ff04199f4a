package golden

import (
	"fmt"

	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/harness"
)

// The ops autodiff emits: sign and erf as unary ops, full_like's constant, and attention's
// saved log-sum-exp and fused backward. An attention_grad case computes o and lse inside the
// graph from its q, k, v (so they are the forward's), with do an input.
func init() {
	register(unaryFamily, "sign", "erf")
	register(fullLikeFamily, "full_like")
	register(attentionGradFamily, "attention_lse", "attention_grad")
}

func fullLikeFamily(op string, dt numerics.DType) []Spec {
	d := harness.DefaultDist(dt)
	// A constant alone is refused as a reference (an all-equal output proves nothing), so each
	// case combines it with x. The values round as cast rounds: 0.3 and -2.7 are exact in no
	// float format (-2.7 becomes -2.75 in e4m3, -2.5 in e5m2); for ints -3 is exact, 300.7
	// truncates to 300 in int32 and saturates to 127 in int8.
	mk := func(tag, combine string, v float64, shape ...int) draft {
		return draft{tag: tag, dists: dists("x", d), tol: tolDefault, build: func(b *graph.Builder) *graph.Value {
			x := b.Input("x", dt, shape...)
			return b.Op(combine, nil, x, b.Op(op, graph.Attrs{"value": graph.Float(v)}, x))
		}}
	}
	v1, v2 := 0.3, -2.7
	if dt.IsInt() {
		v1, v2 = -3, 300.7
	}
	if dt == numerics.F8E4M3 || dt == numerics.F8E5M2 {
		// The oracles compute fp8 in f32 and round only a graph's outputs, so an fp8 value in
		// the middle has no reference there: fp8 keeps single-node cases of one element (a
		// constant of one element is not "constant" to Meaningful).
		alone := func(tag string, v float64, shape ...int) draft {
			return draft{tag: tag, dists: dists("x", d), tol: tolDefault, build: func(b *graph.Builder) *graph.Value {
				return b.Op(op, graph.Attrs{"value": graph.Float(v)}, b.Input("x", dt, shape...))
			}}
		}
		return finish(op, dt, alone("1", v1, 1), alone("1x1x1", v2, 1, 1, 1))
	}
	return finish(op, dt, mk("7x13-plus-x", "add", v1, 7, 13), mk("1031-times-x", "mul", v2, 1031))
}

func attentionGradFamily(op string, dt numerics.DType) []Spec {
	mk := func(batch, sq, sk, d int, causal bool, wrt string) draft {
		tag := fmt.Sprintf("%dx%dx%dx%d", batch, sq, sk, d)
		if causal {
			tag += "-causal"
		}
		if wrt != "" {
			tag += "-" + wrt
		}
		ds := dists("q", distNormal, "k", distNormal)
		if op == "attention_grad" {
			ds = dists("q", distNormal, "k", distNormal, "v", distNormal, "do", distNormal)
		}
		return draft{tag: tag, dists: ds, tol: tolAttention(max(sq, sk)), build: func(b *graph.Builder) *graph.Value {
			at := graph.Attrs{"causal": graph.Bool(causal)}
			q, k := b.Input("q", dt, batch, sq, d), b.Input("k", dt, batch, sk, d)
			if op == "attention_lse" {
				return b.Op(op, at, q, k)
			}
			v, do := b.Input("v", dt, batch, sk, d), b.Input("do", dt, batch, sq, d)
			o := b.Op("attention", at, q, k, v)
			lse := b.Op("attention_lse", at, q, k)
			ga := graph.Attrs{"causal": graph.Bool(causal), "wrt": graph.String(wrt)}
			return b.Op(op, ga, q, k, v, o, do, lse)
		}}
	}
	if op == "attention_lse" {
		return finish(op, dt, mk(2, 37, 45, 8, false, ""), mk(1, 67, 67, 16, true, ""))
	}
	return finish(op, dt, mk(2, 13, 19, 8, false, "q"), mk(2, 13, 19, 8, true, "k"), mk(1, 19, 13, 8, true, "v"))
}
