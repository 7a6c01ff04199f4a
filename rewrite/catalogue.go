package rewrite

import (
	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

// attn builds matmul(softmax(matmul(q, k) {qk}) {sm}, v) {pv} over q [M,D], k [N,D] (or
// [D,N] without transpose_b), v [N,Dv]. Scores are %s, probabilities %p, the result %o.
func attn(b *graph.Builder, m, d, n, dv int, qk, sm, pv graph.Attrs) (q, k, s, p, o *graph.Value) {
	q = b.Input("q", f32, m, d)
	if qk["transpose_b"].Bool {
		k = b.Input("k", f32, n, d)
	} else {
		k = b.Input("k", f32, d, n)
	}
	v := b.Input("v", f32, n, dv)
	s = b.Named("s", "matmul", qk, q, k)
	p = b.Named("p", "softmax", sm, s)
	o = b.Named("o", "matmul", pv, p, v)
	return
}

var tb = graph.Attrs{"transpose_b": graph.Bool(true)}

// Catalogue is every entry, grouped by pass: matches first, then one near miss per condition.
func Catalogue() []Entry {
	return []Entry{
		// ---- canonicalize: no-op removal ----
		{Name: "canonicalize/match/cast-same-dtype", Pass: Canonicalize, Rewrite: true, Bitwise: true,
			Build: func(b *graph.Builder) {
				b.Output(b.Named("y", "relu", nil, b.Named("c", "cast", graph.Attrs{"to": graph.DTypeAttr(f32)}, b.Input("x", f32, 5, 7))))
			},
			Expect: noNode("c")},
		{Name: "canonicalize/near-miss/cast-other-dtype", Pass: Canonicalize, Condition: "a cast is a no-op only to the same dtype", Bitwise: true,
			Build: func(b *graph.Builder) {
				b.Output(b.Named("y", "relu", nil, b.Named("c", "cast", graph.Attrs{"to": graph.DTypeAttr(f16)}, b.Input("x", f32, 5, 7))))
			},
			Expect: hasNode("c", "cast")},
		{Name: "canonicalize/match/identity-transpose", Pass: Canonicalize, Rewrite: true, Bitwise: true,
			Build: func(b *graph.Builder) {
				b.Output(b.Named("y", "exp", nil, b.Named("t", "transpose", graph.Attrs{"perm": graph.Ints(0, 1)}, b.Input("x", f32, 6, 6))))
			},
			Expect: noNode("t")},
		{Name: "canonicalize/near-miss/square-transpose", Pass: Canonicalize, Condition: "a transpose is a no-op only for the identity perm (a square one keeps its type)", Bitwise: true,
			Build: func(b *graph.Builder) {
				b.Output(b.Named("y", "exp", nil, b.Named("t", "transpose", graph.Attrs{"perm": graph.Ints(1, 0)}, b.Input("x", f32, 6, 6))))
			},
			Expect: hasNode("t", "transpose")},
		{Name: "canonicalize/match/same-shape-reshape-and-full-slice", Pass: Canonicalize, Rewrite: true, Bitwise: true,
			Build: func(b *graph.Builder) {
				x := b.Input("x", f32, 4, 9)
				r := b.Named("r", "reshape", graph.Attrs{"shape": graph.Ints(4, 9)}, x)
				s := b.Named("sl", "slice", graph.Attrs{"starts": graph.Ints(0, 0), "ends": graph.Ints(4, 9)}, r)
				b.Output(b.Named("y", "neg", nil, s))
			},
			Expect: all(noNode("r"), noNode("sl"))},
		{Name: "canonicalize/near-miss/no-op-output", Pass: Canonicalize, Condition: "a no-op that produces a graph output stays (the output keeps its name)", Bitwise: true,
			Build: func(b *graph.Builder) {
				x := b.Input("x", f32, 5, 3)
				b.Output(b.Named("y", "cast", graph.Attrs{"to": graph.DTypeAttr(f32)}, x), b.Named("z", "abs", nil, x))
			},
			Expect: all(hasNode("y", "cast"), outputs("y", "z"))},

		// ---- gemm-operands: a transposed matmul operand becomes a transpose kernel ----
		{Name: "gemm-operands/match/transpose-a-and-b", Pass: GemmOperands, Rewrite: true, Bitwise: true,
			Build: func(b *graph.Builder) {
				at := graph.Attrs{"transpose_a": graph.Bool(true), "transpose_b": graph.Bool(true)}
				b.Output(b.Named("y", "matmul", at, b.Input("a", f32, 9, 5), b.Input("b", f32, 7, 9)))
			},
			Expect: all(hasNode("y", "matmul"), opCount("transpose", 2))},
		{Name: "gemm-operands/near-miss/row-major", Pass: GemmOperands, Condition: "only a transposed operand is materialized", Bitwise: true,
			Build: func(b *graph.Builder) {
				b.Output(b.Named("y", "matmul", nil, b.Input("a", f32, 5, 9), b.Input("b", f32, 9, 7)))
			},
			Expect: all(hasNode("y", "matmul"), opCount("transpose", 0))},

		// ---- split-loss: a large mse_loss becomes row sums and their sum ----
		{Name: "split-loss/match/rank-2-large", Pass: SplitLoss, Rewrite: true,
			Build: func(b *graph.Builder) {
				b.Output(b.Named("l", "mse_loss", nil, b.Input("a", f32, 256, 300), b.Input("b", f32, 256, 300)))
			},
			Expect: all(hasNode("l", "cast"), opCount("mse_loss", 0), opCount("reduce_sum", 2))},
		{Name: "split-loss/near-miss/small", Pass: SplitLoss, Condition: "a loss under 65536 elements stays one kernel (and keeps its bits)", Bitwise: true,
			Build: func(b *graph.Builder) {
				b.Output(b.Named("l", "mse_loss", nil, b.Input("a", bf16, 100, 300), b.Input("b", bf16, 100, 300)))
			},
			Expect: hasNode("l", "mse_loss")},
		{Name: "split-loss/near-miss/rank-1", Pass: SplitLoss, Condition: "a rank-1 loss has no rows to sum", Bitwise: true,
			Build: func(b *graph.Builder) {
				b.Output(b.Named("l", "mse_loss", nil, b.Input("a", f32, 70000), b.Input("b", f32, 70000)))
			},
			Expect: hasNode("l", "mse_loss")},

		// ---- fuse-attention: matmul(softmax(matmul(q, k^T)), v) -> attention ----
		{Name: "fuse-attention/match/2d", Pass: FuseAttention, Rewrite: true,
			Build:  func(b *graph.Builder) { _, _, _, _, o := attn(b, 9, 8, 13, 5, tb, nil, nil); b.Output(o) },
			Expect: all(hasNode("o", "attention"), noNode("p"), noNode("s"))},
		{Name: "fuse-attention/match/batched", Pass: FuseAttention, Rewrite: true,
			Build: func(b *graph.Builder) {
				q, k, v := b.Input("q", f32, 2, 7, 4), b.Input("k", f32, 2, 11, 4), b.Input("v", f32, 2, 11, 3)
				s := b.Named("s", "batch_matmul", tb, q, k)
				b.Output(b.Named("o", "batch_matmul", nil, b.Named("p", "softmax", nil, s), v))
			},
			Expect: all(hasNode("o", "attention"), noNode("p"))},
		{Name: "fuse-attention/near-miss/no-transpose-b", Pass: FuseAttention, Condition: "the scores matmul must read k transposed (transpose_b); square k hides a shape error",
			Build:  func(b *graph.Builder) { _, _, _, _, o := attn(b, 6, 8, 8, 5, nil, nil, nil); b.Output(o) },
			Expect: all(hasNode("o", "matmul"), hasNode("p", "softmax"), opCount("attention", 0))},
		{Name: "fuse-attention/near-miss/pv-transpose-a", Pass: FuseAttention, Condition: "the value matmul must not transpose the probabilities",
			Build: func(b *graph.Builder) {
				q, k, v := b.Input("q", f32, 8, 4), b.Input("k", f32, 8, 4), b.Input("v", f32, 8, 3)
				p := b.Named("p", "softmax", nil, b.Named("s", "matmul", tb, q, k))
				b.Output(b.Named("o", "matmul", graph.Attrs{"transpose_a": graph.Bool(true)}, p, v))
			},
			Expect: all(hasNode("o", "matmul"), opCount("attention", 0))},
		{Name: "fuse-attention/near-miss/softmax-axis-0", Pass: FuseAttention, Condition: "the softmax must run along the keys (the last axis)",
			Build: func(b *graph.Builder) {
				_, _, _, _, o := attn(b, 8, 4, 8, 3, tb, graph.Attrs{"axis": graph.Int(0)}, nil)
				b.Output(o)
			},
			Expect: all(hasNode("o", "matmul"), hasNode("p", "softmax"), opCount("attention", 0))},
		{Name: "fuse-attention/near-miss/softmax-accum", Pass: FuseAttention, Condition: "a softmax with its own accumulator dtype keeps it",
			Build: func(b *graph.Builder) {
				_, _, _, _, o := attn(b, 7, 4, 9, 3, tb, graph.Attrs{"accum": graph.DTypeAttr(numerics.F64)}, nil)
				b.Output(o)
			},
			Expect: all(hasNode("p", "softmax"), opCount("attention", 0))},
		{Name: "fuse-attention/near-miss/probabilities-read-twice", Pass: FuseAttention, Condition: "the probabilities must have no other reader",
			Build: func(b *graph.Builder) {
				_, _, _, p, o := attn(b, 7, 4, 9, 3, tb, nil, nil)
				b.Output(o, b.Named("rs", "exp", nil, p))
			},
			Expect: all(hasNode("o", "matmul"), opCount("attention", 0))},
		{Name: "fuse-attention/near-miss/scores-read-twice", Pass: FuseAttention, Condition: "the scores must have no other reader",
			Build: func(b *graph.Builder) {
				_, _, s, _, o := attn(b, 7, 4, 9, 3, tb, nil, nil)
				b.Output(o, b.Named("sm", "reduce_max", graph.Attrs{"axes": graph.Ints(1)}, s))
			},
			Expect: all(hasNode("o", "matmul"), opCount("attention", 0))},
		{Name: "fuse-attention/near-miss/tile-hint", Pass: FuseAttention, Condition: "a matmul with a tile hint keeps its schedule",
			Build: func(b *graph.Builder) {
				_, _, _, _, o := attn(b, 7, 4, 9, 3, graph.Attrs{"transpose_b": graph.Bool(true), "tile": graph.Ints(16, 16, 16)}, nil, nil)
				b.Output(o)
			},
			Expect: opCount("attention", 0)},

		// ---- conv-fft: a large-kernel conv becomes rfft o complex_mul o irfft (issue 26) ----
		// Both matches are sweep points of BenchmarkConvFFTCost that measured the FFT form
		// faster (engine/compiler/testdata/conv_fft_cost.tsv); the 1-D one with a bias added.
		{Name: "conv-fft/match/conv1d-k255-l2048", Pass: ConvFFT, Rewrite: true, Tol: &convFFTTol,
			Build: func(b *graph.Builder) {
				b.Output(b.Named("y", "conv1d", graph.Attrs{"padding": graph.Ints(127)}, b.Input("x", f32, 4, 1, 2048), b.Input("w", f32, 1, 1, 255), b.Input("b", f32, 1)))
			},
			Expect: all(opCount("conv1d", 0), opCount("rfft", 2), opCount("irfft", 1), opCount("complex_mul", 1))},
		{Name: "conv-fft/match/conv2d-31x31", Pass: ConvFFT, Rewrite: true, Tol: &convFFTTol,
			Build: func(b *graph.Builder) {
				b.Output(b.Named("y", "conv2d", graph.Attrs{"padding": graph.Ints(15), "groups": graph.Int(2)}, b.Input("x", f32, 1, 2, 72, 60), b.Input("w", f32, 2, 1, 31, 31)))
			},
			Expect: all(opCount("conv2d", 0), opCount("rfft2", 2), opCount("irfft2", 1), opCount("complex_mul", 1))},
		{Name: "conv-fft/near-miss/conv2d-3x3", Pass: ConvFFT, Condition: "a 3x3 kernel costs less direct, even over 64 channels", Bitwise: true, Tol: &convFFTTol,
			Build: func(b *graph.Builder) {
				b.Output(b.Named("y", "conv2d", graph.Attrs{"padding": graph.Ints(1)}, b.Input("x", f32, 1, 64, 16, 16), b.Input("w", f32, 64, 64, 3, 3)))
			},
			Expect: all(hasNode("y", "conv2d"), opCount("rfft2", 0))},
		{Name: "conv-fft/near-miss/conv1d-strided", Pass: ConvFFT, Condition: "a strided conv is left direct", Bitwise: true,
			Build: func(b *graph.Builder) {
				b.Output(b.Named("y", "conv1d", graph.Attrs{"stride": graph.Ints(2)}, b.Input("x", f32, 1, 2, 1024), b.Input("w", f32, 2, 2, 63)))
			},
			Expect: all(hasNode("y", "conv1d"), opCount("rfft", 0))},
		{Name: "conv-fft/near-miss/conv1d-bf16", Pass: ConvFFT, Condition: "bf16 has no FFT: left direct", Bitwise: true,
			Build: func(b *graph.Builder) {
				b.Output(b.Named("y", "conv1d", nil, b.Input("x", bf16, 1, 2, 1024), b.Input("w", bf16, 2, 2, 63)))
			},
			Expect: all(hasNode("y", "conv1d"), opCount("rfft", 0))},

		// ---- fuse-elementwise: chains of elementwise nodes become one kernel ----
		{Name: "fuse-elementwise/match/chain", Pass: FuseElementwise, Rewrite: true, Bitwise: true,
			Build: func(b *graph.Builder) {
				x := b.Input("x", f32, 37, 5)
				b.Output(b.Named("c", "tanh", nil, b.Named("b", "exp", nil, b.Named("a", "relu", nil, x))))
			},
			Expect: fused("a", "b", "c")},
		{Name: "fuse-elementwise/match/f16-intermediates", Pass: FuseElementwise, Rewrite: true, Bitwise: true,
			Build: func(b *graph.Builder) {
				x, y := b.Input("x", f16, 33, 9), b.Input("y", f16, 33, 9)
				b.Output(b.Named("c", "sigmoid", nil, b.Named("b", "mul", nil, b.Named("a", "sub", nil, x, y), y)))
			},
			Expect: fused("a", "b", "c")},
		{Name: "fuse-elementwise/near-miss/second-reader", Pass: FuseElementwise, Condition: "a value read by another kernel must be stored, not fused away", Bitwise: true,
			Build: func(b *graph.Builder) {
				x := b.Input("x", f32, 16, 8)
				a := b.Named("a", "relu", nil, x)
				b.Output(b.Named("e", "exp", nil, a), b.Named("r", "reduce_sum", graph.Attrs{"axes": graph.Ints(1)}, a))
			},
			Expect: apart("a", "e")},
		{Name: "fuse-elementwise/near-miss/broadcast-producer", Pass: FuseElementwise, Condition: "a producer of another shape (broadcast) is not fused into its reader", Bitwise: true,
			Build: func(b *graph.Builder) {
				a := b.Named("a", "exp", nil, b.Input("x", f32, 1, 24))
				b.Output(b.Named("s", "add", nil, a, b.Input("y", f32, 13, 24)))
			},
			Expect: apart("a", "s")},
		{Name: "fuse-elementwise/near-miss/graph-output", Pass: FuseElementwise, Condition: "a graph output is stored, not fused into its reader", Bitwise: true,
			Build: func(b *graph.Builder) {
				a := b.Named("a", "relu", nil, b.Input("x", f32, 9, 9))
				b.Output(a, b.Named("e", "exp", nil, a))
			},
			Expect: apart("a", "e")},
	}
}
