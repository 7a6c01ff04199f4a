package golden

import (
	"fmt"
	"hash/fnv"
	"slices"
	"strings"

	"github.com/tessera-qa/tessera-qa/engine/dist/mesh"
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
	"github.com/tessera-qa/tessera-qa/harness"
)

// Spec is one golden case: a single-op graph, how its inputs are drawn and how its outputs
// are judged. Everything in it is a pure function of the catalogue code, so a golden file
// can be checked for staleness by rebuilding its specs.
type Spec struct {
	// Name is hierarchical: op/dtype/shape-tag, e.g. "matmul/bf16/67x45x97-tb".
	Name  string
	Op    string
	DType numerics.DType // dtype of the op's inputs
	Graph *graph.Graph
	// Dists gives the distribution of each input; an input without one gets
	// harness.DefaultDist of its dtype.
	Dists map[string]harness.Dist
	// Seed is derived from Name (FNV-1a), so renaming a case is the only way to redraw it.
	Seed uint64
	// Tolerances holds one tolerance per graph output.
	Tolerances []harness.Tolerance
	// Empty marks a case of catalogue_empty.go (a dim of size 0): its reference is empty or
	// the constant value over nothing, which Meaningful judges by its own rules.
	Empty bool
}

// Inputs draws the spec's inputs (harness.RandomInputs with the spec's seed and dists). A
// multi-rank spec (World() > 0) has one set per rank: RankInputs.
func (s Spec) Inputs() (map[string]*tensor.Tensor, error) {
	if s.World() > 0 {
		return nil, errs.New(errs.Input, "golden: spec %s runs on %d ranks; use RankInputs", s.Name, s.World())
	}
	return harness.RandomInputs(s.Graph, s.Seed, s.Dists)
}

// Case is the spec as a harness case judged against the golden model (engine/ref).
func (s Spec) Case() harness.Case {
	in, _ := s.Inputs() // the catalogue test proves every spec draws its inputs
	return harness.Case{Suite: "golden", Name: s.Name, Graph: s.Graph, Inputs: in, Seed: s.Seed, Tolerances: s.Tolerances}
}

// File is the golden file path of the spec, relative to the data directory.
func (s Spec) File() string { return FileName(s.Op, s.DType) }

// FileName is the path of the golden file of (op, dtype) inside the data directory.
func FileName(op string, dt numerics.DType) string { return op + "/" + dt.String() + ".golden" }

// SeedOf derives a case seed from its name.
func SeedOf(name string) uint64 {
	h := fnv.New64a()
	h.Write([]byte("tessera.golden.seed.v1|" + name))
	return h.Sum64()
}

// family builds the specs of one op for one input dtype.
type family func(op string, dt numerics.DType) []Spec

// families maps each op to its spec builder. An op registered in graph but missing here has
// no golden cases, which the catalogue test reports.
var families = map[string]family{}

func register(f family, ops ...string) {
	for _, op := range ops {
		if _, dup := families[op]; dup {
			panic("golden: op family registered twice: " + op)
		}
		families[op] = f
	}
}

// Catalogue returns every golden spec, ordered by op, then dtype (registry order), then the
// order the op's family lists them. It panics only on a bug in the catalogue code itself
// (a spec whose graph does not build), which the package tests catch.
func Catalogue() []Spec {
	var out []Spec
	for _, def := range graph.Ops() {
		f, ok := families[def.Name]
		if !ok {
			continue
		}
		for _, dt := range def.DTypes {
			out = append(out, f(def.Name, dt)...)
			out = append(out, emptySpecs(def.Name, dt)...) // catalogue_empty.go
		}
	}
	return out
}

// SpecsFor returns the catalogue's specs of one (op, dtype), in catalogue order; for a
// collective op, DistCatalogue's.
func SpecsFor(op string, dt numerics.DType) []Spec {
	f, ok := families[op]
	if !ok {
		if f, ok = distFamilies[op]; !ok || (!dt.IsFloat() && !dt.IsInt()) {
			return nil
		}
	}
	if d, ok := graph.Lookup(op); !ok || !d.Supports(dt) {
		return nil
	}
	return append(append(f(op, dt), emptySpecs(op, dt)...), emptyDistSpecs(op, dt)...) // catalogue_empty.go
}

