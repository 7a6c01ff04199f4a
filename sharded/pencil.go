package sharded

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"strings"

	"github.com/tessera-qa/tessera-qa/engine/backend"
	"github.com/tessera-qa/tessera-qa/engine/dist"
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/engine/ref"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
	"github.com/tessera-qa/tessera-qa/harness"
	"github.com/tessera-qa/tessera-qa/spectral"
)

// The sharded 2-D FFT by the pencil method (issue 26, item 6). The shard pass has the rule
// (engine/compiler/shard.go, spectral): fft2 over row blocks compiles to the local FFT along
// the rows, one all_to_all to column blocks and the local FFT along the columns. What is
// checked here: the assembled result has the one-rank fft2's bits (each rank transforms the
// same whole lines with the same kernel, and all_to_all only moves bytes), it is within the
// f32 bound of the float64 definition (engine/ref, both axes without rounding between), and
// the round trips come back to the input.

// PencilAxis is the mesh axis the pencil cases shard over.
const PencilAxis = "sp"

// Pencil is a chain of 2-D FFTs over one input whose dim Dim is block-sharded over
// PencilAxis on World ranks.
type Pencil struct {
	Ops   []string // applied in order: {"fft2"}, or a round trip {"fft2", "ifft2"}
	Shape []int    // the input's shape; a complex input ends in 2
	DType numerics.DType
	World int
	Dim   int    // the input's sharded dim
	Norm  string // "" is backward
	Seed  uint64
}

// Name is "fft2+ifft2/f32[12,24,2]/dim0/sp=3" (plus the norm when not backward).
func (p Pencil) Name() string {
	s := fmt.Sprintf("%s/%s/dim%d/%s=%d", strings.Join(p.Ops, "+"), graph.Type{DType: p.DType, Shape: p.Shape}, p.Dim, PencilAxis, p.World)
	if p.Norm != "" {
		s += "/" + p.Norm
	}
	return s
}

// Layout is the input's layout text: Dim sharded, the rest replicated.
func (p Pencil) Layout() string {
	d := make([]string, len(p.Shape))
	for i := range d {
		d[i] = "R"
	}
	d[p.Dim] = "S(" + PencilAxis + ")"
	return "[" + strings.Join(d, ",") + "]"
}

// inverse2 pairs each 2-D transform with its inverse.
var inverse2 = map[string]string{"fft2": "ifft2", "ifft2": "fft2", "rfft2": "irfft2"}

// RoundTrip reports whether the chain is a transform followed by its inverse.
func (p Pencil) RoundTrip() bool {
	return len(p.Ops) == 2 && inverse2[p.Ops[0]] == p.Ops[1]
}

// Graph is the chain over input %x.
func (p Pencil) Graph() (*graph.Graph, error) {
	b := graph.NewBuilder("pencil_" + strings.Join(p.Ops, "_"))
	v := b.Input("x", p.DType, p.Shape...)
	for _, op := range p.Ops {
		var attrs graph.Attrs
		if p.Norm != "" {
			attrs = graph.Attrs{"norm": graph.String(p.Norm)}
		}
		v = b.Op(op, attrs, v)
	}
	b.Output(v)
	return b.Build()
}

// Case is the chain as a sharded Case, its input uniform in [-0.5, 0.5) (FFTW's accuracy
// method, as the spectral suite draws them).
func (p Pencil) Case() (Case, error) {
	g, err := p.Graph()
	if err != nil {
		return Case{}, err
	}
	in, err := harness.RandomInputs(g, p.Seed, map[string]harness.Dist{"x": {Kind: harness.DistUniform, Lo: -0.5, Hi: 0.5}})
	if err != nil {
		return Case{}, err
	}
	return Case{Name: p.Name(), Graph: g, Mesh: fmt.Sprintf("%s=%d", PencilAxis, p.World),
		Layouts: map[string]string{"x": p.Layout()}, K: 1, Seed: p.Seed, Inputs: in}, nil
}

// PencilResult is what one run of a Pencil produced and how it compares.
type PencilResult struct {
	Outcome     *Outcome
	Collectives []string // the rank program's, "all_to_all:sp"
	SameBits    bool     // the assembled output is the one-rank output, byte for byte
	// RefL2 is the relative L2 error of the assembled output against the float64 definition
	// (ref.Run of the whole graph); Bound what the chain may have: spectral.Bound of the
	// transform size N0*N1 per op.
	RefL2, Bound float64
	// TripL2 is the relative L2 distance of the output from the input when the chain is a
	// round trip (a transform and its inverse); else NaN.
	TripL2 float64
}

// Problems lists every way the result fails its checks (none: it passes).
func (r *PencilResult) Problems() []string {
	var out []string
	if !r.SameBits {
		out = append(out, fmt.Sprintf("the assembled output's bits differ from the one-rank program's (collectives %v)", r.Collectives))
	}
	if !(r.RefL2 <= r.Bound) {
		out = append(out, fmt.Sprintf("relative L2 error %.3g against the float64 definition exceeds the bound %.3g", r.RefL2, r.Bound))
	}
	if !math.IsNaN(r.TripL2) && !(r.TripL2 <= r.Bound) {
		out = append(out, fmt.Sprintf("round trip: relative L2 distance %.3g from the input exceeds the bound %.3g", r.TripL2, r.Bound))
	}
	return out
}

