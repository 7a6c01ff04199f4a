package property

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"pgregory.net/rapid"

	"github.com/tessera-qa/tessera-qa/engine/graph"
)

// Raw draws random cases (SpecGen interpreted by Build) without filtering: for properties
// that compare the engine with itself bit for bit and need no tolerance.
func Raw(cfg Config) *rapid.Generator[*Case] {
	specs := edgeFirst(cfg, SpecGen(cfg.MaxOps))
	return rapid.Custom(func(t *rapid.T) *Case {
		sp := specs.Draw(t, "spec")
		c, err := Build(sp, cfg)
		if err != nil {
			t.Fatalf("generator bug: %v", err)
		}
		return c
	})
}

// Cases draws random cases that can be judged against the golden model: Raw filtered by
// Judgeable. Filtering in the generator (not skipping in the property) keeps rapid's counts
// honest: a rejected draw is retried, and a generator that rejects too much fails the run.
func Cases(cfg Config) *rapid.Generator[*Case] { return Raw(cfg).Filter(Judgeable) }

// GoString is what rapid prints for a drawn case: the graph and the input classes, instead of
// pointers and tensor bytes.
func (c *Case) GoString() string {
	var b strings.Builder
	b.WriteString(strings.TrimRight(graph.Print(c.Graph), "\n"))
	names := make([]string, 0, len(c.Classes))
	for n := range c.Classes {
		names = append(names, n)
	}
	slices.Sort(names)
	b.WriteString("\nvalue classes:")
	for _, n := range names {
		fmt.Fprintf(&b, " %%%s=%s", n, c.Classes[n])
	}
	return b.String()
}

// NonFinite reports whether some golden output of c holds a NaN or an Inf.
func NonFinite(c *Case) bool {
	for _, w := range c.Want {
		for i := range w.Len() {
			if v := w.Float64(i); math.IsNaN(v) || math.IsInf(v, 0) {
				return true
			}
		}
	}
	return false
}

// Reductions returns, for each output of g, the longest reduction (Terms) upstream of it: the
// k its tolerance is scaled for.
func Reductions(g *graph.Graph) []int {
	k := map[*graph.Value]int{}
	for _, n := range g.Nodes {
		k[n.Output] = Terms(n)
		for _, v := range n.Inputs {
			k[n.Output] = max(k[n.Output], k[v])
		}
	}
	out := make([]int, len(g.Outputs))
	for i, v := range g.Outputs {
		out[i] = max(k[v], 1)
	}
	return out
}
