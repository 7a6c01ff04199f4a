// Package training is the reference training workload (`tessera-qa train`): a small model whose
// forward graph is differentiated by engine/autodiff, compiled once and stepped with an
// optimizer from engine/optim, data-parallel over a dist.Comm (gradients averaged in
// deterministic mode, so the bits do not depend on arrival order), with two-phase checkpoints
// from engine/checkpoint. Same seed, same world, same device class: the same loss curve and
// final parameters bit for bit, also across a kill and a resume.
package training

import (
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
	"github.com/tessera-qa/tessera-qa/harness"
)

// Models lists the models Build knows.
var Models = []string{"mlp", "transformer-block", FNOModel}

// Dims sizes a model. Batch is the global batch (rows, or sequences for the transformer).
type Dims struct {
	Batch, In, Hidden, Out int // mlp
	Seq, Width, Heads, FFN int // transformer-block (Batch sequences of Seq tokens)
	// fno (fno.go): Batch fields of In channels on a GridH x GridW grid, Hidden channels,
	// Modes1 x Modes2 kept modes per corner, Out channels; CPRank > 0 factorizes the spectral
	// weights.
	GridH, GridW, Modes1, Modes2, CPRank int
}

// DefaultDims are small enough for a CPU run of a few seconds.
func DefaultDims(model string) Dims {
	switch model {
	case "transformer-block":
		return Dims{Batch: 4, Seq: 16, Width: 32, Heads: 4, FFN: 64}
	case FNOModel:
		return fnoDims
	}
	return Dims{Batch: 32, In: 32, Hidden: 64, Out: 16}
}

// Model is one rank's forward graph: inputs are the parameters (Params, in order), then x
// and target (this rank's slice of the batch); the one output is the scalar loss.
type Model struct {
	Name   string
	DType  numerics.DType
	Dims   Dims
	Graph  *graph.Graph
	Params []string
	fanIn  map[string]int // weights: init scale 1/sqrt(fanIn); biases 0; norm gains 1
	gains  map[string]bool
}

// Build makes the model for a per-rank batch of localBatch (rows or sequences).
func Build(name string, dt numerics.DType, d Dims, localBatch int) (*Model, error) {
	m := &Model{Name: name, DType: dt, Dims: d, fanIn: map[string]int{}, gains: map[string]bool{}}
	b := graph.NewBuilder("train_" + strings.ReplaceAll(name, "-", "_"))
	w := func(n string, fan int, shape ...int) *graph.Value {
		m.Params = append(m.Params, n)
		if fan > 0 {
			m.fanIn[n] = fan
		}
		return b.Input(n, dt, shape...)
	}
	gain := func(n string, width int) *graph.Value { m.gains[n] = true; return w(n, 0, width) }
	mm := func(x, y *graph.Value) *graph.Value { return b.Op("matmul", nil, x, y) }
	add := func(x, y *graph.Value) *graph.Value { return b.Op("add", nil, x, y) }
	switch name {
	case "mlp":
		w1, b1 := w("w1", d.In, d.In, d.Hidden), w("b1", 0, d.Hidden)
		w2, b2 := w("w2", d.Hidden, d.Hidden, d.Out), w("b2", 0, d.Out)
		x, t := b.Input("x", dt, localBatch, d.In), b.Input("target", dt, localBatch, d.Out)
		h := b.Op("gelu", nil, add(mm(x, w1), b1))
		b.Named("loss", "mse_loss", nil, add(mm(h, w2), b2), t)
	case "transformer-block":
		if d.Heads < 1 || d.Width%d.Heads != 0 {
			return nil, errs.New(errs.Input, "train: width %d is not a multiple of %d heads", d.Width, d.Heads)
		}
		W, S, H, D, rows := d.Width, d.Seq, d.Heads, d.Width/d.Heads, localBatch*d.Seq
		g1, be1 := gain("ln1_g", W), w("ln1_b", 0, W)
		wq, wk, wv, wo := w("wq", W, W, W), w("wk", W, W, W), w("wv", W, W, W), w("wo", W, W, W)
		g2, be2 := gain("ln2_g", W), w("ln2_b", 0, W)
		w1, b1 := w("w1", W, W, d.FFN), w("b1", 0, d.FFN)
		w2, b2 := w("w2", d.FFN, d.FFN, W), w("b2", 0, W)
		x, t := b.Input("x", dt, rows, W), b.Input("target", dt, rows, W)
		heads := func(v *graph.Value) *graph.Value { // [rows, W] -> [B, H, S, D]
			return b.Op("transpose", graph.Attrs{"perm": graph.Ints(0, 2, 1, 3)},
				b.Op("reshape", graph.Attrs{"shape": graph.Ints(int64(localBatch), int64(S), int64(H), int64(D))}, v))
		}
		h := b.Op("layernorm", nil, x, g1, be1)
		a := b.Op("attention", graph.Attrs{"causal": graph.Bool(true)}, heads(mm(h, wq)), heads(mm(h, wk)), heads(mm(h, wv)))
		a = b.Op("reshape", graph.Attrs{"shape": graph.Ints(int64(rows), int64(W))}, b.Op("transpose", graph.Attrs{"perm": graph.Ints(0, 2, 1, 3)}, a))
		r1 := add(x, mm(a, wo))
		f := add(mm(b.Op("gelu", nil, add(mm(b.Op("layernorm", nil, r1, g2, be2), w1), b1)), w2), b2)
		b.Named("loss", "mse_loss", nil, add(r1, f), t)
	case FNOModel:
		if err := buildFNO(b, dt, d, localBatch, w); err != nil {
			return nil, err
		}
	default:
		return nil, errs.New(errs.Input, "train: unknown model %q (have %v)", name, Models)
	}
	b.Output(b.Graph().Value("loss"))
	g, err := b.Build()
	if err != nil {
		return nil, errs.Wrap(errs.Internal, err, "train: model %s", name)
	}
	m.Graph = g
	return m, nil
}

