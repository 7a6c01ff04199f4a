package graph

import (
	"fmt"
	"slices"
	"sort"

	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

// OpKind groups ops by how they are computed; rewrites and lowerings read it.
type OpKind uint8

const (
	KindUnary     OpKind = iota + 1 // elementwise, one input
	KindBinary                      // elementwise, two inputs, numpy broadcasting
	KindCast                        // elementwise dtype conversion
	KindReduce                      // reduction over axes
	KindRowwise                     // softmax, log_softmax, layernorm, rmsnorm: along one axis
	KindMatmul                      // matmul, batch_matmul
	KindAttention                   // scaled dot-product attention
	KindMovement                    // transpose, reshape, slice, concat: no arithmetic
	KindLoss                        // mse_loss
)

// AttrSpec declares one attribute of an op. A nil Default makes it required unless Optional.
type AttrSpec struct {
	Name     string
	Kind     AttrKind
	Default  *Attr
	Optional bool // may be absent with no default (e.g. a tile hint)
	Doc      string
}

// OpDef is the registry entry of one op: the only place that says what the op accepts.
type OpDef struct {
	Name    string
	Kind    OpKind
	MinArgs int
	MaxArgs int // -1: variadic
	Attrs   []AttrSpec
	DTypes  []numerics.DType // dtypes accepted for the inputs (all inputs share one dtype unless noted)
	// Infer checks inputs and attributes and returns the output type. It may assume arity,
	// attribute kinds and input dtypes were already checked against the declaration above.
	Infer func(n *Node, in []Type) (Type, error)
	Doc   string
}

// Arity renders the accepted argument count for listings ("2", "1+").
func (d *OpDef) Arity() string {
	switch {
	case d.MaxArgs < 0:
		return fmt.Sprintf("%d+", d.MinArgs)
	case d.MinArgs == d.MaxArgs:
		return fmt.Sprint(d.MinArgs)
	}
	return fmt.Sprintf("%d-%d", d.MinArgs, d.MaxArgs)
}

// Supports reports whether the op accepts inputs of dtype dt.
func (d *OpDef) Supports(dt numerics.DType) bool { return slices.Contains(d.DTypes, dt) }

var registry = map[string]*OpDef{}

func register(d *OpDef) {
	if _, dup := registry[d.Name]; dup {
		panic("graph: op registered twice: " + d.Name)
	}
	registry[d.Name] = d
}

// Lookup returns the op definition for name.
func Lookup(name string) (*OpDef, bool) { d, ok := registry[name]; return d, ok }

// Ops returns every registered op, sorted by name.
func Ops() []*OpDef {
	out := make([]*OpDef, 0, len(registry))
	for _, d := range registry {
		out = append(out, d)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// InferNode checks a node against its op's declaration and returns its output type.
// Errors are coded and name the node, the op and the input types.
func InferNode(n *Node) (Type, error) {
	d, ok := registry[n.Op]
	if !ok {
		return Type{}, errs.New(errs.Unsupported, "%s: unknown op %q (see `tessera-qa ops`)", nodeRef(n), n.Op)
	}
	in := make([]Type, len(n.Inputs))
	for i, v := range n.Inputs {
		in[i] = v.Type
	}
	if len(in) < d.MinArgs || (d.MaxArgs >= 0 && len(in) > d.MaxArgs) {
		return Type{}, errs.New(errs.Input, "%s: %s takes %s inputs, got %d", nodeRef(n), n.Op, d.Arity(), len(in))
	}
	for _, name := range n.Attrs.Names() { // sorted, so the error reported is always the same
		a := n.Attrs[name]
		spec := d.attrSpec(name)
		if spec == nil {
			return Type{}, errs.New(errs.Input, "%s: %s has no attribute %q", nodeRef(n), n.Op, name)
		}
		if a.Kind != spec.Kind {
			return Type{}, errs.New(errs.Input, "%s: attribute %s of %s must be %s, got %s", nodeRef(n), name, n.Op, spec.Kind, a.Kind)
		}
	}
	for _, s := range d.Attrs {
		if _, set := n.Attrs[s.Name]; !set && s.Default == nil && !s.Optional {
			return Type{}, errs.New(errs.Input, "%s: %s needs attribute %s (%s)", nodeRef(n), n.Op, s.Name, s.Kind)
		}
	}
	for i, t := range in {
		if !d.Supports(t.DType) {
			return Type{}, errs.New(errs.DType, "%s: %s does not accept %s (input %d); accepts %v", nodeRef(n), n.Op, t.DType, i, d.DTypes)
		}
		if i > 0 && t.DType != in[0].DType {
			return Type{}, errs.New(errs.DType, "%s: inputs of %s must share one dtype, got %s and %s", nodeRef(n), n.Op, in[0], t)
		}
	}
	out, err := d.Infer(n, in)
	if err != nil {
		return Type{}, errs.Wrap(errs.Shape, err, "%s: %s(%s)", nodeRef(n), n.Op, typeList(in))
	}
	return out, nil
}

func (d *OpDef) attrSpec(name string) *AttrSpec {
	for i := range d.Attrs {
		if d.Attrs[i].Name == name {
			return &d.Attrs[i]
		}
	}
	return nil
}

func nodeRef(n *Node) string {
	if n.Output != nil {
		return "node %" + n.Output.Name
	}
	return "node " + n.Op
}

func typeList(ts []Type) string {
	s := ""
	for i, t := range ts {
		if i > 0 {
			s += ", "
		}
		s += t.String()
	}
	return s
}
