package stats

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

func noisy(rng *rand.Rand, levels []float64, lens []int, sd float64) []float64 {
	var xs []float64
	for i, l := range levels {
		for j := 0; j < lens[i]; j++ {
			xs = append(xs, l*(1+sd*rng.NormFloat64()))
		}
	}
	return xs
}

func TestChangePointsFindsPlantedSteps(t *testing.T) {
	cases := []struct {
		name   string
		levels []float64
		lens   []int
		want   []int
	}{
		{"one step up 25%", []float64{1, 1.25}, []int{40, 10}, []int{40}},
		{"step at the minimum segment from the end", []float64{1, 1.25}, []int{47, 3}, []int{47}},
		{"up then back down", []float64{1, 1.3, 1}, []int{20, 15, 20}, []int{20, 35}},
		{"three levels", []float64{1, 0.8, 1.15}, []int{30, 30, 30}, []int{30, 60}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			extra := 0
			for seed := uint64(0); seed < 20; seed++ {
				xs := noisy(rand.New(rand.NewPCG(seed, 1)), c.levels, c.lens, 0.02)
				got := ChangePoints(xs, CPOptions{MinShift: 0.02})
				for _, w := range c.want {
					if !slices.Contains(got, w) {
						t.Fatalf("seed %d: change points %v miss the planted %d", seed, got, w)
					}
				}
				extra += len(got) - len(c.want)
			}
			// Noise alone makes an occasional genuine-looking dip (seed 0 has a 3.5% one
			// over 5 points at 2% noise); more than that is a bad fit.
			if extra > 2 {
				t.Fatalf("%d spurious change points over 20 series", extra)
			}
		})
	}
}

func TestChangePointsIgnoresNoise(t *testing.T) {
	falseAlarms := 0
	for seed := uint64(0); seed < 200; seed++ {
		xs := noisy(rand.New(rand.NewPCG(seed, 2)), []float64{1}, []int{200}, 0.03)
		if cps := ChangePoints(xs, CPOptions{MinShift: 0.02}); len(cps) > 0 {
			falseAlarms++
		}
	}
	// 3% noise, 200 points: a change in more than a few percent of series would flood the
	// dashboard with nothing.
	if falseAlarms > 6 {
		t.Fatalf("%d of 200 noise-only series got change points", falseAlarms)
	}
}

func TestChangePointsEdgeCases(t *testing.T) {
	if cps := ChangePoints([]float64{5, 5, 5, 5, 5, 5, 5, 5}, CPOptions{}); len(cps) != 0 {
		t.Errorf("constant series: %v", cps)
	}
	if cps := ChangePoints([]float64{1, 1, 1, 1, 2, 2, 2, 2}, CPOptions{}); !slices.Equal(cps, []int{4}) {
		t.Errorf("exact step without noise: %v, want [4]", cps)
	}
	if cps := ChangePoints([]float64{1, 9}, CPOptions{}); cps != nil {
		t.Errorf("too short: %v", cps)
	}
	// A single outlier is not a new level (segments of at least 3).
	xs := []float64{1, 1.01, 0.99, 1, 1.6, 1, 1.01, 0.99, 1, 1}
	if cps := ChangePoints(xs, CPOptions{}); len(cps) != 0 {
		t.Errorf("one outlier: %v", cps)
	}
	// MinShift merges a real but tiny change.
	step := noisy(rand.New(rand.NewPCG(3, 3)), []float64{1, 1.01}, []int{50, 50}, 0.0005)
	if cps := ChangePoints(step, CPOptions{}); !slices.Equal(cps, []int{50}) {
		t.Errorf("1%% step, tiny noise: %v, want [50]", cps)
	}
	if cps := ChangePoints(step, CPOptions{MinShift: 0.02}); len(cps) != 0 {
		t.Errorf("1%% step with MinShift 2%%: %v, want none", cps)
	}
}

func TestPELTMatchesExhaustiveSearch(t *testing.T) {
	// For short series the optimal partition can be found by trying every one.
	rng := rand.New(rand.NewPCG(9, 9))
	for trial := 0; trial < 50; trial++ {
		n := 6 + rng.IntN(7)
		xs := make([]float64, n)
		for i := range xs {
			xs[i] = float64(rng.IntN(4)) + 0.1*rng.NormFloat64()
		}
		beta := 0.5
		got := pelt(xs, 2, beta)
		want, wantCost := []int(nil), math.Inf(1)
		for mask := 0; mask < 1<<(n-1); mask++ {
			var cps []int
			ok := true
			last := 0
			for i := 1; i < n; i++ {
				if mask&(1<<(i-1)) != 0 {
					if i-last < 2 {
						ok = false
					}
					cps = append(cps, i)
					last = i
				}
			}
			if !ok || n-last < 2 {
				continue
			}
			c := beta * float64(len(cps))
			for _, s := range Segments(xs, cps) {
				for _, x := range xs[s.From:s.To] {
					c += (x - s.Mean) * (x - s.Mean)
				}
			}
			if c < wantCost-1e-9 {
				want, wantCost = cps, c
			}
		}
		if !slices.Equal(got, want) {
			t.Fatalf("series %v: PELT %v, exhaustive %v", xs, got, want)
		}
	}
}

func TestNoiseSigma(t *testing.T) {
	xs := noisy(rand.New(rand.NewPCG(4, 4)), []float64{10, 20}, []int{500, 500}, 0.01)
	// sd is 0.1 in the first half and 0.2 in the second; the step itself must not count.
	if s := NoiseSigma(xs); s < 0.1 || s > 0.2 {
		t.Fatalf("sigma %g, want between 0.1 and 0.2", s)
	}
}

func TestCompare(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	base := noisy(rng, []float64{1}, []int{200}, 0.02)
	slow := noisy(rng, []float64{1.25}, []int{10}, 0.02)
	same := noisy(rng, []float64{1}, []int{10}, 0.02)
	c := Compare(slow, base)
	if c.P > 1e-4 || c.Delta < 0.22 || c.Delta > 0.28 || c.N != 10 || c.BaselineN != 200 {
		t.Errorf("25%% slower: %+v", c)
	}
	if c := Compare(same, base); c.P < 0.01 || math.Abs(c.Delta) > 0.02 {
		t.Errorf("same distribution: %+v", c)
	}
	// One value is never significant against any baseline under benchmath's normal
	// approximation (p >= 0.08): that is why bench rows carry their samples. Three are.
	if c := Compare([]float64{2}, base); c.P < 0.05 {
		t.Errorf("single value: p %g; the docs say one value cannot be significant", c.P)
	}
	if c := Compare([]float64{2, 2.1, 1.9}, base); c.P > 0.01 {
		t.Errorf("three extreme values: p %g", c.P)
	}
	if c := Compare(nil, base); c.P != 1 || c.Delta != 0 {
		t.Errorf("empty candidate: %+v", c)
	}
	if m := Median([]float64{3, 1, 2, 10}); m != 2.5 {
		t.Errorf("median %g", m)
	}
}
