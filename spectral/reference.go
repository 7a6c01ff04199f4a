package spectral

import (
	"math"
	"math/bits"
)

// DirectMax is the largest N the reference computes by the definition (O(N^2), compensated);
// above it the reference is a float64 fast transform whose own error (about 1e-16 *
// sqrt(log2 N)) is far below f32's unit roundoff, so it judges f32 transforms only.
const DirectMax = 4096

// tw is exp(sign * 2*pi*i*k/n), the angle reduced exactly (k mod n).
func tw(k, n int, sign float64) complex128 {
	k %= n
	s, c := math.Sincos(sign * 2 * math.Pi * float64(k) / float64(n))
	return complex(c, s)
}

// twoSum is Knuth's error-free addition: s + e = a + b exactly.
func twoSum(a, b float64) (s, e float64) {
	s = a + b
	bb := s - a
	e = (a - (s - bb)) + (b - bb)
	return s, e
}

// directDFT is the DFT by its definition, each output's sum compensated (Kahan-Babuska via
// twoSum) so the sum adds no error beyond the products'.
func directDFT(x []complex128, sign float64) []complex128 {
	n := len(x)
	w := make([]complex128, n)
	for k := range n {
		w[k] = tw(k, n, sign)
	}
	out := make([]complex128, n)
	for k := range n {
		var sr, si, cr, ci float64
		for j := range n {
			p := x[j] * w[(j*k)%n]
			var e float64
			sr, e = twoSum(sr, real(p))
			cr += e
			si, e = twoSum(si, imag(p))
			ci += e
		}
		out[k] = complex(sr+cr, si+ci)
	}
	return out
}

// radix2 is an iterative in-place radix-2 transform (bit reversal, then butterflies), n a
// power of two.
func radix2(a []complex128, sign float64) {
	n := len(a)
	if n <= 1 {
		return
	}
	shift := 64 - bits.Len(uint(n-1))
	for i := range n {
		j := int(bits.Reverse64(uint64(i)) >> shift)
		if j > i {
			a[i], a[j] = a[j], a[i]
		}
	}
	w := make([]complex128, n/2)
	for k := range w {
		w[k] = tw(k, n, sign)
	}
	for size := 2; size <= n; size *= 2 {
		half, step := size/2, n/size
		for start := 0; start < n; start += size {
			for k := range half {
				t := a[start+k+half] * w[k*step]
				a[start+k+half] = a[start+k] - t
				a[start+k] += t
			}
		}
	}
}

// fastDFT: radix2 for powers of two, else Bluestein over a power-of-two radix2.
func fastDFT(x []complex128, sign float64) []complex128 {
	n := len(x)
	out := make([]complex128, n)
	if n&(n-1) == 0 {
		copy(out, x)
		radix2(out, sign)
		return out
	}
	m := 1 << bits.Len(uint(2*n-2))
	chirp := make([]complex128, n)
	for k := range n {
		r := (int64(k) * int64(k)) % int64(2*n)
		s, c := math.Sincos(sign * math.Pi * float64(r) / float64(n))
		chirp[k] = complex(c, s)
	}
	a, b := make([]complex128, m), make([]complex128, m)
	for k := range n {
		a[k] = x[k] * chirp[k]
		cc := complex(real(chirp[k]), -imag(chirp[k]))
		b[k] = cc
		if k > 0 {
			b[m-k] = cc
		}
	}
	radix2(a, -1)
	radix2(b, -1)
	for i := range a {
		a[i] *= b[i]
	}
	radix2(a, 1)
	for k := range n {
		out[k] = a[k] * complex(1/float64(m), 0) * chirp[k]
	}
	return out
}

// Reference is the float64 DFT of x: sign -1 forward, +1 inverse, unnormalised.
func Reference(x []complex128, sign float64) []complex128 {
	if len(x) <= DirectMax {
		return directDFT(x, sign)
	}
	return fastDFT(x, sign)
}
