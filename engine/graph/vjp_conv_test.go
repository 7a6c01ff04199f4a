package graph_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/autodiff"
	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/engine/ref"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
)

// convGradCase is one convolution whose rule-built gradients are compared with loops over
// the definition. Spatial lists hold (h, w); a conv1d has h = 1 and h's stride, padding and
// dilation are ignored.
type convGradCase struct {
	name             string
	dims             int
	n, c, co, groups int
	in, k            [2]int
	stride, pad, dil [2]int
	bias             bool
}

var convGradCases = []convGradCase{
	{name: "1d plain", dims: 1, n: 2, c: 3, co: 4, groups: 1, in: [2]int{1, 11}, k: [2]int{1, 3}, stride: [2]int{1, 1}, dil: [2]int{1, 1}, bias: true},
	// (13 + 2 - 4 - 1) % 3 = 1: the last input position is never read.
	{name: "1d stride3 ragged pad1 k4", dims: 1, n: 2, c: 2, co: 3, groups: 1, in: [2]int{1, 13}, k: [2]int{1, 4}, stride: [2]int{1, 3}, pad: [2]int{0, 1}, dil: [2]int{1, 1}, bias: true},
	{name: "1d dil2 stride2 groups2", dims: 1, n: 1, c: 4, co: 6, groups: 2, in: [2]int{1, 17}, k: [2]int{1, 3}, stride: [2]int{1, 2}, pad: [2]int{0, 2}, dil: [2]int{1, 2}},
	// padding 3 > dil*(K-1) = 1: dy is cropped before the correlation.
	{name: "1d pad beyond span", dims: 1, n: 1, c: 2, co: 2, groups: 1, in: [2]int{1, 5}, k: [2]int{1, 2}, stride: [2]int{1, 1}, pad: [2]int{0, 3}, dil: [2]int{1, 1}, bias: true},
	// L=1, padding 3, stride 7: the only window reads padding, so the input gradient is zero.
	{name: "1d reads only padding", dims: 1, n: 1, c: 1, co: 2, groups: 1, in: [2]int{1, 1}, k: [2]int{1, 1}, stride: [2]int{1, 7}, pad: [2]int{0, 3}, dil: [2]int{1, 1}},
	{name: "1d depthwise", dims: 1, n: 2, c: 3, co: 3, groups: 3, in: [2]int{1, 9}, k: [2]int{1, 3}, stride: [2]int{1, 2}, pad: [2]int{0, 1}, dil: [2]int{1, 1}},
	{name: "2d k3x2 stride2x1 ragged", dims: 2, n: 2, c: 3, co: 2, groups: 1, in: [2]int{8, 7}, k: [2]int{3, 2}, stride: [2]int{2, 1}, pad: [2]int{0, 1}, dil: [2]int{1, 2}, bias: true},
	{name: "2d groups2 non-square", dims: 2, n: 1, c: 4, co: 6, groups: 2, in: [2]int{7, 9}, k: [2]int{2, 3}, stride: [2]int{2, 3}, pad: [2]int{1, 2}, dil: [2]int{2, 1}, bias: true},
}

func (c convGradCase) graph(t *testing.T) *graph.Graph {
	t.Helper()
	b := graph.NewBuilder("conv_grad")
	xs := []int{c.n, c.c, c.in[1]}
	ws := []int{c.co, c.c / c.groups, c.k[1]}
	op, from := "conv1d", 1
	if c.dims == 2 {
		xs = []int{c.n, c.c, c.in[0], c.in[1]}
		ws = []int{c.co, c.c / c.groups, c.k[0], c.k[1]}
		op, from = "conv2d", 0
	}
	ints := func(v [2]int) graph.Attr {
		out := []int64{}
		for _, e := range v[from:] {
			out = append(out, int64(e))
		}
		return graph.Ints(out...)
	}
	in := []*graph.Value{b.Input("x", numerics.F64, xs...), b.Input("w", numerics.F64, ws...)}
	if c.bias {
		in = append(in, b.Input("b", numerics.F64, c.co))
	}
	b.Output(b.Named("y", op, graph.Attrs{"stride": ints(c.stride), "padding": ints(c.pad), "dilation": ints(c.dil), "groups": graph.Int(int64(c.groups))}, in...))
	g, err := b.Build()
	if err != nil {
		t.Fatalf("%s: %v", c.name, err)
	}
	return g
}

