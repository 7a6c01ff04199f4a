package spectral

import (
	"fmt"
	"math"
)

// MaxSlope is the largest growth exponent FitGrowth accepts: error ~ N^slope. A correct FFT
// grows like sqrt(log2 N) (slope about 0.05 over 2..2^20); a twiddle-factor bug like sqrt(N)
// or N (slope 0.5 or 1).
const MaxSlope = 0.2

// Growth is the least-squares fit log(err) = a + Slope*log(N) over rows with N >= MinFitN.
type Growth struct {
	Slope, Intercept float64
	Points           int
}

// MinFitN: below it a transform is a handful of roundings and its error is noise.
const MinFitN = 16

// FitGrowth fits the rows' worst relative L2 errors.
func FitGrowth(rows []Row) (Growth, error) {
	var sx, sy, sxx, sxy float64
	k := 0
	for _, r := range rows {
		if r.N < MinFitN || r.Worst() <= 0 {
			continue
		}
		x, y := math.Log(float64(r.N)), math.Log(r.Worst())
		sx, sy, sxx, sxy = sx+x, sy+y, sxx+x*x, sxy+x*y
		k++
	}
	if k < 3 {
		return Growth{}, fmt.Errorf("growth fit needs 3 lengths >= %d, got %d", MinFitN, k)
	}
	fk := float64(k)
	d := fk*sxx - sx*sx
	if d == 0 {
		return Growth{}, fmt.Errorf("growth fit: every length is the same")
	}
	slope := (fk*sxy - sx*sy) / d
	return Growth{Slope: slope, Intercept: (sy - slope*sx) / fk, Points: k}, nil
}

// Judge returns nil when every row is within its bound and the growth is below MaxSlope.
func Judge(rows []Row) error {
	for _, r := range rows {
		if !r.OK() {
			return fmt.Errorf("accuracy: %s exceeds its bound", r)
		}
	}
	g, err := FitGrowth(rows)
	if err != nil {
		return err
	}
	if g.Slope > MaxSlope {
		return fmt.Errorf("accuracy: the error grows like N^%.2f over %d lengths (allowed N^%.2f; sqrt(N) growth is a twiddle-factor bug)", g.Slope, g.Points, MaxSlope)
	}
	return nil
}

// CILengths are the lengths CI measures: small smooth and prime lengths, both sides of
// DirectMax, and large powers of two and primes (the whole range is FullLengths).
var CILengths = []int{2, 3, 4, 5, 7, 8, 12, 16, 17, 31, 60, 64, 97, 128, 243, 256, 1000, 1024, 2048, 4093, 4096,
	8192, 65536, 131071, 1 << 20}

// FullLengths: every N from 2 to 4096, then the powers of two and some primes up to 2^20
// (the nightly run).
func FullLengths() []int {
	var out []int
	for n := 2; n <= 4096; n++ {
		out = append(out, n)
	}
	for n := 8192; n <= 1<<20; n *= 2 {
		out = append(out, n)
	}
	return append(out, 8191, 65521, 131071, 524287, 1048573)
}
