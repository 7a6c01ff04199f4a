package stats

import (
	"math"
	"slices"

	"golang.org/x/perf/benchmath"
)

// Comparison of a candidate sample with a baseline sample.
type Comparison struct {
	// P is the two-sided Mann-Whitney U p-value (1 when either sample is empty).
	P float64
	// Delta is median(candidate)/median(baseline) - 1: +0.25 is 25% larger.
	Delta                  float64
	Median, BaselineMedian float64
	N, BaselineN           int
}

// Compare tests whether candidate and baseline differ in location. It makes no assumption on
// the distributions (benchmath.AssumeNothing: Mann-Whitney U, exact for small samples).
func Compare(candidate, baseline []float64) Comparison {
	c := Comparison{P: 1, N: len(candidate), BaselineN: len(baseline)}
	if len(candidate) == 0 || len(baseline) == 0 {
		return c
	}
	c.Median, c.BaselineMedian = Median(candidate), Median(baseline)
	if c.BaselineMedian != 0 {
		c.Delta = c.Median/c.BaselineMedian - 1
	} else if c.Median != 0 {
		c.Delta = math.Inf(1)
	}
	th := &benchmath.Thresholds{CompareAlpha: 0.05}
	r := benchmath.AssumeNothing.Compare(benchmath.NewSample(candidate, th), benchmath.NewSample(baseline, th))
	if !math.IsNaN(r.P) {
		c.P = r.P
	}
	return c
}

// Median of xs (not modified); 0 for none.
func Median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}
