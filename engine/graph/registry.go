package graph

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/tessera-qa/tessera-qa/engine/dist/mesh"
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/failpoint"
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
	KindMatmul                      // matmul, batch_matmul, scaled_matmul (b [N,K], scales)
	KindAttention                   // scaled dot-product attention
	KindMovement                    // transpose, reshape, slice, concat: no arithmetic
	KindLoss                        // mse_loss
	// KindCollective: ops over the graph's mesh (all_reduce, all_gather, reduce_scatter,
	// broadcast, all_to_all, send, recv, chunk). Their shape rules read axis sizes, and they run
	// on the host between kernels (engine/dist/run), never inside a Tile IR kernel.
	KindCollective
	// KindAttentionGrad: attention_lse and attention_grad, the saved statistics and the fused
	// backward of attention that autodiff emits.
	KindAttentionGrad
	// KindSpectral: the one-axis FFTs (fft, ifft, rfft, irfft), lowered to a Tile IR FFT per
	// row. The 2-D forms and the complex helpers (complex_mul, conj) are KindComplex: the
	// compiler's desugar pass rewrites them into one-axis FFTs and elementwise/movement ops.
	KindSpectral
	KindComplex
	// KindConv: conv1d and conv2d (ops_conv.go), computed directly by one Tile IR kernel of
	// per-tap matrix products; the compiler's conv-fft pass may rewrite large kernels into
	// rfft o complex_mul o irfft first.
	KindConv
)

var kindNames = map[OpKind]string{
	KindUnary: "unary", KindBinary: "binary", KindCast: "cast", KindReduce: "reduce",
	KindRowwise: "rowwise", KindMatmul: "matmul", KindAttention: "attention",
	KindMovement: "movement", KindLoss: "loss", KindCollective: "collective",
	KindAttentionGrad: "attention_grad", KindSpectral: "spectral", KindComplex: "complex",
	KindConv: "conv",
}

// String names the kind as `tessera-qa ops` prints it; a kind without a name prints as kindN
// (a test fails on one).
func (k OpKind) String() string {
	if s, ok := kindNames[k]; ok {
		return s
	}
	return fmt.Sprintf("kind%d", uint8(k))
}

// AttrSpec declares one attribute of an op. A nil Default makes it required unless Optional.
type AttrSpec struct {
	Name     string
	Kind     AttrKind
	Default  *Attr
	Optional bool // may be absent with no default (e.g. a tile hint)
	Doc      string
	// Values lists the values a string attribute may take (nil: any string). The verifier
	// refuses others with E_INPUT naming the node and these values. Aliases maps other
	// accepted spellings (PyTorch's, where the meaning is the same) to one of Values;
	// Node.StringAttr reads an alias as its value, the printer keeps what was written.
	Values  []string
	Aliases map[string]string
}

// allows reports whether a (of the spec's kind) is an allowed value. A dtype attribute
// must name a valid dtype.
func (s *AttrSpec) allows(a Attr) bool {
	switch {
	case a.Kind == AttrDType:
		return a.DType.Valid()
	case s.Values == nil || a.Kind != AttrString:
		return true
	}
	_, alias := s.Aliases[a.Str]
	return alias || slices.Contains(s.Values, a.Str)
}

