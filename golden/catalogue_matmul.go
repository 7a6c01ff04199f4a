package golden

import (
	"fmt"

	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/harness"
)

// Matmul, batch_matmul and attention. Default tiles are 64x64x32 (matmul) and 64x64
// (attention): the shapes put a ragged tile on every edge (67 = 64+3, K 97 = 3*32+1, N 45 < 64),
// a 1x1x1 case, batches, a tile-hint case (16x16x8 over 37x29x53) and attention with Sq and Sk
// not multiples of 64, causal on and off. Across the two matmul ops every transpose
// combination appears.
func init() {
	register(matmulFamily, "matmul", "batch_matmul")
	register(attentionFamily, "attention")
	register(scaledMatmulFamily, "scaled_matmul")
}

// mmCase is one matmul shape: batch (0 for plain matmul), M, N, K, transposes, tile hint.
type mmCase struct {
	batch, m, n, k int
	ta, tb         bool
	tile           []int64
}

func (c mmCase) tag() string {
	s := fmt.Sprintf("%dx%dx%d", c.m, c.n, c.k)
	if c.batch > 0 {
		s = fmt.Sprintf("%dx%s", c.batch, s)
	}
	switch {
	case c.ta && c.tb:
		s += "-tatb"
	case c.ta:
		s += "-ta"
	case c.tb:
		s += "-tb"
	}
	if c.tile != nil {
		s += fmt.Sprintf("-tile%dx%dx%d", c.tile[0], c.tile[1], c.tile[2])
	}
	return s
}

var mmCases = map[string][]mmCase{
	"matmul": {
		{m: 1, n: 1, k: 1},
		{m: 67, n: 45, k: 97},
		{m: 33, n: 17, k: 70, ta: true},
		{m: 37, n: 29, k: 53, tb: true, tile: []int64{16, 16, 8}},
	},
	"batch_matmul": {
		{batch: 1, m: 1, n: 1, k: 1},
		{batch: 2, m: 65, n: 7, k: 33},
		{batch: 2, m: 19, n: 23, k: 41, ta: true, tb: true},
	},
}

func matmulFamily(op string, dt numerics.DType) []Spec {
	var ds []draft
	for _, c := range mmCases[op] {
		d := distNormal
		if dt.IsInt() {
			d = harness.DefaultDist(dt)
		}
		if c.m*c.n == 1 {
			d = distAwayZero // one output element carries the whole check
			if dt.IsInt() {
				d = harness.Dist{Kind: harness.DistInt, Lo: 1, Hi: 50}
			}
		}
		attrs := graph.Attrs{}
		if c.ta {
			attrs["transpose_a"] = graph.Bool(true)
		}
		if c.tb {
			attrs["transpose_b"] = graph.Bool(true)
		}
		if c.tile != nil {
			attrs["tile"] = graph.Ints(c.tile...)
		}
		ds = append(ds, draft{tag: c.tag(), dists: dists("a", d, "b", d), tol: tolReduce(c.k), build: func(b *graph.Builder) *graph.Value {
			sa, sb := []int{c.m, c.k}, []int{c.k, c.n}
			if c.ta {
				sa = []int{c.k, c.m}
			}
			if c.tb {
				sb = []int{c.n, c.k}
			}
			if c.batch > 0 {
				sa, sb = append([]int{c.batch}, sa...), append([]int{c.batch}, sb...)
			}
			return b.Op(op, attrs, b.Input("a", dt, sa...), b.Input("b", dt, sb...))
		}})
	}
	return finish(op, dt, ds...)
}

func attentionFamily(op string, dt numerics.DType) []Spec {
	mk := func(batch, sq, sk, d, dv int, causal bool) draft {
		tag := fmt.Sprintf("%dx%dx%d", sq, sk, d)
		if batch > 0 {
			tag = fmt.Sprintf("%dx%s", batch, tag)
		}
		if dv != d {
			tag += fmt.Sprintf("-dv%d", dv)
		}
		if causal {
			tag += "-causal"
		}
		shape := func(rows, cols int) []int {
			if batch > 0 {
				return []int{batch, rows, cols}
			}
			return []int{rows, cols}
		}
		return draft{tag: tag, dists: dists("q", distNormal, "k", distNormal, "v", distNormal), tol: tolAttention(sk),
			build: func(b *graph.Builder) *graph.Value {
				return b.Op(op, graph.Attrs{"causal": graph.Bool(causal)},
					b.Input("q", dt, shape(sq, d)...), b.Input("k", dt, shape(sk, d)...), b.Input("v", dt, shape(sk, dv)...))
			}}
	}
	return finish(op, dt,
		mk(0, 1, 67, 16, 16, false),
		mk(0, 67, 45, 16, 16, true),
		mk(2, 37, 131, 8, 5, false))
}

// scaled_matmul (torch._scaled_mm): b is [N,K]. Shapes as matmul's (a 1x1 case, ragged tiles on
// every edge, a tile hint), each output dtype once, and one case over e4m3's whole range
// (|x| up to 448, scales of 2^-10..2^-8 as a per-tensor quantisation would choose).
var smCases = []struct {
	m, n, k int
	out     numerics.DType
	wide    bool
	tile    []int64
}{
	{m: 1, n: 1, k: 16, out: numerics.BF16},
	{m: 67, n: 45, k: 97, out: numerics.BF16},
	{m: 33, n: 48, k: 64, out: numerics.F32, wide: true}, // N, K multiples of 16: torch._scaled_mm and the fp8 kernel take it
	{m: 37, n: 29, k: 53, out: numerics.F16, tile: []int64{16, 16, 8}},
}

func scaledMatmulFamily(op string, dt numerics.DType) []Spec {
	var ds []draft
	for _, c := range smCases {
		d, ds2 := distNormal, distAwayZero
		tag := fmt.Sprintf("%dx%dx%d-%s", c.m, c.n, c.k, c.out)
		switch {
		case c.m*c.n == 1:
			d = distAwayZero
		case c.wide:
			d = harness.Dist{Kind: harness.DistUniform, Lo: -448, Hi: 448}
			ds2 = harness.Dist{Kind: harness.DistPositive, Lo: 0x1p-10, Hi: 0x1p-8}
			tag += "-range"
		}
		attrs := graph.Attrs{"out_dtype": graph.DTypeAttr(c.out)}
		if c.tile != nil {
			attrs["tile"] = graph.Ints(c.tile...)
			tag += fmt.Sprintf("-tile%dx%dx%d", c.tile[0], c.tile[1], c.tile[2])
		}
		ds = append(ds, draft{tag: tag, dists: dists("a", d, "b", d, "scale_a", ds2, "scale_b", ds2), tol: tolReduce(c.k),
			build: func(b *graph.Builder) *graph.Value {
				return b.Op(op, attrs, b.Input("a", dt, c.m, c.k), b.Input("b", dt, c.n, c.k),
					b.Input("scale_a", numerics.F32), b.Input("scale_b", numerics.F32, 1))
			}})
	}
	return finish(op, dt, ds...)
}
