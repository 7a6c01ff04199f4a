package golden

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	_ "github.com/tessera-qa/tessera-qa/engine/backend/cpu"

	"github.com/tessera-qa/tessera-qa/engine/backend"
	"github.com/tessera-qa/tessera-qa/engine/dist"
	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/engine/ref"
	"github.com/tessera-qa/tessera-qa/harness"
)

func TestDistCatalogueCoversEveryCollectiveAndDType(t *testing.T) {
	type cover struct {
		n          int
		worlds     map[int]bool
		subAxis    bool // a group smaller than the world (the 2x2 mesh)
		collective bool
	}
	have := map[string]*cover{}
	for _, s := range DistCatalogue() {
		c := have[s.File()]
		if c == nil {
			c = &cover{worlds: map[int]bool{}}
			have[s.File()] = c
		}
		c.n++
		c.worlds[s.World()] = true
		for _, n := range s.Graph.Nodes {
			if n.Op == s.Op && s.Graph.Mesh.Size(n.StringAttr("axis")) < s.World() {
				c.subAxis = true
			}
		}
	}
	for _, p := range DistPairs() {
		c := have[p]
		switch {
		case c == nil:
			t.Errorf("%s: no multi-rank golden specs (every collective x float/int dtype needs some)", p)
			continue
		case c.n < 3:
			t.Errorf("%s: %d specs, want at least 3", p, c.n)
		}
		if !c.worlds[2] || !c.worlds[4] || !c.subAxis {
			t.Errorf("%s: worlds %v, group smaller than the world %v: want worlds 2 and 4 and a 2x2 mesh case", p, c.worlds, c.subAxis)
		}
		delete(have, p)
	}
	for p := range have {
		t.Errorf("%s: specs for a pair the registry does not declare", p)
	}
	for _, def := range graph.CollectiveOps() {
		if !slices.ContainsFunc(DistPairs(), func(p string) bool { return strings.HasPrefix(p, def.Name+"/") }) {
			t.Errorf("collective %s has no golden pairs", def.Name)
		}
	}
}

func TestDistCatalogueNamesSeedsAndText(t *testing.T) {
	seen := map[string]bool{}
	seeds := map[uint64]string{}
	for _, s := range append(Catalogue(), DistCatalogue()...) {
		if seen[s.Name] {
			t.Errorf("spec name %q repeated", s.Name)
		}
		seen[s.Name] = true
		if other, dup := seeds[s.Seed]; dup {
			t.Errorf("%s and %s share seed %d", s.Name, other, s.Seed)
		}
		seeds[s.Seed] = s.Name
	}
	for _, s := range DistCatalogue() {
		prefix := s.Op + "/" + s.DType.String() + "/"
		if !strings.HasPrefix(s.Name, prefix) || strings.ContainsAny(s.Name, " \t\n:") || s.Seed != SeedOf(s.Name) {
			t.Errorf("spec %q (seed %d): want %s<tag> and SeedOf(name)", s.Name, s.Seed, prefix)
		}
		if s.World() < 2 || len(s.Tolerances) != len(s.Graph.Outputs) {
			t.Errorf("%s: world %d, %d tolerances for %d outputs", s.Name, s.World(), len(s.Tolerances), len(s.Graph.Outputs))
		}
		g, err := graph.Parse(graph.Print(s.Graph), s.Name)
		if err != nil {
			t.Fatalf("%s: %v", s.Name, err)
		}
		if d := graph.Diff(g, s.Graph); d != "" {
			t.Errorf("%s: parse(print(g)) differs: %s", s.Name, d)
		}
		if _, err := s.Inputs(); err == nil {
			t.Errorf("%s: Inputs() of a multi-rank spec must refuse (RankInputs)", s.Name)
		}
	}
}