// Pairs returns the (op, dtype) pairs the op registry declares, as FileName paths, sorted.
func Pairs() []string {
	var out []string
	for _, def := range graph.Ops() {
		for _, dt := range def.DTypes {
			out = append(out, FileName(def.Name, dt))
		}
	}
	slices.Sort(out)
	return out
}

// draft is a spec before its name, seed and graph are derived.
type draft struct {
	tag   string
	mesh  string // a mesh (mesh.ParseMesh) for a multi-rank case, "" for one device
	dists map[string]harness.Dist
	tol   tolRule
	build func(b *graph.Builder) *graph.Value
	empty bool // Spec.Empty
}

// finish turns drafts into specs.
func finish(op string, dt numerics.DType, ds ...draft) []Spec {
	out := make([]Spec, 0, len(ds))
	for _, d := range ds {
		name := op + "/" + dt.String() + "/" + d.tag
		b := graph.NewBuilder(graphName(name))
		if d.mesh != "" {
			m, err := mesh.ParseMesh(d.mesh)
			if err != nil {
				panic(fmt.Sprintf("golden: catalogue spec %s: mesh %s: %v", name, d.mesh, err))
			}
			b.Mesh(m)
		}
		res := d.build(b)
		b.Output(res)
		g, err := b.Build()
		if err != nil {
			panic(fmt.Sprintf("golden: catalogue spec %s does not build: %v", name, err))
		}
		tols := make([]harness.Tolerance, len(g.Outputs))
		for i, v := range g.Outputs {
			tols[i] = d.tol(v.Type)
		}
		out = append(out, Spec{Name: name, Op: op, DType: dt, Graph: g, Dists: d.dists, Seed: SeedOf(name), Tolerances: tols, Empty: d.empty})
	}
	return out
}

// graphName makes a text-format identifier from a spec name.
func graphName(name string) string {
	return "golden_" + strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			return r
		}
		return '_'
	}, name)
}

// Distributions the catalogue uses. Values are kept where every dtype, fp8 included, holds
// them without overflow, and away from zero where a single output element must carry the
// whole check (the magnitude guard compares atol with that element).
var (
	distNormal   = harness.Dist{Kind: harness.DistNormal}
	distAwayZero = harness.Dist{Kind: harness.DistUniform, Lo: 0.5, Hi: 2}
	distNegAway  = harness.Dist{Kind: harness.DistUniform, Lo: -2, Hi: -0.5}
	distPositive = harness.Dist{Kind: harness.DistPositive, Lo: 0.05, Hi: 20}
	distExp      = harness.Dist{Kind: harness.DistUniform, Lo: -4, Hi: 4}
	// distMean (mean 1, sd 16) keeps a mean of 1031 values away from zero and lets it vary
	// by more than fp8's spacing near 1, so the means of different rows differ.
	distMean = harness.Dist{Kind: harness.DistNormal, Lo: -15, Hi: 17}
	// distLogits (sd 3) makes softmax rows peaked, as attention logits are: with sd 1 a row of
	// 1031 holds only probabilities below fp8's normal range.
	distLogits = harness.Dist{Kind: harness.DistNormal, Lo: -3, Hi: 3}
	distGamma  = harness.Dist{Kind: harness.DistUniform, Lo: 0.5, Hi: 1.5}
	distBeta   = harness.Dist{Kind: harness.DistUniform, Lo: -0.5, Hi: 0.5}
)

// dists builds a dist map from name/dist pairs.
func dists(kv ...any) map[string]harness.Dist {
	m := make(map[string]harness.Dist, len(kv)/2)
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i].(string)] = kv[i+1].(harness.Dist)
	}
	return m
}

// shapeTag renders a shape as "3x5x7".
func shapeTag(shape []int) string {
	parts := make([]string, len(shape))
	for i, d := range shape {
		parts[i] = fmt.Sprint(d)
	}
	return strings.Join(parts, "x")
}
