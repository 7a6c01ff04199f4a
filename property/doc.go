// Package property is the property-based suite's engine (docs/property.md): random graphs with
// shrinking (pgregory.net/rapid), the properties they must satisfy, and a driver that runs
// them under Ginkgo (suites/property) or outside it (`tessera-qa prop`).
//
// Index, one concern per file:
//
//	spec.go        Step, Spec, StepGen, SpecGen: the raw draws, each shrinking towards "simplest"
//	build.go       Config, Case, Build: a Spec interpreted as a graph over the whole registry,
//	               with inputs and golden-model outputs; AccumChoices
//	templates.go   one template per op kind: operands, awkward shapes, attributes
//	values.go      Class, Fill, NearCopy: normal, uniform, positive, special (±0, subnormals,
//	               ±Inf, NaN, ±max), huge, tiny, extreme logits; near-cancelling copies
//	tolerance.go   Tolerance: the per-dtype default, scaled for reductions and tiny references
//	noise.go       Judgeable, Perturb, Terms, Exact: the noise model that filters out cases a
//	               correct engine could legitimately fail; perturb.go: its element-level moves
//	gen.go         Raw, Cases: rapid generators of whole cases; Reductions, NonFinite
//	property.go    Property, Env, All, Select
//	agree.go       agree/ref, agree/nan-inf, determinism/bitwise
//	relation.go    metamorphic relations: one graph, both sides; meta_*.go: the six relations
//	check.go       Check: rapid.Check with per-property counts and seeds; Options, Tally
//	run.go         Run, Recorder, Outcome: the properties outside `go test`
//	knownissues.go engine issues the properties found and the generator avoids until fixed
//	edges.go       the edge schedule: row ops on rows past their tile width with tiles shifted
//	               beyond exp's range, -Inf tiles, rows of one value, met first in every Raw run
//	edges_meta.go  meta/softmax-shift's own edge schedule (lifted tiles that keep x + c exact)
//	tiles.go       TileWidth (from the compiler's schedule), TileExtremes: recognising such inputs
//	accum_bits.go  accum/bits: every accumulator the verifier accepts, bit for bit (rounding)
//
// In a Ginkgo spec:
//
//	property.Check(GinkgoT(), p, property.Env{Backend: cpu, Config: property.DefaultConfig(), Artifacts: dir}, property.Options{Seed: seed})
//
// or directly with rapid:
//
//	rapid.Check(GinkgoT(), func(t *rapid.T) {
//		g := NewWithT(t)
//		c := property.Cases(property.DefaultConfig()).Draw(t, "case")
//		g.Expect(harness.RunCase(c.Harness(property.Suite, "mine", 0), cpu).Verdict).To(Equal(harness.VerdictPass))
//	})
package property
