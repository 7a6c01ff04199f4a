package property

import (
	"math"
	"strings"

	"github.com/onsi/gomega"
	"pgregory.net/rapid"

	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/harness"
	"github.com/tessera-qa/tessera-qa/rewrite"
)

// verifyAttrs fuzzes attributes: a random graph with one attribute of one node replaced by a
// drawn value (an allowed one, an alias, a misspelling, an extreme number, the wrong kind, an
// unknown name, or removed). The verifier either refuses the graph with a one-line E_INPUT,
// E_SHAPE or E_DTYPE naming the node, or accepts it, and then the compiler, the backend and
// the golden model must all produce outputs: an attribute value the registry lets through
// must never fail later as E_INTERNAL (issue 13: gelu approx="none" used to).
var verifyAttrs = Property{
	Name:   "verify/attrs",
	Judged: "exact",
	Checks: 300,
	Doc: "one attribute of a random graph replaced by a drawn value (allowed, alias, misspelt, extreme, " +
		"wrong kind, unknown, removed): the verifier refuses it with E_INPUT/E_SHAPE/E_DTYPE naming the node, " +
		"or compile, run and the golden model all succeed",
	Body: func(e Env) func(*rapid.T) {
		gen := Raw(e.Config)
		return func(t *rapid.T) {
			g := gomega.NewWithT(t)
			c := gen.Draw(t, "case")
			node := rapid.IntRange(0, len(c.Graph.Nodes)-1).Draw(t, "node")
			mutated, target, err := withAttr(t, c.Graph, node)
			if err != nil {
				code := errs.CodeOf(err)
				g.Expect(code).To(gomega.BeElementOf(errs.Input, errs.Shape, errs.DType), "refused with %v", err)
				g.Expect(err.Error()).NotTo(gomega.ContainSubstring("\n"))
				g.Expect(err.Error()).To(gomega.ContainSubstring("node %"), "the error names the node (%%%s or a reader)", target)
				return
			}
			hc := harness.Case{Suite: Suite, Name: caseName("verify/attrs"), Graph: mutated, Inputs: c.Inputs,
				Labels: []string{"property"}}
			r := harness.Runner{Backend: e.Backend, ArtifactsDir: e.Artifacts}.Run(hc)
			if r.Verdict == harness.VerdictError {
				t.Logf("graph:\n%s", graph.Print(mutated))
			}
			g.Expect(r.Verdict).NotTo(gomega.Equal(harness.VerdictError),
				"verify/attrs on %s: the verifier accepted %%%s's attributes, then: %s", e.Backend.Name(), target, r.Reason)
		}
	},
}

// withAttr rebuilds g with one attribute of node i changed, re-inferring every type (a new
// attribute may change the node's output shape and so its readers'). It returns the node's
// output name and the builder's error, if any.
func withAttr(t *rapid.T, g *graph.Graph, i int) (*graph.Graph, string, error) {
	n := g.Nodes[i]
	d := n.Def()
	attrs := n.Attrs.Clone()
	if attrs == nil {
		attrs = graph.Attrs{}
	}
	var names []string
	for _, s := range d.Attrs {
		names = append(names, s.Name)
	}
	name := rapid.SampledFrom(append(names, "approximate", "dim")).Draw(t, "attr")
	var spec *graph.AttrSpec
	for k := range d.Attrs {
		if d.Attrs[k].Name == name {
			spec = &d.Attrs[k]
		}
	}
	kind := graph.AttrString
	if spec != nil {
		kind = spec.Kind
	}
	switch rapid.IntRange(0, 9).Draw(t, "how") {
	case 0:
		delete(attrs, name)
	case 1: // the wrong kind
		attrs[name] = drawAttr(t, graph.AttrKind(rapid.IntRange(int(graph.AttrInt), int(graph.AttrDType)).Draw(t, "kind")), spec)
	default:
		attrs[name] = drawAttr(t, kind, spec)
	}
	b := graph.NewBuilder(g.Name)
	vals := map[*graph.Value]*graph.Value{}
	for _, v := range g.Inputs {
		vals[v] = b.Input(v.Name, v.Type.DType, v.Type.Shape...)
	}
	for k, m := range g.Nodes {
		in := make([]*graph.Value, len(m.Inputs))
		for j, v := range m.Inputs {
			in[j] = vals[v]
		}
		a := m.Attrs
		if k == i {
			a = attrs
		}
		vals[m.Output] = b.Named(m.Output.Name, m.Op, a, in...)
	}
	for _, v := range g.Outputs {
		b.Output(vals[v])
	}
	out, err := b.Build()
	return out, n.Output.Name, err
}

// drawAttr draws a value of kind k, biased towards the edges of what spec allows.
func drawAttr(t *rapid.T, k graph.AttrKind, spec *graph.AttrSpec) graph.Attr {
	switch k {
	case graph.AttrInt:
		return graph.Int(rapid.SampledFrom([]int64{-9, -3, -2, -1, 0, 1, 2, 3, 7, math.MaxInt32, math.MinInt64}).Draw(t, "int"))
	case graph.AttrFloat:
		return graph.Float(rapid.SampledFrom([]float64{0, math.Copysign(0, -1), 1, -1, 0.5, 1e-30, 1e30, -1e-5,
			math.Inf(1), math.Inf(-1), math.NaN(), math.SmallestNonzeroFloat64}).Draw(t, "float"))
	case graph.AttrBool:
		return graph.Bool(rapid.Bool().Draw(t, "bool"))
	case graph.AttrInts:
		return graph.Ints(rapid.SliceOfN(rapid.Int64Range(-3, 5), 0, 4).Draw(t, "ints")...)
	case graph.AttrDType:
		return graph.DTypeAttr(rapid.SampledFrom(append(numerics.All, numerics.Invalid, numerics.DType(99))).Draw(t, "dtype"))
	}
	choices := []string{"", "fast", "none", "exact", "TANH", "Erf", "sum ", "prod", "mean", "q", "tp"}
	if spec != nil {
		choices = append(choices, spec.Values...)
		for a := range spec.Aliases {
			choices = append(choices, a)
		}
		for _, v := range spec.Values {
			choices = append(choices, strings.ToUpper(v), v+"\x00")
		}
	}
	return graph.String(rapid.SampledFrom(choices).Draw(t, "string"))
}

// rewriteCandidates is the generator's bias towards the compiler's rewrites (issue 13): graphs
// shaped like a rewrite's pattern with each matcher condition drawn to hold or fail
// (rewrite.Gen), judged on the dump after the pass (rewritten exactly when every
// condition holds) and on the numbers with and without the rewrite and against engine/ref.
var rewriteCandidates = Property{
	Name:   "rewrite/candidates",
	Judged: "tolerance",
	Checks: 300,
	Doc: "a random rewrite candidate or near miss (attention chain, elementwise chain, no-op movement or cast) is " +
		"rewritten exactly when every matcher condition holds, and computes the same with and without the rewrite",
	Body: func(e Env) func(*rapid.T) {
		gen := rewrite.Gen()
		return func(t *rapid.T) {
			g := gomega.NewWithT(t)
			c := gen.Draw(t, "candidate")
			g.Expect(c.CheckStructure()).To(gomega.Succeed())
			g.Expect(c.CheckNumbers(e.Backend, 1)).To(gomega.Succeed())
		}
	},
}