// TestDistCatalogueIsMeaningful: every rank of every case is a check that can fail, the ranks
// hold different inputs, data movement is judged bitwise, and the data stays small.
func TestDistCatalogueIsMeaningful(t *testing.T) {
	total := 0
	for _, s := range DistCatalogue() {
		in, err := s.RankInputs()
		if err != nil {
			t.Fatalf("%s: %v", s.Name, err)
		}
		if bytes.Equal(in[0]["x"].Data, in[1]["x"].Data) && !s.Empty { // empty buffers hold no data

			t.Errorf("%s: ranks 0 and 1 hold the same input", s.Name)
		}
		want, err := ref.RunDist(s.Graph, in)
		if err != nil {
			t.Fatalf("%s: %v", s.Name, err)
		}
		for r := range want {
			if err := Meaningful(s, want[r]); err != nil {
				t.Errorf("rank %d: %v", r, err)
			}
			for _, w := range want[r] {
				total += len(w.Data)
			}
			total += len(in[r]["x"].Data)
		}
		sums := s.Graph.Nodes[0].StringAttr("op")
		if !s.DType.IsFloat() || (sums != "sum" && sums != "avg") {
			if !s.Tolerances[0].Bitwise && !(s.DType.IsInt() && s.Tolerances[0] == harness.DefaultTolerance(s.DType)) {
				t.Errorf("%s: tolerance %s, want bitwise (movement, max/min) or exact (ints)", s.Name, s.Tolerances[0])
			}
		}
	}
	if total > 256<<10 {
		t.Errorf("multi-rank catalogue tensors take %d bytes, budget 256 KiB", total)
	}
}

// TestCheckDistCatchesEveryRank plants a one-bit error in each rank's expected output in turn
// (and a wrong rank order): CheckDist must fail naming that rank, and pass on the case as
// generated.
func TestCheckDistCatchesEveryRank(t *testing.T) {
	cpu, err := backend.Get("cpu")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"all_gather/f32/w4-2x3-dim1", "all_reduce/bf16/dp2xtp2-sum-dp-3x5", "recv/int8/w4-ring-5"} {
		op, dt := strings.Split(name, "/")[0], strings.Split(name, "/")[1]
		d, _ := numerics.Parse(dt)
		i := slices.IndexFunc(SpecsFor(op, d), func(s Spec) bool { return s.Name == name })
		if i < 0 {
			t.Fatalf("no spec %s", name)
		}
		c, err := generateDist(SpecsFor(op, d)[i])
		if err != nil {
			t.Fatal(err)
		}
		if r := CheckDist(c, cpu, dist.Options{}); r.Verdict != harness.VerdictPass {
			t.Fatalf("%s: %s %s", name, r.Verdict, r.Reason)
		}
		for rank := range c.World {
			bad := c
			bad.RankWant = slices.Clone(c.RankWant)
			w := c.RankWant[rank][0].Clone()
			w.Data[len(w.Data)-1] ^= 0x01
			bad.RankWant[rank] = append(slices.Clone(c.RankWant[rank][:0]), w)
			r := CheckDist(bad, cpu, dist.Options{})
			if r.Verdict != harness.VerdictFail || !strings.Contains(r.Reason, "rank "+string(rune('0'+rank))+" output") {
				t.Errorf("%s: a flipped bit on rank %d gave %s: %s", name, rank, r.Verdict, r.Reason)
			}
		}
		if !bytes.Equal(c.RankWant[0][0].Data, c.RankWant[1][0].Data) {
			swapped := c
			swapped.RankWant = slices.Clone(c.RankWant)
			swapped.RankWant[0], swapped.RankWant[1] = c.RankWant[1], c.RankWant[0]
			if r := CheckDist(swapped, cpu, dist.Options{}); r.Verdict != harness.VerdictFail {
				t.Errorf("%s: ranks 0 and 1 swapped gave %s", name, r.Verdict)
			}
		}
		if r := CheckReference(c); r.Verdict != harness.VerdictPass {
			t.Errorf("%s: golden model against itself: %s %s", name, r.Verdict, r.Reason)
		}
	}
}
