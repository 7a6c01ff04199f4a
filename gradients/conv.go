package gradients

import (
	"fmt"

	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
	"github.com/tessera-qa/tessera-qa/harness"
)

// convGeoms are convolutions whose geometry the gradient rules (engine/graph/vjp_conv.go)
// branch on and the golden catalogue's forward cases do not reach: a stride whose last window
// stops short of the padded input's end (the ragged tail gets zero gradient), padding beyond
// the dilated kernel's span (dy is cropped before the transposed correlation), a stride that
// skips input elements, and a depthwise conv with a channel multiplier. Shapes and attributes
// are the op's; h entries are left out for conv1d.
var convGeoms = []struct {
	op, tag string
	x, w    []int
	attrs   graph.Attrs
	bias    bool
}{
	// (13 + 2 - 4) % 3 = 2: the last two input positions are never read.
	{"conv1d", "stride3-ragged-pad1-k4", []int{2, 3, 13}, []int{4, 3, 4}, graph.Attrs{"stride": graph.Ints(3), "padding": graph.Ints(1)}, true},
	{"conv1d", "groups2-stride2-dil2-ragged", []int{1, 4, 18}, []int{6, 2, 3}, graph.Attrs{"stride": graph.Ints(2), "dilation": graph.Ints(2), "padding": graph.Ints(2), "groups": graph.Int(2)}, false},
	// padding 3 > dilation*(K-1) = 1
	{"conv1d", "pad3-beyond-k2", []int{2, 2, 5}, []int{3, 2, 2}, graph.Attrs{"padding": graph.Ints(3)}, true},
	// windows at padded 0 and 4 of 8: x[0] is never read
	{"conv1d", "stride4-skips-input", []int{1, 1, 2}, []int{2, 1, 1}, graph.Attrs{"stride": graph.Ints(4), "padding": graph.Ints(3)}, true},
	{"conv1d", "depthwise-stride2-ragged", []int{2, 3, 10}, []int{3, 1, 3}, graph.Attrs{"stride": graph.Ints(2), "groups": graph.Int(3)}, false},
	{"conv1d", "depthwise-multiplier2-dil3", []int{1, 2, 9}, []int{4, 1, 2}, graph.Attrs{"dilation": graph.Ints(3), "groups": graph.Int(2)}, true},
	// h: (10 + 2 - 3) % 2 = 1, w: (12 - 2) % 3 = 1
	{"conv2d", "k3x2-stride2x3-ragged", []int{2, 3, 10, 12}, []int{4, 3, 3, 2}, graph.Attrs{"stride": graph.Ints(2, 3), "padding": graph.Ints(1, 0)}, true},
	// h: padding 3 > dilation*(K-1) = 2
	{"conv2d", "groups2-k2x3-dil2x1-pad3x2", []int{1, 4, 6, 7}, []int{6, 2, 2, 3}, graph.Attrs{"stride": graph.Ints(1, 2), "dilation": graph.Ints(2, 1), "padding": graph.Ints(3, 2), "groups": graph.Int(2)}, true},
	{"conv2d", "depthwise-k3x1-stride2x1-ragged", []int{2, 3, 8, 5}, []int{3, 1, 3, 1}, graph.Attrs{"stride": graph.Ints(2, 1), "padding": graph.Ints(0, 1), "groups": graph.Int(3)}, false},
}

// ConvCases returns a gradient case of every convGeoms entry of the given ops in each dtype,
// with inputs uniform in [-0.5, 0.5) as the golden catalogue's conv cases have.
func ConvCases(ops []string, dts []numerics.DType) ([]Case, error) {
	half := harness.Dist{Kind: harness.DistUniform, Lo: -0.5, Hi: 0.5}
	var out []Case
	for _, dt := range dts {
		for _, c := range convGeoms {
			if !contains(ops, c.op) {
				continue
			}
			name := fmt.Sprintf("%s/%s/grad-%s", c.op, dt, c.tag)
			seed := harness.SubSeed(26, name)
			b := graph.NewBuilder("conv_grad")
			in := map[string]*tensor.Tensor{}
			input := func(n string, shape []int) *graph.Value {
				in[n] = harness.RandomTensor(dt, shape, harness.SubSeed(seed, n), half)
				return b.Input(n, dt, shape...)
			}
			args := []*graph.Value{input("x", c.x), input("w", c.w)}
			if c.bias {
				args = append(args, input("b", c.w[:1]))
			}
			b.Output(b.Op(c.op, c.attrs, args...))
			g, err := b.Build()
			if err != nil {
				return nil, fmt.Errorf("gradients: %s: %w", name, err)
			}
			out = append(out, Case{Name: name, Op: c.op, DType: dt, Graph: g, Inputs: in, Seed: seed})
		}
	}
	return out, nil
}