// Allowed renders the allowed values for messages and listings: "erf", "tanh" (also "none" = "erf").
func (s *AttrSpec) Allowed() string {
	if s.Kind == AttrDType {
		return fmt.Sprint(numerics.All)
	}
	var b strings.Builder
	for i, v := range s.Values {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%q", v)
	}
	for i, k := range slices.Sorted(maps.Keys(s.Aliases)) {
		if i == 0 {
			b.WriteString(" (also ")
		} else {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%q = %q", k, s.Aliases[k])
		if i == len(s.Aliases)-1 {
			b.WriteString(")")
		}
	}
	return b.String()
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
	// InferMesh replaces Infer for ops whose rule needs the graph's mesh (KindCollective).
	// m is never nil when it is called.
	InferMesh func(n *Node, in []Type, m *mesh.Mesh) (Type, error)
	// SharedDTypeArgs, when > 0, says that only the first SharedDTypeArgs inputs are checked
	// against DTypes and share one dtype; Infer checks the rest (attention_grad's f32 lse).
	SharedDTypeArgs int
	// Grad is the op's vector-Jacobian rule (vjp.go); nil means no gradient (NoGrad says why).
	Grad   *GradRule
	NoGrad string
	Doc    string
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

// Ops returns every op a single device runs (every kind but KindCollective), sorted by name:
// the set each backend, golden file and oracle covers. CollectiveOps lists the rest.
func Ops() []*OpDef { return opsWhere(func(d *OpDef) bool { return d.Kind != KindCollective }) }

// CollectiveOps returns the ops that need a mesh (KindCollective), sorted by name.
func CollectiveOps() []*OpDef {
	return opsWhere(func(d *OpDef) bool { return d.Kind == KindCollective })
}

// IsCollective reports whether op is a registered mesh op.
func IsCollective(op string) bool { d, ok := registry[op]; return ok && d.Kind == KindCollective }

func opsWhere(keep func(*OpDef) bool) []*OpDef {
	out := make([]*OpDef, 0, len(registry))
	for _, d := range registry {
		if keep(d) {
			out = append(out, d)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// InferNode checks a node of a graph without a mesh against its op's declaration and returns
// its output type. Errors are coded and name the node, the op and the input types.
func InferNode(n *Node) (Type, error) { return InferNodeIn(n, nil) }

// InferNodeIn is InferNode for a node of a graph over mesh m (nil: no mesh). Collective ops
// need m; every other op ignores it.
func InferNodeIn(n *Node, m *mesh.Mesh) (Type, error) {
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
		if !spec.allows(a) && !failpoint.Enabled(failpoint.GraphAttrValuesUnchecked) {
			return Type{}, errs.New(errs.Input, "%s: %s %s=%s is not allowed; allowed: %s", nodeRef(n), n.Op, name, FormatAttr(a), spec.Allowed())
		}
	}
	for _, s := range d.Attrs {
		if _, set := n.Attrs[s.Name]; !set && s.Default == nil && !s.Optional {
			return Type{}, errs.New(errs.Input, "%s: %s needs attribute %s (%s)", nodeRef(n), n.Op, s.Name, s.Kind)
		}
	}
	for i, t := range in {
		if d.SharedDTypeArgs > 0 && i >= d.SharedDTypeArgs {
			break
		}
		if !d.Supports(t.DType) {
			return Type{}, errs.New(errs.DType, "%s: %s does not accept %s (input %d); accepts %v", nodeRef(n), n.Op, t.DType, i, d.DTypes)
		}
		if i > 0 && t.DType != in[0].DType {
			return Type{}, errs.New(errs.DType, "%s: inputs of %s must share one dtype, got %s and %s", nodeRef(n), n.Op, in[0], t)
		}
	}
	// Every op that accumulates takes the same accumulators: a float for float inputs, an int
	// for ints (issue 21: softmax, the norms and mse_loss accepted accum=int32 or bool on f32).
	if d.attrSpec("accum") != nil && len(in) > 0 {
		if err := checkAccum(n, in[0].DType); err != nil {
			return Type{}, errs.New(errs.DType, "%s: %s: %v", nodeRef(n), n.Op, err)
		}
	}
	var out Type
	var err error
	switch {
	case d.InferMesh != nil && m == nil:
		return Type{}, errs.New(errs.Input, "%s: %s needs the graph's mesh (a `mesh dp=2,tp=2` line, or Builder.Mesh)", nodeRef(n), n.Op)
	case d.InferMesh != nil:
		out, err = d.InferMesh(n, in, m)
	default:
		out, err = d.Infer(n, in)
	}
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