// Init draws the initial parameters from seed: weights N(0, 1/fanIn), biases 0, gains 1.
func (m *Model) Init(seed uint64) map[string]*tensor.Tensor {
	out := map[string]*tensor.Tensor{}
	for _, name := range m.Params {
		v := m.Graph.Value(name)
		t := tensor.New(m.DType, slices.Clone(v.Type.Shape))
		switch {
		case m.fanIn[name] > 0:
			s := 1 / math.Sqrt(float64(m.fanIn[name]))
			t = harness.RandomTensor(m.DType, v.Type.Shape, harness.SubSeed(seed, "param/"+name), harness.Dist{Kind: harness.DistNormal, Lo: -s, Hi: s})
		case m.gains[name]:
			for i := range t.Len() {
				t.SetFloat64(i, 1)
			}
		}
		out[name] = t
	}
	return out
}

// Batch returns rank's slice (of world) of step's global batch: x drawn from seed and step,
// target a fixed teacher, tanh(x T) per row with T drawn from seed, computed in float64.
func (m *Model) Batch(seed uint64, step, rank, world int) (x, target *tensor.Tensor) {
	if m.Name == FNOModel {
		return m.fnoBatch(seed, step, rank, world)
	}
	xv, tv := m.Graph.Value("x").Type, m.Graph.Value("target").Type
	rows, in, out := xv.Shape[0], xv.Shape[1], tv.Shape[1]
	global := harness.RandomTensor(numerics.F64, []int{rows * world, in}, harness.SubSeed(seed, "batch/"+strconv.Itoa(step)), harness.Dist{Kind: harness.DistNormal})
	teacher := harness.RandomTensor(numerics.F64, []int{in, out}, harness.SubSeed(seed, "teacher"), harness.Dist{Kind: harness.DistNormal})
	gx, tw := global.Float64s(), teacher.Float64s()
	x, target = tensor.New(m.DType, []int{rows, in}), tensor.New(m.DType, []int{rows, out})
	for r := range rows {
		g := rank*rows + r
		for c := range in {
			x.SetFloat64(r*in+c, gx[g*in+c])
		}
		for o := range out {
			var s float64
			for c := range in {
				s += gx[g*in+c] * tw[c*out+o]
			}
			target.SetFloat64(r*out+o, math.Tanh(s/math.Sqrt(float64(in))))
		}
	}
	return x, target
}
