package prop

import (
	"os"
	"testing"

	"pgregory.net/rapid"
)

// ciSeed is the Ginkgo seed .ci/run passes (--seed=20261121); each property's rapid seed
// derives from it as in suites/property.
const ciSeed = 20261121

// randomGraphGens are the generators of the properties that draw random graphs, as their
// bodies draw them (the first draw of each test), so that a run here meets the cases the
// suite meets at the same seed.
var randomGraphGens = []struct {
	property string
	gen      func(Config) *rapid.Generator[*Case]
}{
	{"agree/ref", Cases},
	{"agree/nan-inf", func(cfg Config) *rapid.Generator[*Case] {
		cfg.Special = true
		return Cases(cfg).Filter(NonFinite)
	}},
	{"determinism/bitwise", Raw},
	{"verify/attrs", Raw},
}

// firstExtremes runs gen as property name does at CI's seed for up to checks draws and returns
// the draw (1-based) at which each tile-crossing extreme was first met.
func firstExtremes(t *testing.T, name string, gen func(Config) *rapid.Generator[*Case], checks int) map[string]int {
	first := map[string]int{}
	draw := 0
	p := Property{Name: name, Judged: "measure", Checks: checks, Body: func(e Env) func(*rapid.T) {
		g := gen(e.Config)
		return func(rt *rapid.T) {
			c := g.Draw(rt, "case")
			draw++
			for _, k := range TileExtremes(c) {
				if first[k] == 0 {
					first[k] = draw
				}
			}
		}
	}}
	Check(t, p, Env{Backend: cpu(t), Config: DefaultConfig()}, Options{Seed: PropertySeed(ciSeed, name, "cpu")})
	return first
}

// TestTileExtremesAreMetEarly: every property that draws random graphs meets each
// tile-crossing extreme (a later tile far above the earlier ones, an earlier tile far above
// a later one, -Inf entries, a row of one value, all on rows longer than a tile) within its
// first draws at CI's seed: the edge schedule (edges.go) comes first. TESSERA_QA_TILE_REPORT=1
// runs each property's whole CI count and logs the first draw of each (docs/property.md).
func TestTileExtremesAreMetEarly(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	report := os.Getenv("TESSERA_QA_TILE_REPORT") != ""
	for _, g := range randomGraphGens {
		t.Run(g.property, func(t *testing.T) {
			checks := edgeBudget
			if report {
				for _, p := range All() {
					if p.Name == g.property {
						checks = p.Checks
					}
				}
			}
			first := firstExtremes(t, g.property, g.gen, checks)
			t.Logf("%s at seed %d, %d draws: first met %v", g.property, ciSeed, checks, first)
			if report {
				return
			}
			for _, k := range []string{ExtremeUp, ExtremeDown, ExtremeMasked, ExtremeEqual} {

				if first[k] == 0 {
					t.Errorf("%s: %s not met in the first %d draws", g.property, k, checks)
				}
			}
		})
	}
}
