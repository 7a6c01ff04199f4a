package training

import (
	"math"
	"strconv"

	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
	"github.com/tessera-qa/tessera-qa/harness"
)

// FNOModel is the Fourier neural operator block (issue 26): on a real field x [B, C, H, W],
//
//	h = lift(x)                                   pointwise C -> Hidden (1x1 weights and bias)
//	X = rfft2(h)                                  [B, Hidden, H, W/2+1] complex
//	Y[:, :, 0:m1, 0:m2]     = sum_i X[:, i, 0:m1, 0:m2]     * R1[i, o]   (complex)
//	Y[:, :, H-m1:H, 0:m2]   = sum_i X[:, i, H-m1:H, 0:m2]   * R2[i, o]   the negative rows
//	Y elsewhere 0;  s = irfft2(Y, s=(H, W))
//	z = gelu(s + h Wl + bl);  loss = mse(z P + pb, target)
//
// with torch.fft's default norm (backward): Li et al.'s SpectralConv2d. R1 and R2 are dense
// [Hidden, Hidden, m1, m2, 2] or, with Dims.CPRank r > 0, CP products
// R[i,o,k1,k2] = sum_r U[i,r] V[o,r] S[k1,k2,r] (all complex) expanded in the graph.
const FNOModel = "fno"

// fnoDims are the defaults: the odd/even and mode choices of the tests are set per test.
var fnoDims = Dims{Batch: 4, In: 2, Hidden: 8, Out: 2, GridH: 8, GridW: 8, Modes1: 3, Modes2: 3}

func checkFNO(d Dims) error {
	if d.In < 1 || d.Hidden < 1 || d.Out < 1 || d.GridH < 1 || d.GridW < 1 || d.Modes1 < 1 || d.Modes2 < 1 || d.CPRank < 0 {
		return errs.New(errs.Input, "train: model fno needs positive in, hidden, out, grid and modes, got %+v", d)
	}
	// Two corners of m1 rows must not overlap, and the kept columns are rfft bins 0..W/2.
	if 2*d.Modes1 > d.GridH || d.Modes2 > d.GridW/2+1 {
		return errs.New(errs.Input, "train: model fno: modes %dx%d on a %dx%d grid; want 2*m1 <= H and m2 <= W/2+1",
			d.Modes1, d.Modes2, d.GridH, d.GridW)
	}
	return nil
}

// buildFNO adds the block to b; w declares a parameter (name, fan-in, shape).
func buildFNO(b *graph.Builder, dt numerics.DType, d Dims, localBatch int, w func(string, int, ...int) *graph.Value) error {
	if err := checkFNO(d); err != nil {
		return err
	}
	B, C, K, O, H, W, m1, m2 := localBatch, d.In, d.Hidden, d.Out, d.GridH, d.GridW, d.Modes1, d.Modes2
	rows := B * H * W
	o := fnoOps{b}
	liftW, liftB := w("lift_w", C, C, K), w("lift_b", 0, K)
	spec := func(name string) *graph.Value {
		if d.CPRank == 0 {
			return w(name, K, K, K, m1, m2, 2)
		}
		r := d.CPRank
		// Each factor's fan-in makes the expanded product's scale about 1/sqrt(K).
		u, v, s := w(name+"_u", K, K, r, 2), w(name+"_v", r, K, r, 2), w(name+"_s", 1, m1, m2, r, 2)
		return CPWeights(b, u, v, s)
	}
	r1, r2 := spec("spec1"), spec("spec2")
	linW, linB := w("lin_w", K, K, K), w("lin_b", 0, K)
	projW, projB := w("proj_w", K, K, O), w("proj_b", 0, O)
	x, t := b.Input("x", dt, B, C, H, W), b.Input("target", dt, rows, O)

	h := o.op("add", nil, o.op("matmul", nil, o.reshape(o.perm(x, 0, 2, 3, 1), rows, C), liftW), liftB) // [rows, K]
	s := SpectralConv(b, o.perm(o.reshape(h, B, H, W, K), 0, 3, 1, 2), r1, r2)                          // [B, K, H, W]
	sRows := o.reshape(o.perm(s, 0, 2, 3, 1), rows, K)                                                  // channel-last, as h
	lin := o.op("add", nil, o.op("matmul", nil, h, linW), linB)                                         // the 1x1 path
	z := o.op("gelu", nil, o.op("add", nil, sRows, lin))
	b.Named("loss", "mse_loss", nil, o.op("add", nil, o.op("matmul", nil, z, projW), projB), t)
	return nil
}

// SpectralConv is FNO's spectral convolution of the real field h [B, Cin, H, W] with complex
// weights r1, r2 [Cin, Cout, m1, m2, 2]: rfft2 over (H, W), rows 0..m1-1 mixed by r1 and rows
// H-m1..H-1 (the negative frequencies) by r2, columns 0..m2-1 of the rfft axis, the rest of
// the spectrum zero, irfft2 with s = (H, W). It returns [B, Cout, H, W].
func SpectralConv(b *graph.Builder, h, r1, r2 *graph.Value) *graph.Value {
	o := fnoOps{b}
	B, Cin, H, W := h.Type.Shape[0], h.Type.Shape[1], h.Type.Shape[2], h.Type.Shape[3]
	m1, m2, bins := r1.Type.Shape[2], r1.Type.Shape[3], W/2+1
	X := o.op("rfft2", nil, h)                         // [B, Cin, H, bins, 2]
	mix := func(corner, r *graph.Value) *graph.Value { // sum_i corner[b,i] * r[i,o]
		prod := o.op("complex_mul", nil, o.reshape(corner, B, Cin, 1, m1, m2, 2), r)
		return o.op("reduce_sum", graph.Attrs{"axes": fnoInts(1)}, prod) // [B, Cout, m1, m2, 2]
	}
	lo := mix(o.slice(X, []int{0, 0, 0, 0, 0}, []int{B, Cin, m1, m2, 2}), r1)
	hi := mix(o.slice(X, []int{0, 0, H - m1, 0, 0}, []int{B, Cin, H, m2, 2}), r2)
	col := append([]*graph.Value{lo}, o.zerosAlong(lo, 2, H-2*m1)...)
	Y := o.cat(2, append(col, hi)...) // [B, Cout, H, m2, 2]
	if m2 < bins {
		Y = o.cat(3, append([]*graph.Value{Y}, o.zerosAlong(Y, 3, bins-m2)...)...)
	}
	return o.op("irfft2", graph.Attrs{"s": fnoInts(H, W)}, Y)
}

