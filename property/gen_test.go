package property

import (
	"slices"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

func TestEveryOpIsGeneratedForEveryDType(t *testing.T) {
	for i, d := range opTable() {
		for _, dt := range d.DTypes {
			spec := Spec{Storage: dt, Steps: []Step{{Op: i, Rank: 1, Dims: [4]int{3, 4, 5, 6}}}}
			c, err := Build(spec, DefaultConfig())
			if err != nil {
				t.Fatalf("%s on %s: %v", d.Name, dt, err)
			}
			n := c.Graph.Nodes[len(c.Graph.Nodes)-1]
			if n.Op != d.Name || n.Inputs[0].Type.DType != dt {
				t.Errorf("%s on %s: built %s on %s", d.Name, dt, n.Op, n.Inputs[0].Type.DType)
			}
		}
	}
}

func TestRandomDrawsCoverTheRegistry(t *testing.T) {
	seen := map[string]bool{}
	gen := SpecGen(DefaultConfig().MaxOps)
	for i := range 200 {
		c, err := Build(gen.Example(i), DefaultConfig())
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range c.Graph.Nodes {
			seen[n.Op] = true
		}
	}
	for _, d := range opTable() {
		if !seen[d.Name] {
			t.Errorf("op %s never drawn in 200 graphs", d.Name)
		}
	}
}

func TestBuildIsAPureFunctionOfTheSpec(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		sp := SpecGen(6).Draw(t, "spec")
		a, err1 := Build(sp, SmallConfig())
		b, err2 := Build(sp, SmallConfig())
		if err1 != nil || err2 != nil {
			t.Fatal(err1, err2)
		}
		if d := graph.Diff(a.Graph, b.Graph); d != "" {
			t.Fatalf("graphs differ: %s", d)
		}
		for name, x := range a.Inputs {
			if x.Digest() != b.Inputs[name].Digest() {
				t.Fatalf("input %s differs", name)
			}
		}
	})
}

// The shrinker drives every draw to 0; that must be the simplest graph there is.
func TestZeroSpecIsTheSimplestGraph(t *testing.T) {
	c, err := Build(Spec{Storage: storageChoices[0], Steps: []Step{{}}}, DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(strings.Fields(graph.Print(c.Graph)), " ")
	want := "graph prop { input %x0: f32[1] %t0: f32[1] = " + opTable()[0].Name + "(%x0) output %t0 }"
	if got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}

// Deleting any step (what rapid's shrinker does to a list) leaves a spec that still builds.
func TestAnySubsequenceOfStepsBuilds(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		sp := SpecGen(8).Draw(t, "spec")
		if len(sp.Steps) < 2 {
			return
		}
		i := rapid.IntRange(0, len(sp.Steps)-1).Draw(t, "delete")
		sp.Steps = slices.Delete(slices.Clone(sp.Steps), i, i+1)
		if _, err := Build(sp, DefaultConfig()); err != nil {
			t.Fatal(err)
		}
	})
}

func TestGeneratedGraphsStayWithinBudgets(t *testing.T) {
	for _, cfg := range []Config{DefaultConfig(), SmallConfig()} {
		rapid.Check(t, func(t *rapid.T) {
			c := Raw(cfg).Draw(t, "case")
			if err := graph.Verify(c.Graph); err != nil {
				t.Fatal(err)
			}
			if n := len(c.Graph.Nodes); n < 1 || n > cfg.MaxOps {
				t.Fatalf("%d nodes, want 1..%d", n, cfg.MaxOps)
			}
			for _, v := range append(slices.Clone(c.Graph.Inputs), c.Graph.Outputs...) {
				if v.Type.NumElems() > cfg.MaxElems {
					t.Fatalf("%%%s is %s: more than %d elements", v.Name, v.Type, cfg.MaxElems)
				}
			}
			if len(c.Want) != len(c.Graph.Outputs) || len(c.Tolerances) != len(c.Graph.Outputs) {
				t.Fatalf("%d outputs, %d expected values, %d tolerances", len(c.Graph.Outputs), len(c.Want), len(c.Tolerances))
			}
		})
	}
}

func TestAccumChoicesHoldTheStorageExactly(t *testing.T) {
	for dt, want := range map[numerics.DType][]numerics.DType{
		numerics.F16:    {numerics.F64, numerics.F32, numerics.F16},
		numerics.BF16:   {numerics.F64, numerics.F32, numerics.BF16},
		numerics.F32:    {numerics.F64, numerics.F32},
		numerics.F8E4M3: {numerics.F64, numerics.F32, numerics.F16, numerics.BF16},
		numerics.I8:     {numerics.I8, numerics.I32},
	} {
		got := AccumChoices(dt)
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("AccumChoices(%s) = %v, want %v", dt, got, want)
		}
	}
}

func TestSelect(t *testing.T) {
	ps, err := Select([]string{"meta/", "agree/ref"})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range ps {
		names = append(names, p.Name)
		if !strings.HasPrefix(p.Name, "meta/") && p.Name != "agree/ref" {
			t.Errorf("selected %s", p.Name)
		}
	}
	if len(ps) != 7 {
		t.Errorf("selected %v, want agree/ref and the six relations", names)
	}
	if _, err := Select([]string{"nope"}); err == nil || !strings.Contains(err.Error(), "agree/ref") {
		t.Errorf("Select(nope) = %v, want an error listing the properties", err)
	}
}