// want is the gradient of sum(dy * y) for every input, by the definition's loops.
func (c convGradCase) want(x, w, dy []float64, out [2]int) (dx, dw, db []float64) {
	sh, sw, ph, pw, dh, dwl := c.stride[0], c.stride[1], c.pad[0], c.pad[1], c.dil[0], c.dil[1]
	if c.dims == 1 {
		sh, ph, dh = 1, 0, 1
	}
	cg, cog := c.c/c.groups, c.co/c.groups
	dx, dw, db = make([]float64, len(x)), make([]float64, len(w)), make([]float64, c.co)
	for n := range c.n {
		for o := range c.co {
			for i := range out[0] {
				for j := range out[1] {
					g := dy[((n*c.co+o)*out[0]+i)*out[1]+j]
					db[o] += g
					for cl := range cg {
						ch := (o/cog)*cg + cl
						for p := range c.k[0] {
							r := i*sh + p*dh - ph
							for q := range c.k[1] {
								s := j*sw + q*dwl - pw
								if r < 0 || r >= c.in[0] || s < 0 || s >= c.in[1] {
									continue
								}
								wi := ((o*cg+cl)*c.k[0]+p)*c.k[1] + q
								xi := ((n*c.c+ch)*c.in[0]+r)*c.in[1] + s
								dx[xi] += g * w[wi]
								dw[wi] += g * x[xi]
							}
						}
					}
				}
			}
		}
	}
	return dx, dw, db
}

func randomF64(r *rand.Rand, shape []int) *tensor.Tensor {
	t := tensor.New(numerics.F64, shape)
	for i := range t.Len() {
		t.SetFloat64(i, r.Float64()-0.5)
	}
	return t
}

// The conv rules (vjp_conv.go), evaluated by the golden model, give the gradients of the
// definition's loops: a wrong index, a kernel not flipped, a dropped ragged tail or a crop in
// the wrong place changes some element.
func TestConvGradientsMatchTheDefinition(t *testing.T) {
	for i, c := range convGradCases {
		t.Run(c.name, func(t *testing.T) {
			g := c.graph(t)
			vg, err := autodiff.VJP(g)
			if err != nil {
				t.Fatal(err)
			}
			r := rand.New(rand.NewPCG(uint64(i), 26))
			y := g.Outputs[0]
			feed := map[string]*tensor.Tensor{}
			for _, v := range g.Inputs {
				feed[v.Name] = randomF64(r, v.Type.Shape)
			}
			feed[autodiff.CotangentPrefix+y.Name] = randomF64(r, y.Type.Shape)
			outs, err := ref.Run(vg, feed)
			if err != nil {
				t.Fatal(err)
			}
			sp := y.Type.Shape[2:]
			out := [2]int{1, sp[len(sp)-1]}
			if c.dims == 2 {
				out[0] = sp[0]
			}
			dx, dw, db := c.want(feed["x"].Float64s(), feed["w"].Float64s(), feed[autodiff.CotangentPrefix+y.Name].Float64s(), out)
			wants := [][]float64{dx, dw}
			if c.bias {
				wants = append(wants, db)
			}
			if len(outs) != 1+len(wants) {
				t.Fatalf("%d outputs, want %d", len(outs), 1+len(wants))
			}
			for k, want := range wants {
				name := g.Inputs[k].Name
				if err := closeTo(outs[1+k].Float64s(), want, 1e-13); err != nil {
					t.Errorf("gradient of %%%s: %v", name, err)
				}
			}
		})
	}
}

// closeTo: |got - want| <= tol * max|want| everywhere, and want is not all zero unless got is.
func closeTo(got, want []float64, tol float64) error {
	if len(got) != len(want) {
		return fmt.Errorf("%d elements, want %d", len(got), len(want))
	}
	big := 0.0
	for _, v := range want {
		big = max(big, math.Abs(v))
	}
	for i := range want {
		if d := math.Abs(got[i] - want[i]); !(d <= tol*big) {
			return fmt.Errorf("element %d: %.17g, want %.17g (max|want| %.3g)", i, got[i], want[i], big)
		}
	}
	return nil
}