// CPWeights expands CP factors u [Cin, r, 2], v [Cout, r, 2], s [m1, m2, r, 2] (complex) to
// the dense spectral weights R[i,o,k1,k2] = sum_r u[i,r] v[o,r] s[k1,k2,r], [Cin, Cout, m1, m2, 2].
func CPWeights(b *graph.Builder, u, v, s *graph.Value) *graph.Value {
	o := fnoOps{b}
	Cin, r, Cout := u.Type.Shape[0], u.Type.Shape[1], v.Type.Shape[0]
	uv := o.op("complex_mul", nil, o.reshape(u, Cin, 1, r, 2), v) // [Cin, Cout, r, 2]
	full := o.op("complex_mul", nil, o.reshape(uv, Cin, Cout, 1, 1, r, 2), s)
	return o.op("reduce_sum", graph.Attrs{"axes": fnoInts(4)}, full)
}

// fnoOps spells the graph ops the block uses.
type fnoOps struct{ b *graph.Builder }

func fnoInts(xs ...int) graph.Attr {
	out := make([]int64, len(xs))
	for i, x := range xs {
		out[i] = int64(x)
	}
	return graph.Ints(out...)
}

func (o fnoOps) op(name string, a graph.Attrs, in ...*graph.Value) *graph.Value {
	return o.b.Op(name, a, in...)
}

func (o fnoOps) reshape(v *graph.Value, shape ...int) *graph.Value {
	return o.op("reshape", graph.Attrs{"shape": fnoInts(shape...)}, v)
}

func (o fnoOps) perm(v *graph.Value, p ...int) *graph.Value {
	return o.op("transpose", graph.Attrs{"perm": fnoInts(p...)}, v)
}

func (o fnoOps) slice(v *graph.Value, starts, ends []int) *graph.Value {
	return o.op("slice", graph.Attrs{"starts": fnoInts(starts...), "ends": fnoInts(ends...)}, v)
}

func (o fnoOps) cat(axis int, vs ...*graph.Value) *graph.Value {
	return o.op("concat", graph.Attrs{"axis": graph.Int(int64(axis))}, vs...)
}

// zerosAlong is v's zero block extended to n on axis, in pieces: full_like keeps v's layout on
// a mesh, so the zero spectrum is made on the rank that uses it, with no collective.
func (o fnoOps) zerosAlong(v *graph.Value, axis, n int) []*graph.Value {
	z := o.op("full_like", graph.Attrs{"value": graph.Float(0)}, v)
	have := v.Type.Shape[axis]
	var out []*graph.Value
	for ; n > 0; n -= min(n, have) {
		if n >= have {
			out = append(out, z)
			continue
		}
		ends := append([]int(nil), z.Type.Shape...)
		ends[axis] = n
		out = append(out, o.slice(z, make([]int, len(ends)), ends))
	}
	return out
}

// fnoBatch is rank's slice of step's global batch: x normal, target a fixed translation-
// equivariant teacher (an operator an FNO can learn), tanh of a 3-point stencil mixed over
// channels by T drawn from seed, computed in float64; rows of the target are (b, h, w).
func (m *Model) fnoBatch(seed uint64, step, rank, world int) (x, target *tensor.Tensor) {
	d := m.Dims
	xs := m.Graph.Value("x").Type.Shape
	B, C, H, W, O := xs[0], d.In, d.GridH, d.GridW, d.Out
	global := harness.RandomTensor(numerics.F64, []int{B * world, C, H, W}, harness.SubSeed(seed, "batch/"+strconv.Itoa(step)), harness.Dist{Kind: harness.DistNormal})
	teacher := harness.RandomTensor(numerics.F64, []int{C, O}, harness.SubSeed(seed, "teacher"), harness.Dist{Kind: harness.DistNormal})
	gx, tw := global.Float64s()[rank*B*C*H*W:(rank+1)*B*C*H*W], teacher.Float64s()
	x = tensor.New(m.DType, []int{B, C, H, W})
	for i, v := range gx {
		x.SetFloat64(i, v)
	}
	target = tensor.New(m.DType, []int{B * H * W, O})
	at := func(b, c, h, w int) float64 { return gx[((b*C+c)*H+h%H)*W+w%W] }
	for b := range B {
		for h := range H {
			for w := range W {
				for o := range O {
					var s float64
					for c := range C {
						s += tw[c*O+o] * (at(b, c, h, w) + at(b, c, h, w+1) + at(b, c, h+1, w))
					}
					target.SetFloat64(((b*H+h)*W+w)*O+o, math.Tanh(s/math.Sqrt(float64(3*C))))
				}
			}
		}
	}
	return x, target
}
