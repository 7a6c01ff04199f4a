package spectral

import (
	"math"
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

func TestAccuracyTable(t *testing.T) {
	var rows []Row
	for _, n := range CILengths[:22] { // to 8192: the suite measures the large lengths
		r, err := Measure(numerics.F32, n, 1)
		if err != nil {
			t.Fatal(err)
		}
		t.Log(r)
		rows = append(rows, r)
	}
	g, err := FitGrowth(rows)
	t.Logf("growth %+v %v", g, err)
	if err := Judge(rows); err != nil {
		t.Error(err)
	}
}

func TestProperties(t *testing.T) {
	for _, n := range []int{2, 7, 16, 60, 97, 1024, 4093} {
		ps, err := Properties(numerics.F32, n, 3)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range ps {
			if !p.OK() {
				t.Error(p)
			}
		}
	}
}

// The growth fit sees sqrt(N) growth in a synthetic table and accepts sqrt(log2 N).
func TestFitGrowthSeparatesTheTwoLaws(t *testing.T) {
	var good, bad []Row
	for n := 16; n <= 1<<20; n *= 4 {
		l := math.Log2(float64(n))
		good = append(good, Row{N: n, FwdL2: 6e-8 * math.Sqrt(l)})
		bad = append(bad, Row{N: n, FwdL2: 6e-8 * math.Sqrt(float64(n))})
	}
	g, _ := FitGrowth(good)
	b, _ := FitGrowth(bad)
	if g.Slope > MaxSlope || b.Slope < 0.45 || b.Slope > 0.55 {
		t.Errorf("slopes %.3f (sqrt log N) and %.3f (sqrt N)", g.Slope, b.Slope)
	}
}
