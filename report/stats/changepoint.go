package stats

import (
	"math"
	"slices"
)

// CPOptions tune ChangePoints; zero fields take the defaults in parentheses.
type CPOptions struct {
	MinSeg  int     // shortest segment (3)
	Penalty float64 // penalty per segment in units of sigma^2 * ln(n) (3)
	// MinShift: adjacent segments whose levels differ by less than this fraction are merged
	// (0: keep every change the fit finds).
	MinShift float64
}

// ChangePoints finds where the level of xs changes. Method (docs/reporter.md): fit xs with a
// piecewise-constant function minimizing
//
//	sum over segments of the squared deviations from the segment mean + beta * #segments
//
// with segments at least MinSeg long and beta = Penalty * sigma^2 * ln(n), sigma the noise
// level estimated robustly from first differences (1.4826 * MAD(diff) / sqrt 2), so a step of
// a few sigma over a few points is found while noise alone rarely is. (Penalty 2 is BIC for a
// change in mean; 3 trades a little sensitivity for fewer false changes over many series.)
// The minimum is found exactly by dynamic programming with PELT pruning (Killick et al.
// 2012), near linear in n. Before the fit a Hampel filter replaces isolated outliers (a point
// more than 3 sigma from the median of the 5 points around it) by that median, since one odd
// run would otherwise become a segment of its own. Last, neighbouring segments whose levels differ by less than
// MinShift (relative) are merged, smallest difference first: a change too small to act on is
// not worth showing.
//
// It returns the indexes where a new segment starts (never 0), ascending.
func ChangePoints(xs []float64, o CPOptions) []int {
	if o.MinSeg < 1 {
		o.MinSeg = 3
	}
	if o.Penalty <= 0 {
		o.Penalty = 3
	}
	n := len(xs)
	if n < 2*o.MinSeg {
		return nil
	}
	sigma := NoiseSigma(xs)
	scale := meanAbs(xs)
	// A floor keeps the penalty positive on exactly constant data (sigma 0).
	sigma = math.Max(sigma, 1e-9*math.Max(scale, 1e-300))
	cps := pelt(despike(xs, sigma), o.MinSeg, o.Penalty*sigma*sigma*math.Log(float64(n)))
	if o.MinShift > 0 {
		cps = mergeSmall(xs, cps, o.MinShift)
	}
	return cps
}

// despike returns xs with isolated outliers replaced by their local median (Hampel filter,
// window 5, 3 sigma). A level shift of 3 or more points survives: at each of its points most of
// the window sits on the new level.
func despike(xs []float64, sigma float64) []float64 {
	out := slices.Clone(xs)
	var win [5]float64
	for i := range xs {
		lo, hi := max(i-2, 0), min(i+3, len(xs))
		w := win[:hi-lo]
		copy(w, xs[lo:hi])
		m := Median(w)
		if math.Abs(xs[i]-m) > 3*sigma {
			out[i] = m
		}
	}
	return out
}

// mergeSmall removes change points whose two sides differ by less than minShift relative to
// the left level, the smallest first, recomputing levels after each removal.
func mergeSmall(xs []float64, cps []int, minShift float64) []int {
	for len(cps) > 0 {
		segs := Segments(xs, cps)
		best, bestShift := -1, math.Inf(1)
		for i := 0; i+1 < len(segs); i++ {
			a, b := segs[i].Mean, segs[i+1].Mean
			shift := math.Abs(b-a) / math.Max(math.Abs(a), 1e-300)
			if shift < bestShift {
				best, bestShift = i, shift
			}
		}
		if bestShift >= minShift {
			break
		}
		cps = append(cps[:best], cps[best+1:]...)
	}
	return cps
}

// pelt minimizes total segment cost + beta per segment.
func pelt(xs []float64, minSeg int, beta float64) []int {
	n := len(xs)
	// Prefix sums of the centred data keep the cost formula well conditioned.
	mu := mean(xs)
	s1 := make([]float64, n+1)
	s2 := make([]float64, n+1)
	for i, x := range xs {
		d := x - mu
		s1[i+1] = s1[i] + d
		s2[i+1] = s2[i] + d*d
	}
	cost := func(a, b int) float64 { // squared deviation of xs[a:b] from its mean
		m := float64(b - a)
		s := s1[b] - s1[a]
		return math.Max(s2[b]-s2[a]-s*s/m, 0)
	}
	f := make([]float64, n+1)
	prev := make([]int, n+1)
	f[0] = -beta
	live := []int{0}
	for t := 1; t <= n; t++ {
		f[t] = math.Inf(1)
		prev[t] = -1
		for _, tau := range live {
			if t-tau < minSeg || math.IsInf(f[tau], 1) {
				continue
			}
			if v := f[tau] + cost(tau, t) + beta; v < f[t] {
				f[t], prev[t] = v, tau
			}
		}
		// PELT: a start that cannot beat the best now never will (the cost is additive and
		// adding a point never lowers it). Starts too recent to be judged stay.
		kept := live[:0]
		for _, tau := range live {
			if t-tau < minSeg || math.IsInf(f[tau], 1) || f[tau]+cost(tau, t) <= f[t] {
				kept = append(kept, tau)
			}
		}
		live = append(kept, t)
	}
	var cps []int
	for t := prev[n]; t > 0; t = prev[t] {
		cps = append(cps, t)
	}
	slices.Reverse(cps)
	return cps
}

// NoiseSigma estimates the noise standard deviation of xs from its first differences, which a
// few level shifts barely move: 1.4826 * MAD(diff) / sqrt(2).
func NoiseSigma(xs []float64) float64 {
	if len(xs) < 3 {
		return 0
	}
	d := make([]float64, len(xs)-1)
	for i := range d {
		d[i] = xs[i+1] - xs[i]
	}
	med := Median(d)
	for i := range d {
		d[i] = math.Abs(d[i] - med)
	}
	return 1.4826 * Median(d) / math.Sqrt2
}

// Segment is xs[From:To] with its mean.
type Segment struct {
	From, To int
	Mean     float64
}

// Segments splits xs at the change points cps.
func Segments(xs []float64, cps []int) []Segment {
	if len(xs) == 0 {
		return nil
	}
	bounds := append(append([]int{0}, cps...), len(xs))
	out := make([]Segment, 0, len(bounds)-1)
	for i := 0; i+1 < len(bounds); i++ {
		a, b := bounds[i], bounds[i+1]
		out = append(out, Segment{a, b, mean(xs[a:b])})
	}
	return out
}

func mean(xs []float64) float64 {
	s := 0.0
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}

func meanAbs(xs []float64) float64 {
	s := 0.0
	for _, x := range xs {
		s += math.Abs(x)
	}
	return s / float64(len(xs))
}
