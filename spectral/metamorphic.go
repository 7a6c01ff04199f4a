package spectral

import (
	"fmt"
	"math"

	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

// Property is one metamorphic relation of the DFT measured on the engine: the relative L2
// distance between its two sides, judged by Slack x Bound (each side is a transform or two).
type Property struct {
	Name  string
	N     int
	Err   float64
	Limit float64
}

// OK reports whether the relation holds within its limit.
func (p Property) OK() bool { return p.Err <= p.Limit && !math.IsNaN(p.Err) }

func (p Property) String() string {
	return fmt.Sprintf("%s N=%d: %.3g (limit %.3g)", p.Name, p.N, p.Err, p.Limit)
}

// Slack covers the relations whose sides each take a transform and a few extra roundings.
const Slack = 4

func scaled(x []complex128, a complex128) []complex128 {
	out := make([]complex128, len(x))
	for i, z := range x {
		out[i] = z * a
	}
	return out
}

// Properties measures linearity, Parseval, the shift and modulation theorems, the round trip
// and the Hermitian symmetry of a real input's spectrum at length n in dtype dt.
func Properties(dt numerics.DType, n int, seed uint64) ([]Property, error) {
	limit := Slack * Bound(dt, n)
	x, y := Uniform(dt, n, seed), Uniform(dt, n, seed+1)
	fx, err := Transform("fft", dt, x)
	if err != nil {
		return nil, err
	}
	fy, err := Transform("fft", dt, y)
	if err != nil {
		return nil, err
	}
	var out []Property
	add := func(name string, got, want []complex128) {
		l2, _ := Errors(got, want)
		out = append(out, Property{Name: name, N: n, Err: l2, Limit: limit})
	}
	rnd := func(v []complex128) []complex128 { // inputs must be dtype values
		for i, z := range v {
			v[i] = complex(numerics.Round(dt, real(z)), numerics.Round(dt, imag(z)))
		}
		return v
	}
	// Linearity with a = 2 and b = -0.5 (exact scalings, so the input sum is the only rounding).
	lin := make([]complex128, n)
	for i := range lin {
		lin[i] = 2*x[i] - 0.5*y[i]
	}
	fl, err := Transform("fft", dt, rnd(lin))
	if err != nil {
		return nil, err
	}
	want := make([]complex128, n)
	for i := range want {
		want[i] = 2*fx[i] - 0.5*fy[i]
	}
	add("linearity", fl, want)
	// Parseval: N * sum |x|^2 = sum |X|^2.
	var ex, eX float64
	for i := range x {
		ex += real(x[i])*real(x[i]) + imag(x[i])*imag(x[i])
		eX += real(fx[i])*real(fx[i]) + imag(fx[i])*imag(fx[i])
	}
	out = append(out, Property{Name: "parseval", N: n, Err: math.Abs(eX-float64(n)*ex) / (float64(n) * ex), Limit: limit})
	// Shift: fft(x[j-s]) = X_k * exp(-2 pi i k s / N).
	s := n/3 + 1
	sh := make([]complex128, n)
	for j := range sh {
		sh[j] = x[((j-s)%n+n)%n]
	}
	fs, err := Transform("fft", dt, sh)
	if err != nil {
		return nil, err
	}
	for k := range want {
		want[k] = fx[k] * tw(k*s%n, n, -1)
	}
	add("shift", fs, want)
	// Modulation: fft(x_j * exp(2 pi i j m / N)) = X_{k-m}.
	m := n/4 + 1
	mod := make([]complex128, n)
	for j := range mod {
		mod[j] = x[j] * tw(j*m%n, n, 1)
	}
	fm, err := Transform("fft", dt, rnd(mod))
	if err != nil {
		return nil, err
	}
	for k := range want {
		want[k] = fx[((k-m)%n+n)%n]
	}
	add("modulation", fm, want)
	// Round trip.
	back, err := Transform("ifft", dt, fx)
	if err != nil {
		return nil, err
	}
	add("ifft(fft(x))=x", back, x)
	// Hermitian symmetry of a real input's spectrum: X_{N-k} = conj(X_k).
	re := make([]complex128, n)
	for i := range re {
		re[i] = complex(real(x[i]), 0)
	}
	fr, err := Transform("fft", dt, re)
	if err != nil {
		return nil, err
	}
	for k := range want {
		z := fr[(n-k)%n]
		want[k] = complex(real(z), -imag(z))
	}
	add("hermitian", fr, want)
	return out, nil
}
