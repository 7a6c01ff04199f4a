package golden

import (
	"slices"
	"strings"
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/ref"
)

func TestCatalogueCoversEveryOpAndDType(t *testing.T) {
	have := map[string]int{}
	for _, s := range Catalogue() {
		have[s.File()]++
	}
	for _, p := range Pairs() {
		switch n := have[p]; {
		case n == 0:
			t.Errorf("%s: no golden specs (every op x dtype of the registry needs some)", p)
		case n < 2:
			t.Errorf("%s: %d spec, want at least 2 shapes", p, n)
		}
		delete(have, p)
	}
	for p := range have {
		t.Errorf("%s: specs for a pair the op registry does not declare", p)
	}
}

func TestCatalogueNamesAndSeeds(t *testing.T) {
	seen := map[string]bool{}
	seeds := map[uint64]string{}
	for _, s := range Catalogue() {
		prefix := s.Op + "/" + s.DType.String() + "/"
		if !strings.HasPrefix(s.Name, prefix) || len(s.Name) == len(prefix) || strings.ContainsAny(s.Name, " \t\n:") {
			t.Errorf("spec name %q: want %s<shape-tag> without spaces or colons", s.Name, prefix)
		}
		if seen[s.Name] {
			t.Errorf("spec name %q repeated", s.Name)
		}
		seen[s.Name] = true
		if s.Seed != SeedOf(s.Name) {
			t.Errorf("%s: seed %d is not SeedOf(name)", s.Name, s.Seed)
		}
		if other, dup := seeds[s.Seed]; dup {
			t.Errorf("%s and %s share seed %d", s.Name, other, s.Seed)
		}
		seeds[s.Seed] = s.Name
		if len(s.Tolerances) != len(s.Graph.Outputs) {
			t.Errorf("%s: %d tolerances for %d outputs", s.Name, len(s.Tolerances), len(s.Graph.Outputs))
		}
	}
	// The seed function is part of the file format's meaning: pin it.
	if got := SeedOf("matmul/bf16/67x45x97"); got != 0x6b33528bd7c63e88 {
		t.Errorf("SeedOf changed: %#x (golden files would all be stale)", got)
	}
}

func TestCatalogueIsAPureFunction(t *testing.T) {
	a, b := Catalogue(), Catalogue()
	if len(a) != len(b) {
		t.Fatalf("two calls gave %d and %d specs", len(a), len(b))
	}
	for i := range a {
		if a[i].Name != b[i].Name || graph.Print(a[i].Graph) != graph.Print(b[i].Graph) || !slices.Equal(a[i].Tolerances, b[i].Tolerances) {
			t.Fatalf("spec %d differs between two calls: %s vs %s", i, a[i].Name, b[i].Name)
		}
	}
}

func TestCatalogueGraphsRoundTripThroughText(t *testing.T) {
	for _, s := range Catalogue() {
		g, err := graph.Parse(graph.Print(s.Graph), s.Name)
		if err != nil {
			t.Fatalf("%s: %v", s.Name, err)
		}
		if d := graph.Diff(g, s.Graph); d != "" {
			t.Errorf("%s: parse(print(g)) differs: %s", s.Name, d)
		}
	}
}

// TestCatalogueHasTheAwkwardShapes pins the coverage the issue asks for, so a later edit cannot
// quietly drop it.
func TestCatalogueHasTheAwkwardShapes(t *testing.T) {
	transposes := map[[2]bool]bool{}
	var tileHint, causal, nonCausal, raggedAttention bool
	long := map[string]bool{}
	for _, s := range Catalogue() {
		n := s.Graph.Nodes[0]
		switch s.Op {
		case "matmul", "batch_matmul":
			transposes[[2]bool{n.BoolAttr("transpose_a"), n.BoolAttr("transpose_b")}] = true
			tileHint = tileHint || slices.Equal(n.IntsAttr("tile"), []int{16, 16, 8})
		case "attention":
			r := n.Inputs[0].Type.Rank()
			sq, sk := n.Inputs[0].Type.Shape[r-2], n.Inputs[1].Type.Shape[r-2]
			raggedAttention = raggedAttention || (sq > 64 && sq%64 != 0 && sk%64 != 0)
			causal = causal || n.BoolAttr("causal")
			nonCausal = nonCausal || !n.BoolAttr("causal")
		}
		for _, v := range n.Inputs {
			if slices.Contains(v.Type.Shape, 1031) {
				long[s.Op] = true
			}
		}
	}
	if len(transposes) != 4 {
		t.Errorf("matmul transpose combinations covered: %v, want all four", transposes)
	}
	if !tileHint || !causal || !nonCausal || !raggedAttention {
		t.Errorf("tile hint %v, causal %v, non-causal %v, attention with ragged Sq and Sk %v: want all", tileHint, causal, nonCausal, raggedAttention)
	}
	for _, op := range []string{"reduce_sum", "reduce_max", "reduce_mean", "softmax", "log_softmax", "layernorm", "rmsnorm", "mse_loss", "neg", "add"} {
		if !long[op] {
			t.Errorf("%s: no case with a dimension of 1031 (past a default tile, ragged)", op)
		}
	}
}

// TestCatalogueIsMeaningful draws every spec, runs the golden model and requires each case to
// be a check that can fail (see Meaningful), and the whole data set to stay small.
func TestCatalogueIsMeaningful(t *testing.T) {
	total := 0
	for _, s := range Catalogue() {
		in, err := s.Inputs()
		if err != nil {
			t.Fatalf("%s: %v", s.Name, err)
		}
		want, err := ref.Run(s.Graph, in)
		if err != nil {
			t.Fatalf("%s: %v", s.Name, err)
		}
		if err := Meaningful(s, want); err != nil {
			t.Error(err)
		}
		for _, x := range in {
			total += len(x.Data)
		}
		for _, w := range want {
			total += len(w.Data)
		}
	}
	if total > 6<<20 {
		t.Errorf("catalogue tensors take %d bytes, budget 6 MiB", total)
	}
}
