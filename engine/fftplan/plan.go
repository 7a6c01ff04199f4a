// Package fftplan is the one definition of Tessera's fast Fourier transform that every
// backend follows: the plan (mixed radix 4, 2, 3, 5 and any other prime up to MaxDirectRadix,
// decimation in time, outermost radix first, for lengths whose prime factors are small;
// Bluestein's chirp-z algorithm through a power-of-two convolution of length M for the rest),
// the twiddle and chirp tables, and a reference executor (Forward, Inverse) that the CPU backend
// runs as it is and the PTX generator mirrors operation for operation (docs/spectral.md: the
// bit contract between backends). It is generic over complex64 (the f32 path: every add and
// multiply rounds to f32) and complex128.
//
// Twiddle factors are computed in float64 from the exactly reduced angle 2*pi*(k mod n)/n and
// rounded once to the working precision, so their error does not grow with k or n. A GPU
// receives these very tables as device buffers; it never evaluates a sine of its own.
//
// Go's complex multiply is (ac-bd) + (ad+bc)i without fused multiply-add on amd64, so the
// bits of a transform are the same run after run and process after process.
package fftplan

import (
	"math"
	"math/bits"
	"sync"

	"github.com/tessera-qa/tessera-qa/engine/failpoint"
)

// Complex is the working precision of a plan: complex64 (f32 arithmetic) or complex128.
type Complex interface{ ~complex64 | ~complex128 }

// MaxDirectRadix is the largest prime a butterfly handles directly (O(p^2) per group).
const MaxDirectRadix = 13

// Plan is the transform of one length N in one precision. Plans are shared and immutable.
type Plan[C Complex] struct {
	N       int
	Radices []int // N = product, applied outermost first; nil for N <= 1 and for Bluestein
	Tw      []C   // Tw[k] = exp(-2*pi*i*k/N), k < N (smooth N only)
	// Bluestein: M is the power-of-two convolution length, Chirp[k] = exp(-i*pi*k^2/N),
	// BFFT the transform of the conjugate chirp's symmetric extension, Sub the length-M plan.
	M     int
	Chirp []C
	BFFT  []C
	Sub   *Plan[C]
}

var planCache sync.Map // key: planKey -> *Plan[C]

type planKey struct {
	n    int
	wide bool
}

// For returns the shared plan of length n in precision C.
func For[C Complex](n int) *Plan[C] {
	var zero C
	_, wide := any(zero).(complex128)
	k := planKey{n, wide}
	if p, ok := planCache.Load(k); ok {
		return p.(*Plan[C])
	}
	p := newFFTPlan[C](n)
	q, _ := planCache.LoadOrStore(k, p)
	return q.(*Plan[C])
}

// twiddle is exp(-2*pi*i*k/n) in float64, k reduced mod n first.
func twiddle(k, n int) complex128 {
	k %= n
	if k < 0 {
		k += n
	}
	if 4*k%n == 0 { // quarter turns exactly: 1, -i, -1, i
		return [4]complex128{1, -1i, -1, 1i}[4*k/n]
	}
	s, c := math.Sincos(-2 * math.Pi * float64(k) / float64(n))
	return complex(c, s)
}

// twiddleTable is exp(-2*pi*i*k/n) for k < n, rounded to complex64 unless wide.
func twiddleTable(n int, wide bool) []complex128 {
	tw := make([]complex128, n)
	if failpoint.Enabled(failpoint.CPUFFTTwiddleRecurrence) {
		// The planted bug: twiddles by the recurrence w_k = w_(k-1) * w_1 in the working
		// precision, whose error grows with k (about k ulps), so with n.
		w1 := twiddle(1, n)
		w32, c32 := complex64(w1), complex64(1)
		tw[0] = 1
		for k := 1; k < n; k++ {
			if wide {
				tw[k] = tw[k-1] * w1
			} else {
				c32 *= w32
				tw[k] = complex128(c32)
			}
		}
		return tw
	}
	for k := range n {
		tw[k] = twiddle(k, n)
		if !wide {
			tw[k] = complex128(complex64(tw[k]))
		}
	}
	return tw
}

func factor(n int) (radices []int, smooth bool) {
	for n%4 == 0 {
		radices = append(radices, 4)
		n /= 4
	}
	for _, p := range []int{2, 3, 5, 7, 11, 13} {
		for n%p == 0 {
			radices = append(radices, p)
			n /= p
		}
	}
	return radices, n == 1
}

