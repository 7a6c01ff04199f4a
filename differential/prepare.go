package differential

import (
	"math"
	"slices"

	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
)

// Transport is how a graph's fp8 values travel to the oracle. Frameworks without float8
// (torch 1.13) cannot hold them, and torch's own float8 casts do not saturate (docs/
// differential.md), so fp8 never travels as fp8.
type Transport uint8

const (
	// Native: the graph has no fp8 value; every tensor travels as its own dtype.
	Native Transport = iota
	// FP8Upcast: fp8 values travel as f32 (exact: f32 holds every fp8 value), the oracle
	// computes in f32, and Decode rounds fp8 outputs with numerics.Encode, which is how the
	// engine itself computes fp8 ops.
	FP8Upcast
	// FP8Bits: a graph of movement ops only moves fp8 bit patterns as uint8, exactly.
	FP8Bits
)

// Note says how fp8 was handled, for the report's mode column; "" for Native.
func (t Transport) Note() string {
	switch t {
	case FP8Upcast:
		return "fp8 as f32, output rounded by numerics.Encode"
	case FP8Bits:
		return "fp8 moved as uint8 bits"
	}
	return ""
}

// Prepared is a graph turned into a wire case, with what is needed to read the answer back.
type Prepared struct {
	Case      WireCase
	Transport Transport
	outputs   []*graph.Value
}

// Prepare turns graph g and its inputs into a wire case named name. A graph whose fp8 values
// would need rounding between nodes (an fp8 intermediate computed by a non-movement op) is
// E_UNSUPPORTED: the oracle computes fp8 in f32 and only outputs are rounded back.
func Prepare(name string, g *graph.Graph, inputs map[string]*tensor.Tensor) (*Prepared, error) {
	if err := graph.Verify(g); err != nil {
		return nil, err
	}
	if err := graph.CheckInputs(g, inputs); err != nil {
		return nil, err
	}
	p := &Prepared{Transport: transportOf(g), outputs: g.Outputs}
	if err := p.checkFP8(g); err != nil {
		return nil, err
	}
	c := WireCase{Name: name, Inputs: []WireTensor{}, Nodes: []WireNode{}, Outputs: []string{}}
	for _, v := range g.Inputs {
		c.Inputs = append(c.Inputs, p.wireTensor(v.Name, inputs[v.Name]))
	}
	for _, n := range g.Nodes {
		wn := WireNode{Op: n.Op, Output: n.Output.Name, DType: p.wireDType(n.Output.Type.DType),
			Shape: append([]int{}, n.Output.Type.Shape...), Inputs: []string{}, Attrs: map[string]any{}}
		for _, in := range n.Inputs {
			wn.Inputs = append(wn.Inputs, in.Name)
		}
		if err := p.attrs(n, wn.Attrs); err != nil {
			return nil, err
		}
		c.Nodes = append(c.Nodes, wn)
	}
	for _, v := range g.Outputs {
		c.Outputs = append(c.Outputs, v.Name)
	}
	p.Case = c
	return p, nil
}

func isFP8(dt numerics.DType) bool { return dt == numerics.F8E4M3 || dt == numerics.F8E5M2 }

func transportOf(g *graph.Graph) Transport {
	fp8, moves := false, true
	for _, v := range g.Inputs {
		fp8 = fp8 || isFP8(v.Type.DType)
	}
	for _, n := range g.Nodes {
		fp8 = fp8 || isFP8(n.Output.Type.DType)
		moves = moves && n.Def() != nil && n.Def().Kind == graph.KindMovement
	}
	switch {
	case !fp8:
		return Native
	case moves:
		return FP8Bits
	}
	return FP8Upcast
}

