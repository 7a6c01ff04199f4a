package negative

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/tessera-qa/tessera-qa/engine/backend"
	_ "github.com/tessera-qa/tessera-qa/engine/backend/cpu" // registers the cpu backend
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/harness"
)

// Bases are the valid graphs OneEdit starts from: small (so that any edit stays cheap to run),
// between them every rule-heavy op (slice, matmul, softmax, reductions, broadcasting,
// transpose, reshape, concat, layernorm, attention, cast).
var Bases = []string{
	src("input %x: f32[4,6]", "input %w: f32[6,5]",
		"%s = slice(%x) {starts=[1,0], ends=[3,6]}", "%m = matmul(%s, %w)", "%y = softmax(%m) {axis=1}", "output %y"),
	src("input %x: f32[3,4]", "input %b: f32[4]",
		"%a = add(%x, %b)", "%r = reduce_sum(%a) {axes=[0], keepdims=true}", "%y = mul(%r, %x)", "output %y"),
	src("input %x: f32[2,3,4]", "input %z: f32[4,3,2]",
		"%t = transpose(%x) {perm=[2,1,0]}", "%c = concat(%t, %z) {axis=0}", "%y = reshape(%c) {shape=[8,-1]}", "output %y"),
	src("input %x: f32[3,8]", "input %g: f32[8]", "input %b: f32[8]",
		"%n = layernorm(%x, %g, %b) {eps=1e-5}", "%c = cast(%n) {to=f64}", "%y = reduce_max(%c) {axes=[-1]}", "output %y, %n"),
	src("input %q: f32[2,4,8]", "input %k: f32[2,5,8]", "input %v: f32[2,5,3]",
		"%a = attention(%q, %k, %v) {causal=true}", "%y = slice(%a) {starts=[0,1,0], ends=[2,4,3]}", "output %y"),
	src("input %a: f32[3,4]", "input %b: f32[5,4]",
		"%m = matmul(%a, %b) {transpose_b=true}", "%e = tanh(%m)", "%y = log_softmax(%e) {axis=-1}", "output %y"),
}

// Chooser returns a choice in [0, n) for n >= 1: rapid's draws, or a fuzzer's bytes.
type Chooser func(n int) int

// Edit is one edit of a base graph: what changed, and the text it gave.
type Edit struct {
	What string
	Text string
}

// typedNode matches a printed node line with its type; untyped, the parser infers the type,
// so that an edit upstream changes the types downstream instead of contradicting them.
var typedNode = regexp.MustCompile(`(?m)^(  %[A-Za-z0-9_.]+): [^ ]+ = `)

// untyped prints g with the node types left out.
func untyped(g *graph.Graph) string { return typedNode.ReplaceAllString(graph.Print(g), "$1 = ") }

// Edit kinds.
var editKinds = []string{"dim", "attr", "dtype", "operand"}

// OneEdit parses base (which must be valid), changes one thing in it as choose directs (one
// dim of an input, one attribute value, one input's dtype, one operand of a node) and prints
// the result without node types. The result may be valid or not: Judge says what must follow.
func OneEdit(base string, choose Chooser) (Edit, error) {
	g, err := graph.Parse(base, "base.tg")
	if err != nil {
		return Edit{}, fmt.Errorf("base graph: %w", err)
	}
	var what string
	switch editKinds[choose(len(editKinds))] {
	case "dim":
		v := g.Inputs[choose(len(g.Inputs))]
		if v.Type.Rank() == 0 {
			return OneEdit(base, choose)
		}
		i := choose(v.Type.Rank())
		old := v.Type.Shape[i]
		v.Type.Shape[i] = 1 + choose(9)
		what = fmt.Sprintf("input %%%s dim %d: %d -> %d", v.Name, i, old, v.Type.Shape[i])
	case "dtype":
		v := g.Inputs[choose(len(g.Inputs))]
		old := v.Type.DType
		v.Type.DType = numerics.All[choose(len(numerics.All))]
		what = fmt.Sprintf("input %%%s dtype %s -> %s", v.Name, old, v.Type.DType)
	case "operand":
		n := g.Nodes[choose(len(g.Nodes))]
		if len(n.Inputs) == 0 {
			return OneEdit(base, choose)
		}
		i := choose(len(n.Inputs))
		pool := slices.Clone(g.Inputs)
		for _, m := range g.Nodes {
			if m == n {
				break
			}
			pool = append(pool, m.Output)
		}
		old := n.Inputs[i]
		n.Inputs[i] = pool[choose(len(pool))]
		what = fmt.Sprintf("node %%%s operand %d: %%%s -> %%%s", n.Output.Name, i, old.Name, n.Inputs[i].Name)
	case "attr":
		n := g.Nodes[choose(len(g.Nodes))]
		what = "node %" + n.Output.Name + " " + editAttr(n, choose)
	}
	return Edit{What: what, Text: untyped(g)}, nil
}

