package property

import (
	"fmt"
	"os"
	"testing"

	"pgregory.net/rapid"

	"github.com/tessera-qa/tessera-qa/engine/numerics"
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
func firstExtremes(t *testing.T, name string, gen func(Config) *rapid.Generator[*Case], checks int, noEdges bool) map[string]int {
	first := map[string]int{}
	draw := 0
	p := Property{Name: name, Judged: "measure", Checks: checks, Body: func(e Env) func(*rapid.T) {
		g := gen(e.Config)
		return func(rt *rapid.T) {
			c := g.Draw(rt, "case")
			draw++
			for _, k := range append(TileExtremes(c), TileExtremesByOp(c)...) {
				if first[k] == 0 {
					first[k] = draw
				}
			}
		}
	}}
	Check(t, p, Env{Backend: cpu(t), Config: DefaultConfig()}, Options{Seed: PropertySeed(ciSeed, name, "cpu"), NoEdges: noEdges})
	return first
}

// TestTileExtremesAreMetEarly: every property that draws random graphs meets each
// tile-crossing extreme (a later tile far above the earlier ones, an earlier tile far above
// a later one, -Inf entries, a row of one value, all on rows longer than a tile) within its
// first draws at CI's seed: the edge schedule (edges.go) comes first. TESSERA_QA_TILE_REPORT=1
// runs each property's whole CI count, with the schedule and without it (the generator as it
// was before), and logs the first draw of each (docs/property.md).
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
			first := firstExtremes(t, g.property, g.gen, checks, false)
			t.Logf("%s at seed %d, %d draws: first met %v; %s", g.property, ciSeed, checks, kinds(first), pairs(first))
			if report {
				before := firstExtremes(t, g.property, g.gen, checks, true)
				t.Logf("%s without the edge schedule: first met %v; %s", g.property, kinds(before), pairs(before))
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

// Every op of the edge schedule has a tile width from its schedule, and every pattern reaches
// every op (a width the schedule does not give would drop the op silently).
func TestEdgeScheduleCoversEveryTiledOp(t *testing.T) {
	for _, op := range tiledOps {
		if _, err := TileWidth(op, numerics.F32); err != nil {
			t.Errorf("%s: %v", op, err)
		}
	}
	for _, special := range []bool{false, true} {
		seen := map[string]bool{}
		for _, e := range EdgeSchedule(special) {
			seen[e.Op] = true
			if e.Len <= e.Width {
				t.Errorf("%s: row of %d within one tile of %d", e, e.Len, e.Width)
			}
		}
		for _, op := range tiledOps {
			if !seen[op] {
				t.Errorf("special=%v: %s never scheduled", special, op)
			}
		}
	}
}

// kinds keeps the op-agnostic entries of a first-met map.
func kinds(first map[string]int) map[string]int {
	out := map[string]int{}
	for _, k := range []string{ExtremeUp, ExtremeDown, ExtremeMasked, ExtremeEqual} {
		if first[k] > 0 {
			out[k] = first[k]
		}
	}
	return out
}

// pairs summarises the per-op entries: how many of the (op, up/down/masked/equal) pairs were
// met, and by which draw the last of them was.
func pairs(first map[string]int) string {
	met, last, total := 0, 0, 0
	var missing []string
	for _, op := range tiledOps {
		for _, k := range []string{ExtremeUp, ExtremeDown, ExtremeMasked, ExtremeEqual} {
			total++
			if d := first[op+"/"+k]; d > 0 {
				met++
				last = max(last, d)
			} else {
				missing = append(missing, op+"/"+k)
			}
		}
	}
	return fmt.Sprintf("%d of %d (op, extreme) pairs met, the last at draw %d; never: %v", met, total, last, missing)
}
