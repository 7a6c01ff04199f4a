package dashboard

import (
	"math"
	"strconv"
)

// linear maps a data interval onto a pixel interval. Pixel intervals may run backwards (the
// y axis grows downwards on screen).
type linear struct {
	d0, d1 float64 // data
	p0, p1 float64 // pixels
}

func (s linear) at(v float64) float64 {
	if s.d1 == s.d0 {
		return (s.p0 + s.p1) / 2
	}
	return s.p0 + (v-s.d0)/(s.d1-s.d0)*(s.p1-s.p0)
}

// clamp keeps a pixel inside the scale's range, so an outlier sample draws to the plot's
// edge instead of over the axis labels.
func (s linear) clamp(p float64) float64 {
	lo, hi := min(s.p0, s.p1), max(s.p0, s.p1)
	return math.Max(lo, math.Min(hi, p))
}

// niceRange widens [lo, hi] to round tick values about n ticks apart and returns the ticks.
// The steps are 1, 2, 2.5 and 5 times a power of ten: what a person expects to read on an
// axis. A flat range is opened by 5% of its value (or by 1 around zero).
func niceRange(lo, hi float64, n int) (float64, float64, []float64) {
	if math.IsNaN(lo) || math.IsNaN(hi) || math.IsInf(lo, 0) || math.IsInf(hi, 0) {
		lo, hi = 0, 1
	}
	if hi < lo {
		lo, hi = hi, lo
	}
	if hi == lo {
		pad := math.Abs(lo) * 0.05
		if pad == 0 {
			pad = 1
		}
		lo, hi = lo-pad, hi+pad
	}
	if n < 2 {
		n = 2
	}
	step := niceStep((hi - lo) / float64(n))
	first := roundTo(math.Floor(lo/step)*step, step)
	last := roundTo(math.Ceil(hi/step)*step, step)
	var ticks []float64
	// Counting steps instead of adding them keeps 0.1+0.2 from drifting into a label.
	for i := 0; ; i++ {
		v := first + float64(i)*step
		if v > last+step/2 || i > 100 {
			break
		}
		ticks = append(ticks, roundTo(v, step))
	}
	return first, last, ticks
}

func niceStep(raw float64) float64 {
	if raw <= 0 || math.IsNaN(raw) || math.IsInf(raw, 0) {
		return 1
	}
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if raw <= m*mag {
			return m * mag
		}
	}
	return 10 * mag
}

// roundTo removes floating point dust from a tick value that is a multiple of step.
func roundTo(v, step float64) float64 {
	d := decimals(step)
	p := math.Pow(10, float64(d))
	return math.Round(v*p) / p
}

// decimals is how many digits after the point a step needs (0.25 -> 2, 5 -> 0).
func decimals(step float64) int {
	d := 0
	for d < 12 && math.Abs(step*math.Pow(10, float64(d))-math.Round(step*math.Pow(10, float64(d)))) > 1e-9 {
		d++
	}
	return d
}

// tickLabel formats tick values of one axis with the same number of decimals.
func tickLabel(v, step float64) string {
	if step >= 1e6 || (step < 1e-4 && step > 0) {
		return strconv.FormatFloat(v, 'g', 3, 64)
	}
	return strconv.FormatFloat(v, 'f', decimals(step), 64)
}

// px formats a pixel coordinate: one decimal is finer than a screen pixel and keeps pages small.
func px(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "0"
	}
	return strconv.FormatFloat(math.Round(v*10)/10, 'f', -1, 64)
}
