package ref

import (
	"math"
	"slices"

	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
)

// matmul serves matmul and batch_matmul (matmul is one batch); tile and accum are ignored.
func matmul(n *graph.Node, in []*tensor.Tensor, out *tensor.Tensor) error {
	a, b := in[0], in[1]
	batch, m, nn, k, err := graph.MatmulDims(n, typeOf(a), typeOf(b))
	if err != nil {
		return errs.Wrap(errs.Shape, err, "ref: %s", nodeName(n))
	}
	d := mmDims{batch: batch, m: m, n: nn, k: k, ta: n.BoolAttr("transpose_a"), tb: n.BoolAttr("transpose_b")}
	if a.DType.IsFloat() {
		putFloats(out, matmulLoop(floatsOf(a), floatsOf(b), d))
	} else {
		putInts(out, matmulLoop(intsOf(a), intsOf(b), d))
	}
	return nil
}

type mmDims struct {
	batch, m, n, k int
	ta, tb         bool // operands stored transposed: a as [K,M], b as [N,K]
}

// matmulLoop sums over K in increasing order for every output element.
func matmulLoop[T scalar](a, b []T, d mmDims) []T {
	out := make([]T, d.batch*d.m*d.n)
	for bt := range d.batch {
		ab, bb := a[bt*d.m*d.k:(bt+1)*d.m*d.k], b[bt*d.k*d.n:(bt+1)*d.k*d.n]
		for i := range d.m {
			for j := range d.n {
				var acc T
				for p := range d.k {
					acc += ab[at(i, p, d.m, d.k, d.ta)] * bb[at(p, j, d.k, d.n, d.tb)]
				}
				out[(bt*d.m+i)*d.n+j] = acc
			}
		}
	}
	return out
}

// at is the flat offset of logical element (r, c) of a rows x cols matrix stored row-major,
// or stored as its transpose (cols x rows) when transposed.
func at(r, c, rows, cols int, transposed bool) int {
	if transposed {
		return c*rows + r
	}
	return r*cols + c
}

// attention is softmax(q k^T * scale [masked]) v, one query row at a time, composed of the same
// steps as the unfused graph: dot products summed over D in order, scaled, masked to -Inf,
// softmax as softmaxRow, then probabilities times v summed over keys in order.
func attention(n *graph.Node, in []*tensor.Tensor, out *tensor.Tensor) error {
	q, k, v := floatsOf(in[0]), floatsOf(in[1]), floatsOf(in[2])
	shape := in[0].Shape
	r := len(shape)
	sq, d := shape[r-2], shape[r-1]
	sk, dv := in[1].Shape[r-2], in[2].Shape[r-1]
	scale := 1 / math.Sqrt(float64(d))
	if n.HasAttr("scale") {
		scale = n.FloatAttr("scale")
	}
	causal := n.BoolAttr("causal")
	res := make([]float64, product(out.Shape))
	scores := make([]float64, sk)
	for bt := range product(shape[:r-2]) {
		qb, kb, vb := q[bt*sq*d:], k[bt*sk*d:], v[bt*sk*dv:]
		for i := range sq {
			for j := range sk {
				var dot float64
				for c := range d {
					dot += qb[i*d+c] * kb[j*d+c]
				}
				scores[j] = dot * scale
				if causal && j > i {
					scores[j] = math.Inf(-1)
				}
			}
			softmaxRow(scores)
			for c := range dv {
				var acc float64
				for j := range sk {
					acc += scores[j] * vb[j*dv+c]
				}
				res[(bt*sq+i)*dv+c] = acc
			}
		}
	}
	putFloats(out, res)
	return nil
}

func typeOf(t *tensor.Tensor) graph.Type {
	return graph.Type{DType: t.DType, Shape: slices.Clone(t.Shape)}
}

// scaledMatmul is torch._scaled_mm's function computed exactly: fp8 products are exact in
// float64 and so is their sum for K < 2^18 (e4m3 products span 2^-18..2^17), so the only
// roundings are the two scale multiplications in float64 and the final one to out_dtype.
// Engines accumulate in f32 and multiply by scale_a*scale_b rounded to f32; design.md §7 and
// golden/tolerance.go say how much that may differ.
func scaledMatmul(n *graph.Node, in []*tensor.Tensor, out *tensor.Tensor) error {
	_, m, nn, k, err := graph.MatmulDims(n, typeOf(in[0]), typeOf(in[1]))
	if err != nil {
		return errs.Wrap(errs.Shape, err, "ref: %s", nodeName(n))
	}
	sa, sb := floatsOf(in[2])[0], floatsOf(in[3])[0]
	dot := matmulLoop(floatsOf(in[0]), floatsOf(in[1]), mmDims{batch: 1, m: m, n: nn, k: k, tb: true})
	for i, v := range dot {
		dot[i] = v * sa * sb
	}
	putFloats(out, dot)
	return nil
}