func (p *Prepared) checkFP8(g *graph.Graph) error {
	if p.Transport != FP8Upcast {
		return nil
	}
	for _, n := range g.Nodes {
		if isFP8(n.Output.Type.DType) && n.Def().Kind != graph.KindMovement && !slices.Contains(g.Outputs, n.Output) {
			return errs.New(errs.Unsupported, "node %%%s = %s: an fp8 intermediate would need fp8 rounding inside the oracle, which computes fp8 in f32 and rounds only outputs",
				n.Output.Name, n.Op)
		}
	}
	return nil
}

// wireDType is the name dt travels under.
func (p *Prepared) wireDType(dt numerics.DType) string {
	switch {
	case !isFP8(dt):
		return dt.String()
	case p.Transport == FP8Bits:
		return WireUint8
	}
	return numerics.F32.String()
}

func (p *Prepared) wireTensor(name string, t *tensor.Tensor) WireTensor {
	if !isFP8(t.DType) || p.Transport == Native {
		return WireOf(name, t)
	}
	if p.Transport == FP8Bits {
		return WireTensor{Name: name, DType: WireUint8, Shape: append([]int{}, t.Shape...), Data: t.Data}
	}
	return WireOf(name, tensor.FromFloat64(numerics.F32, t.Shape, t.Float64s()))
}

// attrs fills every attribute the op declares, defaults included, so that the oracle scripts
// never need to know a default.
func (p *Prepared) attrs(n *graph.Node, out map[string]any) error {
	for _, s := range n.Def().Attrs {
		if !n.HasAttr(s.Name) {
			continue
		}
		switch s.Kind {
		case graph.AttrInt:
			out[s.Name] = n.IntAttr(s.Name)
		case graph.AttrFloat:
			f := n.FloatAttr(s.Name)
			if math.IsNaN(f) || math.IsInf(f, 0) {
				return errs.New(errs.Input, "node %%%s = %s: attribute %s is %v, which JSON cannot carry", n.Output.Name, n.Op, s.Name, f)
			}
			out[s.Name] = f
		case graph.AttrBool:
			out[s.Name] = n.BoolAttr(s.Name)
		case graph.AttrInts:
			out[s.Name] = n.IntsAttr(s.Name)
		case graph.AttrString:
			out[s.Name] = n.StringAttr(s.Name)
		case graph.AttrDType:
			out[s.Name] = p.wireDType(n.DTypeAttr(s.Name))
		}
	}
	return nil
}

// Decode checks the oracle's answer and returns the outputs as engine tensors, fp8 outputs
// rounded back from f32 (FP8Upcast) or re-labelled from bytes (FP8Bits).
func (p *Prepared) Decode(r WireResult) ([]*tensor.Tensor, error) {
	if len(r.Outputs) != len(p.outputs) {
		return nil, errs.New(errs.Input, "case %s: oracle returned %d outputs, the graph has %d", p.Case.Name, len(r.Outputs), len(p.outputs))
	}
	out := make([]*tensor.Tensor, len(p.outputs))
	for i, v := range p.outputs {
		w := r.Outputs[i]
		if w.Name != v.Name {
			return nil, errs.New(errs.Input, "case %s: oracle output %d is %%%s, want %%%s", p.Case.Name, i, w.Name, v.Name)
		}
		dt, shape := v.Type.DType, v.Type.Shape
		upcast := isFP8(dt) && p.Transport == FP8Upcast
		size := dt.Size()
		if upcast {
			size = numerics.F32.Size()
		}
		data, err := wireData(w, p.wireDType(dt), shape, size)
		if err != nil {
			return nil, errs.Wrap(errs.Input, err, "case %s", p.Case.Name)
		}
		t := &tensor.Tensor{DType: dt, Shape: slices.Clone(shape), Data: data}
		if upcast {
			f := &tensor.Tensor{DType: numerics.F32, Shape: t.Shape, Data: data}
			t = tensor.New(dt, shape)
			for j := range t.Len() {
				t.SetBits(j, numerics.Encode(dt, f.Float64(j)))
			}
		}
		out[i] = t
	}
	return out, nil
}
