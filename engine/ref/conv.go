package ref

import (
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
)

// conv1d and conv2d by their definition (torch.nn.functional.conv*d): for every output
// element, bias plus the sum over the group's input channels and the kernel taps in index
// order, in float64, a tap that falls in the zero padding skipped by a bounds test (no padded
// copy, no im2col, nothing shared with the compiler's lowering or its FFT rewrite), rounded
// once to the output dtype.
func init() {
	impls["conv1d"] = conv
	impls["conv2d"] = conv
}

func conv(n *graph.Node, in []*tensor.Tensor, out *tensor.Tensor) error {
	types := make([]graph.Type, len(in))
	for i, t := range in {
		types[i] = typeOf(t)
	}
	g, err := graph.ConvDims(n, types)
	if err != nil {
		return errs.Wrap(errs.Shape, err, "ref: %s", nodeName(n))
	}
	x, w := floatsOf(in[0]), floatsOf(in[1])
	var bias []float64
	if g.Bias {
		bias = floatsOf(in[2])
	}
	ih, iw := g.In[0], g.In[1]
	kh, kw := g.K[0], g.K[1]
	oh, ow := g.Out[0], g.Out[1]
	vals := make([]float64, g.N*g.Co*oh*ow)
	for b := range g.N {
		for o := range g.Co {
			grp := o / g.Cog
			for y := range oh {
				for z := range ow {
					var acc float64
					if bias != nil {
						acc = bias[o]
					}
					for c := range g.Cg {
						ch := grp*g.Cg + c
						for p := range kh {
							r := y*g.Stride[0] + p*g.Dil[0] - g.Pad[0]
							if r < 0 || r >= ih {
								continue
							}
							for q := range kw {
								s := z*g.Stride[1] + q*g.Dil[1] - g.Pad[1]
								if s < 0 || s >= iw {
									continue
								}
								acc += w[((o*g.Cg+c)*kh+p)*kw+q] * x[((b*g.C+ch)*ih+r)*iw+s]
							}
						}
					}
					vals[((b*g.Co+o)*oh+y)*ow+z] = acc
				}
			}
		}
	}
	putFloats(out, vals)
	return nil
}