// editAttr sets one attribute of n (declared by its op, set or not) to a nearby or extreme
// value of its kind and says what it did.
func editAttr(n *graph.Node, choose Chooser) string {
	def, _ := graph.Lookup(n.Op)
	if len(def.Attrs) == 0 {
		return "(no attribute to edit)"
	}
	spec := def.Attrs[choose(len(def.Attrs))]
	if n.Attrs == nil {
		n.Attrs = graph.Attrs{}
	}
	old, had := n.Attrs[spec.Name]
	small := func() int64 { return int64(choose(11) - 5) }
	var a graph.Attr
	switch spec.Kind {
	case graph.AttrInt:
		a = graph.Int(small())
	case graph.AttrFloat:
		a = graph.Float([]float64{0, -1e-5, 1e-5, 0.5, 2, -3, 1e30}[choose(7)])
	case graph.AttrBool:
		a = graph.Bool(!old.Bool)
	case graph.AttrDType:
		// Wide floats, and kinds the verifier must refuse as accumulators; a narrow float
		// accumulator would need a tolerance that models its rounding, which is the
		// property suite's job.
		dts := []numerics.DType{numerics.F64, numerics.F32, numerics.I32, numerics.I8, numerics.Bool}
		a = graph.DTypeAttr(dts[choose(len(dts))])
	case graph.AttrString:
		vals := append(slices.Clone(spec.Values), "bogus")
		a = graph.String(vals[choose(len(vals))])
	case graph.AttrInts:
		vs := slices.Clone(old.Ints)
		switch k := choose(3); {
		case k == 0 && len(vs) > 0:
			vs[choose(len(vs))] = small()
		case k == 1 && len(vs) > 0:
			vs = vs[:len(vs)-1]
		default:
			vs = append(vs, small())
		}
		a = graph.Ints(vs...)
	}
	n.Attrs[spec.Name] = a
	was := "unset"
	if had {
		was = graph.FormatAttr(old)
	}
	return fmt.Sprintf("attr %s: %s -> %s", spec.Name, was, graph.FormatAttr(a))
}

// Judge decides whether the engine did right by an edited graph text: either the parser (or
// the compiler) refuses it with a coded, one-line error that is not E_INTERNAL, or it compiles,
// runs on the CPU without a panic, and every output agrees with engine/ref within the default
// tolerance of its dtype. It returns nil when all is well, else what went wrong.
func Judge(text string, seed uint64) error {
	g, err := graph.Parse(text, "edit.tg")
	if err != nil {
		return refusal("graph.Parse", err)
	}
	in, err := harness.RandomInputs(g, seed, nil)
	if err != nil {
		return refusal("random inputs", err)
	}
	tols := make([]harness.Tolerance, len(g.Outputs))
	for i, v := range g.Outputs {
		tols[i] = looseTolerance(g, v.Type.DType)
	}
	cpu, err := backend.Get("cpu")
	if err != nil {
		return err
	}
	r := harness.RunCase(harness.Case{Suite: "verifier", Name: "one-edit", Graph: g, Inputs: in, Seed: seed, Tolerances: tols}, cpu)
	switch r.Verdict {
	case harness.VerdictPass:
		return nil
	case harness.VerdictError:
		if errs.Code(r.ErrorCode) != errs.Internal && r.ErrorCode != "" && !strings.Contains(r.Reason, "\n") {
			return nil // the compiler refused it, coded
		}
	}
	return fmt.Errorf("accepted and then %s (%s): %s", r.Verdict, r.ErrorCode, r.Reason)
}

func refusal(entry string, err error) error {
	msg := err.Error()
	switch c := errs.CodeOf(err); {
	case c == errs.Internal:
		return fmt.Errorf("%s: E_INTERNAL (a panic or an uncoded error): %s", entry, msg)
	case strings.Contains(msg, "\n"):
		return fmt.Errorf("%s: refusal spans lines: %q", entry, msg)
	case !strings.HasPrefix(msg, string(c)+": "):
		return fmt.Errorf("%s: refusal does not start with its code: %q", entry, msg)
	}
	return nil
}

// looseTolerance is the default tolerance of out, or of the least precise float dtype any
// value, accumulator or cast target of g has if that is looser: a cast up to f64 does not restore what an f32 layernorm
// rounded away. An edit may also make a reference legitimately tiny (a softmax over one
// column is all ones), so the magnitude guard, meant for hand-written tolerances, is off.
func looseTolerance(g *graph.Graph, out numerics.DType) harness.Tolerance {
	t := harness.DefaultTolerance(out)
	consider := func(d numerics.DType) {
		if d.IsFloat() && out.IsFloat() {
			if l := harness.DefaultTolerance(d); l.RTol > t.RTol {
				t = l
			}
		}
	}
	for _, v := range g.Inputs {
		consider(v.Type.DType)
	}
	for _, n := range g.Nodes {
		consider(n.Output.Type.DType)
		for _, a := range n.Attrs {
			if a.Kind == graph.AttrDType { // an accumulator or a cast target
				consider(a.DType)
			}
		}
	}
	t.Guard = -1
	return t
}