// Run compiles and runs the pencil on in-process ranks in mode, and compares it with the
// one-rank program and the float64 definition.
func (p Pencil) Run(be backend.Backend, mode dist.Mode) (*PencilResult, error) {
	c, err := p.Case()
	if err != nil {
		return nil, err
	}
	o, err := c.Run(be, mode)
	if err != nil {
		return nil, err
	}
	want, err := ref.Run(c.Graph, o.Inputs)
	if err != nil {
		return nil, err
	}
	n, err := transformSize(c.Graph)
	if err != nil {
		return nil, err
	}
	res := &PencilResult{Outcome: o, Collectives: Collectives(o.Program), TripL2: math.NaN(),
		SameBits: bytes.Equal(o.Whole[0].Data, o.Single[0].Data),
		RefL2:    relL2(o.Whole[0], want[0]), Bound: float64(len(p.Ops)) * spectral.Bound(p.DType, n)}
	if p.RoundTrip() {
		res.TripL2 = relL2(o.Whole[0], o.Inputs["x"])
	}
	return res, nil
}

// transformSize is N0*N1 of the graph's first 2-D FFT (the largest error any op of the chain
// can have is that of a transform of that many points).
func transformSize(g *graph.Graph) (int, error) {
	n := g.Nodes[0]
	l, err := graph.FFT2Lengths(n, n.Inputs[0].Type)
	if err != nil {
		return 0, errs.Wrap(errs.Shape, err, "node %%%s (%s)", n.Output.Name, n.Op)
	}
	return l[0] * l[1], nil
}

// relL2 is ||got - want|| / ||want|| over every element (both parts of complex values).
func relL2(got, want *tensor.Tensor) float64 {
	if got.Len() != want.Len() {
		return math.Inf(1)
	}
	var num, den float64
	for i := range want.Len() {
		d := got.Float64(i) - want.Float64(i)
		num += d * d
		den += want.Float64(i) * want.Float64(i)
	}
	if den == 0 {
		return math.Inf(1)
	}
	return math.Sqrt(num / den)
}

// PencilCases are the checked forms: fft2, ifft2, rfft2, irfft2 and the two round trips over
// 1, 2, 3 and 4 ranks on shapes every world size divides, row blocks and column blocks, a
// batch dim (which takes the shard when it divides), the other norms, f64, and shapes whose
// other axis the world does not divide (the shard pass then gathers the rows instead of
// moving them: still the one-rank bits).
func PencilCases() []Pencil {
	var out []Pencil
	seed := uint64(26)
	add := func(p Pencil) {
		seed++
		p.Seed = seed
		if p.DType == 0 {
			p.DType = numerics.F32
		}
		out = append(out, p)
	}
	for _, w := range []int{1, 2, 3, 4} {
		add(Pencil{Ops: []string{"fft2"}, Shape: []int{12, 24, 2}, World: w, Dim: 0})
		add(Pencil{Ops: []string{"fft2"}, Shape: []int{12, 24, 2}, World: w, Dim: 1})
		add(Pencil{Ops: []string{"ifft2"}, Shape: []int{24, 12, 2}, World: w, Dim: 0})
		add(Pencil{Ops: []string{"fft2", "ifft2"}, Shape: []int{36, 12, 2}, World: w, Dim: 0})
		add(Pencil{Ops: []string{"rfft2"}, Shape: []int{12, 22}, World: w, Dim: 0})
		add(Pencil{Ops: []string{"irfft2"}, Shape: []int{12, 12, 2}, World: w, Dim: 0})
		add(Pencil{Ops: []string{"rfft2", "irfft2"}, Shape: []int{24, 22}, World: w, Dim: 0})
		add(Pencil{Ops: []string{"fft2"}, Shape: []int{2, 12, 36, 2}, World: w, Dim: 1})
	}
	add(Pencil{Ops: []string{"fft2", "ifft2"}, Shape: []int{12, 24, 2}, World: 4, Dim: 0, Norm: "ortho"})
	add(Pencil{Ops: []string{"fft2", "ifft2"}, Shape: []int{12, 24, 2}, World: 3, Dim: 0, Norm: "forward"})
	add(Pencil{Ops: []string{"fft2", "ifft2"}, Shape: []int{12, 24, 2}, DType: numerics.F64, World: 4, Dim: 0})
	add(Pencil{Ops: []string{"fft2"}, Shape: []int{12, 10, 2}, World: 4, Dim: 0})
	add(Pencil{Ops: []string{"fft2"}, Shape: []int{9, 7, 2}, World: 3, Dim: 0})
	if os.Getenv(PencilFullEnv) == "1" {
		add(Pencil{Ops: []string{"fft2", "ifft2"}, Shape: []int{1000, 120, 2}, World: 5, Dim: 0})
		for _, w := range []int{3, 5} {
			add(Pencil{Ops: []string{"rfft2", "irfft2"}, Shape: []int{240, 1998}, World: w, Dim: 0})
		}
		// 388 = 4 * 97: the column transforms are Bluestein's.
		add(Pencil{Ops: []string{"fft2", "ifft2"}, Shape: []int{388, 12, 2}, World: 4, Dim: 0})
	}
	return out
}

// PencilFullEnv set to 1 adds the nightly sizes to PencilCases: 3 and 5 ranks on larger
// smooth non-power-of-two sizes and Bluestein columns (about 40 s, most of it the float64
// definition; CI's set takes 0.3 s).
const PencilFullEnv = "TESSERA_PENCIL_FULL"
