package property

import (
	"github.com/onsi/gomega"
	"pgregory.net/rapid"

	"github.com/tessera-qa/tessera-qa/engine/compiler"
	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/engine/ref"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
	"github.com/tessera-qa/tessera-qa/harness"
)

// A metamorphic relation is one graph whose outputs hold both sides of an identity; the engine
// runs it once and one side is compared with the other (or with a value the contract fixes).
// Both sides come from the same engine, so a degenerate output (log_softmax over an axis of
// length 1 is all zeros) is a valid answer here: relations compare with NoGuard, and the
// agreement property is what rules out an engine that returns degenerate outputs.

// side is one comparison of a relation: output got against output want (or the fixed value
// wantFn gives), under the tolerance tol computes from the expected tensor.
type side struct {
	got, want int
	wantFn    func(outs []*tensor.Tensor) *tensor.Tensor
	tol       func(want *tensor.Tensor) harness.Tolerance
	what      string
}

// relation checks every side of g on e's backend. A failure writes a manifest that replays g
// against the golden model (so a replay tells which side the engine gets wrong).
func (e Env) relation(t *rapid.T, property string, g *graph.Graph, in map[string]*tensor.Tensor, sides ...side) {
	gm := gomega.NewWithT(t)
	hc := harness.Case{Suite: Suite, Name: caseName(property), Graph: g, Inputs: in, Labels: []string{"property", "metamorphic"}}
	p, err := compiler.Compile(g, compiler.Options{})
	gm.Expect(err).NotTo(gomega.HaveOccurred(), "%s: compile", property)
	runIn := make(map[string]*tensor.Tensor, len(in))
	for k, v := range in {
		runIn[k] = v.Clone()
	}
	outs, err := e.Backend.Run(p, runIn)
	gm.Expect(err).NotTo(gomega.HaveOccurred(), "%s: run on %s", property, e.Backend.Name())
	for _, s := range sides {
		want := s.wantFn
		exp := func() *tensor.Tensor {
			if want != nil {
				return want(outs)
			}
			return outs[s.want]
		}()
		res := harness.Check(outs[s.got], exp, s.tol(exp))
		if !res.Pass {
			t.Logf("graph:\n%s", graph.Print(g))
			hc.Tolerances = refTolerances(g, in)
			e.record(t, hc, property+": "+s.what+": "+res.Reason)
		}
		gm.Expect(res.Pass).To(gomega.BeTrue(), "%s on %s: %s: %s", property, e.Backend.Name(), s.what, res.Reason)
	}
}

// refTolerances are the tolerances a replay judges g's outputs by against the golden model.
func refTolerances(g *graph.Graph, in map[string]*tensor.Tensor) []harness.Tolerance {
	want, err := ref.Run(g, in)
	if err != nil {
		return nil
	}
	k := Reductions(g)
	tols := make([]harness.Tolerance, len(want))
	for i, w := range want {
		tols[i] = Tolerance(w.DType, k[i], w).NoGuard()
	}
	return tols
}

// policy is the relation tolerance of an output summing k terms: the tolerance policy
// without the guard.
func policy(k int) func(*tensor.Tensor) harness.Tolerance {
	return func(w *tensor.Tensor) harness.Tolerance { return Tolerance(w.DType, k, w).NoGuard() }
}

// exact compares values: equal numbers (-0 == +0), NaN where NaN, Inf where Inf.
func exact(*tensor.Tensor) harness.Tolerance { return harness.Tolerance{}.NoGuard() }

func bitwise(*tensor.Tensor) harness.Tolerance { return harness.Bitwise() }

// drawDType draws one of dts by name, so that rapid's log reads "f16" rather than 0x3.
func drawDType(t *rapid.T, dts ...numerics.DType) numerics.DType {
	names := make([]string, len(dts))
	for i, d := range dts {
		names[i] = d.String()
	}
	d, _ := numerics.Parse(rapid.SampledFrom(names).Draw(t, "dtype"))
	return d
}

// drawDims draws n dims from dimPool, halved (largest first) until their product fits limit.
func drawDims(t *rapid.T, label string, n, limit int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = dimPool[rapid.IntRange(0, len(dimPool)-1).Draw(t, label)]
	}
	return (&builder{cfg: Config{MaxElems: limit}}).fit(s)
}

// relClasses are the value classes relations draw float inputs from: ClassSpecial is left to
// the NaN/Inf property, because next to ±max an f32 sum overflows or not depending on the
// order of its terms, and the two sides of a relation may sum in different orders.
var relClasses = []Class{ClassNormal, ClassUniform, ClassPositive, ClassHuge, ClassTiny}

// in makes a graph input of b holding t.
func input(b *graph.Builder, in map[string]*tensor.Tensor, name string, t *tensor.Tensor) *graph.Value {
	in[name] = t
	return b.Input(name, t.DType, t.Shape...)
}

// build finishes a relation graph; a builder error is a bug in the property.
func build(t *rapid.T, b *graph.Builder) *graph.Graph {
	g, err := b.Build()
	if err != nil {
		t.Fatalf("relation graph does not build: %v", err)
	}
	return g
}
