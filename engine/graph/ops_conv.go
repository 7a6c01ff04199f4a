package graph

import (
	"fmt"

	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

// Convolutions (issue 26), torch.nn.functional.conv1d/conv2d semantics: a cross-correlation
//
//	y[n, o, i] = bias[o] + sum_{c < C_in/groups, k} w[o, c, k] * xpad[n, g*C_in/groups + c, i*stride + k*dilation]
//
// with g = o / (C_out/groups) and xpad the input zero-padded by `padding` on both sides of
// every spatial axis. Inputs are batched: x [N, C_in, L] (conv2d: [N, C_in, H, W]), weight
// [C_out, C_in/groups, K] ([.., K_h, K_w]), bias [C_out] (optional third input). stride,
// padding and dilation are int lists: conv1d takes one entry, conv2d one (both axes) or two
// (h, w). Every dim must be at least 1 (torch's unbatched form and empty tensors are not
// accepted). f16 and bf16 accumulate in f32 and round once, f32 in f32, f64 in f64.
var convDTypes = []numerics.DType{numerics.F16, numerics.BF16, numerics.F32, numerics.F64}

func init() {
	for _, c := range []struct {
		name string
		dims int
		doc  string
	}{
		{"conv1d", 1, "1-D cross-correlation of x [N,C_in,L] with weight [C_out,C_in/groups,K] (+ bias [C_out]), torch.nn.functional.conv1d"},
		{"conv2d", 2, "2-D cross-correlation of x [N,C_in,H,W] with weight [C_out,C_in/groups,K_h,K_w] (+ bias [C_out]), torch.nn.functional.conv2d"},
	} {
		pair := "one entry"
		if c.dims == 2 {
			pair = "one entry (both axes) or two (h, w)"
		}
		register(&OpDef{Name: c.name, Kind: KindConv, MinArgs: 2, MaxArgs: 3, DTypes: convDTypes,
			Attrs: []AttrSpec{
				{Name: "stride", Kind: AttrInts, Default: dflt(Ints(1)), Doc: "step between output positions, >= 1; " + pair},
				{Name: "padding", Kind: AttrInts, Default: dflt(Ints(0)), Doc: "zeros added on both sides of each spatial axis, >= 0; " + pair},
				{Name: "dilation", Kind: AttrInts, Default: dflt(Ints(1)), Doc: "step between kernel taps, >= 1; " + pair},
				{Name: "groups", Kind: AttrInt, Default: dflt(Int(1)), Doc: "channel groups: C_in and C_out divisible by it"},
			}, Infer: convInfer, Doc: c.doc})
	}
}

// ConvGeom is a convolution's geometry. Spatial quantities have two entries (h, w); a conv1d
// is a conv2d over a height of 1 (In, K and Out [0] are 1, Stride and Dil [0] 1, Pad [0] 0),
// so one lowering, one golden model and one rewrite serve both.
type ConvGeom struct {
	Dims                 int // spatial axes of the op: 1 or 2
	N, C, Co, G, Cg, Cog int // batch, in/out channels, groups, channels per group (in, out)
	In, K, Out           [2]int
	Stride, Pad, Dil     [2]int
	Bias                 bool
}

// Padded is the zero-padded input's spatial size on axis a.
func (g ConvGeom) Padded(a int) int { return g.In[a] + 2*g.Pad[a] }

// Taps is the number of kernel taps (K_h*K_w).
func (g ConvGeom) Taps() int { return g.K[0] * g.K[1] }

// Positions is the number of output positions per channel (H_out*W_out).
func (g ConvGeom) Positions() int { return g.Out[0] * g.Out[1] }

// MACs is the direct convolution's multiply-adds: N*C_out*(C_in/groups)*taps*positions.
func (g ConvGeom) MACs() int { return g.N * g.Co * g.Cg * g.Taps() * g.Positions() }

// ConvDims resolves the geometry of a conv1d/conv2d node over input types in (x, w[, bias]).
func ConvDims(n *Node, in []Type) (ConvGeom, error) {
	d := 1
	if n.Op == "conv2d" {
		d = 2
	}
	var g ConvGeom
	g.Dims, g.Bias = d, len(in) > 2
	x, w := in[0], in[1]
	axes := "[N, C_in, L]"
	if d == 2 {
		axes = "[N, C_in, H, W]"
	}
	if x.Rank() != d+2 {
		return g, errs.New(errs.Shape, "%s needs a batched input %s (rank %d), got %s", n.Op, axes, d+2, x)
	}
	if w.Rank() != d+2 {
		return g, errs.New(errs.Shape, "%s needs a weight [C_out, C_in/groups%s] (rank %d), got %s", n.Op, map[int]string{1: ", K", 2: ", K_h, K_w"}[d], d+2, w)
	}
	for _, t := range []Type{x, w} {
		for _, s := range t.Shape {
			if s < 1 {
				return g, errs.New(errs.Shape, "%s: every dim must be >= 1 (empty tensors are not accepted), got %s", n.Op, t)
			}
		}
	}
	attr := func(name string, least int) ([2]int, error) {
		v := n.IntsAttr(name)
		out := [2]int{1, 1}
		if name == "padding" {
			out[0] = 0
		}
		switch {
		case len(v) == 1:
			out[2-d], out[1] = v[0], v[0]
		case len(v) == 2 && d == 2:
			out = [2]int{v[0], v[1]}
		default:
			want := "1 entry"
			if d == 2 {
				want = "1 or 2 entries"
			}
			return out, errs.New(errs.Input, "%s: %s %v needs %s", n.Op, name, v, want)
		}
		for _, e := range out[2-d:] {
			if e < least {
				return out, errs.New(errs.Input, "%s: %s %v must be >= %d", n.Op, name, v, least)
			}
		}
		return out, nil
	}
	var err error
	if g.Stride, err = attr("stride", 1); err != nil {
		return g, err
	}
	if g.Pad, err = attr("padding", 0); err != nil {
		return g, err
	}
	if g.Dil, err = attr("dilation", 1); err != nil {
		return g, err
	}
	g.N, g.C, g.Co, g.G = x.Shape[0], x.Shape[1], w.Shape[0], int(n.IntAttr("groups"))
	if g.G < 1 {
		return g, errs.New(errs.Input, "%s: groups %d must be >= 1", n.Op, g.G)
	}
	if g.C%g.G != 0 || g.Co%g.G != 0 {
		return g, errs.New(errs.Shape, "%s: groups %d must divide C_in %d and C_out %d", n.Op, g.G, g.C, g.Co)
	}
	g.Cg, g.Cog = g.C/g.G, g.Co/g.G
	if w.Shape[1] != g.Cg {
		return g, errs.New(errs.Shape, "%s: weight %s has %d input channels, want C_in/groups = %d/%d = %d", n.Op, w, w.Shape[1], g.C, g.G, g.Cg)
	}
	g.In, g.K = [2]int{1, 1}, [2]int{1, 1}
	copy(g.In[2-d:], x.Shape[2:])
	copy(g.K[2-d:], w.Shape[2:])
	for a := range 2 {
		span := g.Dil[a]*(g.K[a]-1) + 1
		if g.Padded(a) < span {
			return g, errs.New(errs.Shape, "%s: input %s padded by %v is smaller than the dilated kernel (%d taps spanning %d) on spatial axis %d",
				n.Op, x, n.IntsAttr("padding"), g.K[a], span, a-(2-d))
		}
		g.Out[a] = (g.Padded(a)-span)/g.Stride[a] + 1
	}
	if g.Bias {
		if b := in[2]; b.Rank() != 1 || b.Shape[0] != g.Co {
			return g, errs.New(errs.Shape, "%s: bias %s must be [C_out] = [%d]", n.Op, b, g.Co)
		}
	}
	return g, nil
}

// OutShape is the output shape [N, C_out, L_out] ([N, C_out, H_out, W_out]).
func (g ConvGeom) OutShape() []int {
	if g.Dims == 1 {
		return []int{g.N, g.Co, g.Out[1]}
	}
	return []int{g.N, g.Co, g.Out[0], g.Out[1]}
}

func convInfer(n *Node, in []Type) (Type, error) {
	g, err := ConvDims(n, in)
	if err != nil {
		return Type{}, err
	}
	return Type{DType: in[0].DType, Shape: g.OutShape()}, nil
}

// String names the geometry in messages and dumps.
func (g ConvGeom) String() string {
	return fmt.Sprintf("conv%dd N=%d C_in=%d C_out=%d groups=%d in=%v k=%v out=%v stride=%v pad=%v dil=%v",
		g.Dims, g.N, g.C, g.Co, g.G, g.In, g.K, g.Out, g.Stride, g.Pad, g.Dil)
}
