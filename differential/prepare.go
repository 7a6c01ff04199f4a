package differential

import (
	"math"
	"slices"
	"strings"

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
	wrt       []*graph.Value // the inputs a gradient case differentiates (PrepareVJP)
}

// Prepare turns graph g and its inputs into a wire case named name. A graph whose fp8 values
// would need rounding between nodes (an fp8 intermediate computed by a non-movement op) is
// E_UNSUPPORTED: the oracle computes fp8 in f32 and only outputs are rounded back.
func Prepare(name string, g *graph.Graph, inputs map[string]*tensor.Tensor) (*Prepared, error) {
	return prepare(name, g, inputs, false)
}

// PrepareVJP is Prepare for a gradient case (WireGrad): cotangents holds one tensor per graph
// output with its dtype and shape, wrt names distinct float inputs of g. fp8 values always
// travel as f32 (FP8Upcast, movement-only graphs too: bits cannot be differentiated), and fp8
// gradients are rounded back by numerics.Encode like fp8 outputs. A wrt name that is not an
// input, or named twice, or a missing cotangent is E_INPUT; an integer or bool wrt input or a
// cotangent of another dtype E_DTYPE; a cotangent of another shape E_SHAPE. Each names the
// value. Several prepared cases can go to the oracle in one Eval (batching); DecodeVJP reads
// each answer.
func PrepareVJP(name string, g *graph.Graph, inputs map[string]*tensor.Tensor, cotangents []*tensor.Tensor, wrt []string) (*Prepared, error) {
	p, err := prepare(name, g, inputs, true)
	if err != nil {
		return nil, err
	}
	grad := &WireGrad{WRT: []string{}, Cotangents: []WireTensor{}}
	for i, w := range wrt {
		v := inputOf(g, w)
		switch {
		case v == nil:
			return nil, errs.New(errs.Input, "vjp of graph %s: wrt names %%%s, which is not an input (inputs: %s)", g.Name, w, valueNames(g.Inputs))
		case slices.Contains(wrt[:i], w):
			return nil, errs.New(errs.Input, "vjp of graph %s: wrt names %%%s twice", g.Name, w)
		case !isFloat(v.Type.DType):
			return nil, errs.New(errs.DType, "vjp of graph %s: wrt input %%%s is %s: only float inputs have gradients", g.Name, w, v.Type)
		}
		p.wrt = append(p.wrt, v)
		grad.WRT = append(grad.WRT, w)
	}
	if len(cotangents) != len(g.Outputs) {
		return nil, errs.New(errs.Input, "vjp of graph %s: %d cotangents for %d outputs (%s)", g.Name, len(cotangents), len(g.Outputs), valueNames(g.Outputs))
	}
	for i, v := range g.Outputs {
		c := cotangents[i]
		switch {
		case c == nil:
			return nil, errs.New(errs.Input, "vjp of graph %s: cotangent %d (for output %%%s) is missing", g.Name, i, v.Name)
		case c.DType != v.Type.DType:
			return nil, errs.New(errs.DType, "vjp of graph %s: cotangent %d (for output %%%s) is %s, the output is %s",
				g.Name, i, v.Name, wireType(c.DType.String(), c.Shape), v.Type)
		case !slices.Equal(c.Shape, v.Type.Shape):
			return nil, errs.New(errs.Shape, "vjp of graph %s: cotangent %d (for output %%%s) is %s, the output is %s",
				g.Name, i, v.Name, wireType(c.DType.String(), c.Shape), v.Type)
		case len(c.Data) != tensor.NumElems(c.Shape)*c.DType.Size():
			return nil, errs.New(errs.Input, "vjp of graph %s: cotangent %d (for output %%%s) holds %d bytes, %s needs %d",
				g.Name, i, v.Name, len(c.Data), v.Type, tensor.NumElems(c.Shape)*c.DType.Size())
		}
		grad.Cotangents = append(grad.Cotangents, p.wireTensor(v.Name, c))
	}
	p.Case.Grad = grad
	return p, nil
}

func isFloat(dt numerics.DType) bool { return slices.Contains(numerics.Floats, dt) }

func inputOf(g *graph.Graph, name string) *graph.Value {
	for _, v := range g.Inputs {
		if v.Name == name {
			return v
		}
	}
	return nil
}

func valueNames(vs []*graph.Value) string {
	var names []string
	for _, v := range vs {
		names = append(names, "%"+v.Name)
	}
	return strings.Join(names, ", ")
}

func prepare(name string, g *graph.Graph, inputs map[string]*tensor.Tensor, grad bool) (*Prepared, error) {
	if err := graph.Verify(g); err != nil {
		return nil, err
	}
	if err := graph.CheckInputs(g, inputs); err != nil {
		return nil, err
	}
	p := &Prepared{Transport: transportOf(g), outputs: g.Outputs}
	if grad && p.Transport == FP8Bits {
		p.Transport = FP8Upcast
	}
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
	return p.decode("output", r.Outputs, p.outputs)
}

// DecodeVJP checks the answer to a gradient case (PrepareVJP) and returns its outputs and one
// gradient per wrt input, in the input's dtype (fp8 gradients rounded by numerics.Encode).
func (p *Prepared) DecodeVJP(r WireResult) (outs, grads []*tensor.Tensor, err error) {
	if p.Case.Grad == nil {
		return nil, nil, errs.New(errs.Input, "case %s is not a gradient case", p.Case.Name)
	}
	if outs, err = p.Decode(r); err != nil {
		return nil, nil, err
	}
	if grads, err = p.decode("gradient", r.Grads, p.wrt); err != nil {
		return nil, nil, err
	}
	return outs, grads, nil
}

// decode reads wire tensors that must match values one to one.
func (p *Prepared) decode(what string, ws []WireTensor, values []*graph.Value) ([]*tensor.Tensor, error) {
	if len(ws) != len(values) {
		return nil, errs.New(errs.Input, "case %s: oracle returned %d %ss, want %d", p.Case.Name, len(ws), what, len(values))
	}
	out := make([]*tensor.Tensor, len(values))
	for i, v := range values {
		w := ws[i]
		if w.Name != v.Name {
			return nil, errs.New(errs.Input, "case %s: oracle %s %d is %%%s, want %%%s", p.Case.Name, what, i, w.Name, v.Name)
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