func newFFTPlan[C Complex](n int) *Plan[C] {
	p := &Plan[C]{N: n}
	if n <= 1 {
		return p
	}
	rad, smooth := factor(n)
	if smooth {
		p.Radices = rad
		p.Tw = make([]C, n)
		var zero C
		_, wide := any(zero).(complex128)
		for k, w := range twiddleTable(n, wide) {
			p.Tw[k] = C(w)
		}
		return p
	}
	// Bluestein: X_k = c_k * sum_j (x_j c_j) Conj(c_{k-j}), c_k = exp(-i pi k^2 / n).
	m := 1 << bits.Len(uint(2*n-2))
	p.M = m
	p.Sub = For[C](m)
	p.Chirp = make([]C, n)
	for k := range n {
		// k^2 mod 2n exactly, so the angle pi*k^2/n is reduced without rounding.
		r := int((int64(k) * int64(k)) % int64(2*n))
		s, c := math.Sincos(-math.Pi * float64(r) / float64(n))
		p.Chirp[k] = C(complex(c, s))
	}
	b := make([]C, m)
	for k := range n {
		b[k] = Conj(p.Chirp[k])
		if k > 0 {
			b[m-k] = b[k]
		}
	}
	p.BFFT = make([]C, m)
	p.Sub.Forward(b, p.BFFT)
	return p
}

// Conj is the complex conjugate (the imaginary part's sign bit flipped).
func Conj[C Complex](z C) C {
	switch v := any(z).(type) {
	case complex64:
		return C(complex(real(v), -imag(v)))
	case complex128:
		return C(complex(real(v), -imag(v)))
	}
	return z
}

// Forward writes the DFT of in (length n, unnormalised, sign -1) to out; in is not changed.
func (p *Plan[C]) Forward(in, out []C) {
	switch {
	case p.N == 0:
	case p.N == 1:
		out[0] = in[0]
	case p.M > 0:
		p.bluestein(in, out)
	default:
		scratch := make([]C, p.N)
		p.rec(in, 1, out, scratch, 0, 1)
	}
}

// rec computes the length-(n/step) DFT of in[0], in[stride], ... into out, using twiddles
// tw[k*step]; level indexes radices.
func (p *Plan[C]) rec(in []C, stride int, out, scratch []C, level, step int) {
	len_ := p.N / step
	if len_ == 1 {
		out[0] = in[0]
		return
	}
	r := p.Radices[level]
	m := len_ / r
	// Sub-transforms of the r decimated sequences, j-th into out[j*m : (j+1)*m].
	for j := range r {
		p.rec(in[j*stride:], stride*r, scratch[j*m:(j+1)*m], out[j*m:(j+1)*m], level+1, step*r)
	}
	// Combine: X[k + m*q] = sum_j W_len^{j*k} W_r^{j*q} Y_j[k].
	tw := p.Tw
	switch r {
	case 2:
		for k := range m {
			a := scratch[k]
			b := scratch[m+k] * tw[k*step]
			out[k], out[k+m] = a+b, a-b
		}
	case 4:
		for k := range m {
			a := scratch[k]
			b := scratch[m+k] * tw[k*step]
			c := scratch[2*m+k] * tw[2*k*step]
			d := scratch[3*m+k] * tw[3*k*step]
			s0, s1 := a+c, a-c
			s2, s3 := b+d, b-d
			s3 = mulNegI(s3) // -i*(b-d)
			out[k], out[k+m], out[k+2*m], out[k+3*m] = s0+s2, s1+s3, s0-s2, s1-s3
		}
	default:
		var buf [MaxDirectRadix]C
		wr := p.N / r // W_r = tw[wr]
		for k := range m {
			for j := range r {
				buf[j] = scratch[j*m+k]
				if j > 0 {
					buf[j] *= tw[(j*k*step)%p.N]
				}
			}
			for q := range r {
				s := buf[0]
				for j := 1; j < r; j++ {
					s += buf[j] * tw[(j*q%r)*wr]
				}
				out[k+q*m] = s
			}
		}
	}
}

func mulNegI[C Complex](z C) C {
	switch v := any(z).(type) {
	case complex64:
		return C(complex(imag(v), -real(v)))
	case complex128:
		return C(complex(imag(v), -real(v)))
	}
	return z
}

func (p *Plan[C]) bluestein(in, out []C) {
	a := make([]C, p.M)
	for k := range p.N {
		a[k] = in[k] * p.Chirp[k]
	}
	fa := make([]C, p.M)
	p.Sub.Forward(a, fa)
	for k := range fa {
		fa[k] *= p.BFFT[k]
	}
	// Inverse of length m by conjugation; 1/m is a power of two, so the scaling is exact.
	for k := range fa {
		fa[k] = Conj(fa[k])
	}
	p.Sub.Forward(fa, a)
	inv := C(complex(1/float64(p.M), 0))
	for k := range p.N {
		out[k] = Conj(a[k]) * inv * p.Chirp[k]
	}
}

// Inverse writes the unnormalised inverse DFT (sign +1) of in to out: Conj(F(Conj(in))).
func (p *Plan[C]) Inverse(in, out []C) {
	tmp := make([]C, len(in))
	for i, z := range in {
		tmp[i] = Conj(z)
	}
	p.Forward(tmp, out)
	for i := range out[:p.N] {
		out[i] = Conj(out[i])
	}
}
