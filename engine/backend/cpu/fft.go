package cpu

import (
	"math"
	"math/bits"
	"sync"

	"github.com/tessera-qa/tessera-qa/engine/compiler/tile"
	"github.com/tessera-qa/tessera-qa/engine/failpoint"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

// The CPU backend's fast Fourier transform: mixed radix (4, 2, 3, 5 and any other prime up to
// maxDirectRadix, decimation in time, recursive) for lengths whose prime factors are small,
// Bluestein's chirp-z algorithm (a convolution of power-of-two length) for the rest. It is
// generic over complex64 (the f32 path: every add and multiply rounds to f32) and complex128.
// Twiddle factors are computed in float64 from the exactly reduced angle 2*pi*(k mod n)/n and
// rounded once to the working precision, so their error does not grow with k or n.
//
// Go's complex multiply is (ac-bd) + (ad+bc)i without fused multiply-add on amd64, so the
// bits of a transform are the same run after run and process after process.

type cplx interface{ ~complex64 | ~complex128 }

// maxDirectRadix is the largest prime a butterfly handles directly (O(p^2) per group).
const maxDirectRadix = 13

type fftPlan[C cplx] struct {
	n       int
	radices []int // n = product, applied outermost first
	tw      []C   // tw[k] = exp(-2*pi*i*k/n), k < n
	// Bluestein: m is the power-of-two convolution length, chirp[k] = exp(-i*pi*k^2/n),
	// bfft the transform of the conjugate chirp's symmetric extension, sub the length-m plan.
	m     int
	chirp []C
	bfft  []C
	sub   *fftPlan[C]
}

var planCache sync.Map // key: planKey -> *fftPlan[C]

type planKey struct {
	n    int
	wide bool
}

func planFor[C cplx](n int) *fftPlan[C] {
	var zero C
	_, wide := any(zero).(complex128)
	k := planKey{n, wide}
	if p, ok := planCache.Load(k); ok {
		return p.(*fftPlan[C])
	}
	p := newFFTPlan[C](n)
	q, _ := planCache.LoadOrStore(k, p)
	return q.(*fftPlan[C])
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

func newFFTPlan[C cplx](n int) *fftPlan[C] {
	p := &fftPlan[C]{n: n}
	if n <= 1 {
		return p
	}
	rad, smooth := factor(n)
	if smooth {
		p.radices = rad
		p.tw = make([]C, n)
		var zero C
		_, wide := any(zero).(complex128)
		for k, w := range twiddleTable(n, wide) {
			p.tw[k] = C(w)
		}
		return p
	}
	// Bluestein: X_k = c_k * sum_j (x_j c_j) conj(c_{k-j}), c_k = exp(-i pi k^2 / n).
	m := 1 << bits.Len(uint(2*n-2))
	p.m = m
	p.sub = planFor[C](m)
	p.chirp = make([]C, n)
	for k := range n {
		// k^2 mod 2n exactly, so the angle pi*k^2/n is reduced without rounding.
		r := int((int64(k) * int64(k)) % int64(2*n))
		s, c := math.Sincos(-math.Pi * float64(r) / float64(n))
		p.chirp[k] = C(complex(c, s))
	}
	b := make([]C, m)
	for k := range n {
		b[k] = conj(p.chirp[k])
		if k > 0 {
			b[m-k] = b[k]
		}
	}
	p.bfft = make([]C, m)
	p.sub.forward(b, p.bfft)
	return p
}

func conj[C cplx](z C) C {
	switch v := any(z).(type) {
	case complex64:
		return C(complex(real(v), -imag(v)))
	case complex128:
		return C(complex(real(v), -imag(v)))
	}
	return z
}

// forward writes the DFT of in (length n, unnormalised, sign -1) to out; in is not changed.
func (p *fftPlan[C]) forward(in, out []C) {
	switch {
	case p.n == 0:
	case p.n == 1:
		out[0] = in[0]
	case p.m > 0:
		p.bluestein(in, out)
	default:
		scratch := make([]C, p.n)
		p.rec(in, 1, out, scratch, 0, 1)
	}
}

// rec computes the length-(n/step) DFT of in[0], in[stride], ... into out, using twiddles
// tw[k*step]; level indexes radices.
func (p *fftPlan[C]) rec(in []C, stride int, out, scratch []C, level, step int) {
	len_ := p.n / step
	if len_ == 1 {
		out[0] = in[0]
		return
	}
	r := p.radices[level]
	m := len_ / r
	// Sub-transforms of the r decimated sequences, j-th into out[j*m : (j+1)*m].
	for j := range r {
		p.rec(in[j*stride:], stride*r, scratch[j*m:(j+1)*m], out[j*m:(j+1)*m], level+1, step*r)
	}
	// Combine: X[k + m*q] = sum_j W_len^{j*k} W_r^{j*q} Y_j[k].
	tw := p.tw
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
		var buf [maxDirectRadix]C
		wr := p.n / r // W_r = tw[wr]
		for k := range m {
			for j := range r {
				buf[j] = scratch[j*m+k]
				if j > 0 {
					buf[j] *= tw[(j*k*step)%p.n]
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

func mulNegI[C cplx](z C) C {
	switch v := any(z).(type) {
	case complex64:
		return C(complex(imag(v), -real(v)))
	case complex128:
		return C(complex(imag(v), -real(v)))
	}
	return z
}

func (p *fftPlan[C]) bluestein(in, out []C) {
	a := make([]C, p.m)
	for k := range p.n {
		a[k] = in[k] * p.chirp[k]
	}
	fa := make([]C, p.m)
	p.sub.forward(a, fa)
	for k := range fa {
		fa[k] *= p.bfft[k]
	}
	// Inverse of length m by conjugation; 1/m is a power of two, so the scaling is exact.
	for k := range fa {
		fa[k] = conj(fa[k])
	}
	p.sub.forward(fa, a)
	inv := C(complex(1/float64(p.m), 0))
	for k := range p.n {
		out[k] = conj(a[k]) * inv * p.chirp[k]
	}
}

// inverse writes the unnormalised inverse DFT (sign +1) of in to out: conj(F(conj(in))).
func (p *fftPlan[C]) inverse(in, out []C) {
	tmp := make([]C, len(in))
	for i, z := range in {
		tmp[i] = conj(z)
	}
	p.forward(tmp, out)
	for i := range out[:p.n] {
		out[i] = conj(out[i])
	}
}

// fft executes a tile.FFT: each row of Src transformed on its own, in the instruction's
// precision, then scaled.
func (w *worker) fft(in tile.FFT) {
	src := w.regs[in.Src].get64()
	rows := w.regs[in.Src].rows
	incols, outcols := tile.FFTCols(in.Kind, in.N)
	td := &w.regs[in.Dst]
	td.rows, td.cols = rows, outcols
	out := td.out64()
	if in.DType == numerics.F64 {
		fftRows[complex128](in, src, out, rows, incols, outcols, func(x float64) float64 { return x })
		return
	}
	fftRows[complex64](in, src, out, rows, incols, outcols, func(x float64) float64 { return float64(float32(x)) })
}

func fftRows[C cplx](in tile.FFT, src, out []float64, rows, incols, outcols int, rnd func(float64) float64) {
	n := in.N
	p := planFor[C](n)
	a, z := make([]C, n), make([]C, n)
	scale := rnd(in.Scale)
	mk := func(re, im float64) C { return C(complex(rnd(re), rnd(im))) }
	for r := range rows {
		row := src[r*incols : (r+1)*incols]
		switch in.Kind {
		case tile.FFTForward, tile.FFTInverse:
			for k := range n {
				a[k] = mk(row[2*k], row[2*k+1])
			}
		case tile.FFTR2C:
			for k := range n {
				a[k] = mk(row[k], 0)
			}
		case tile.FFTC2R:
			// The Hermitian extension of bins 0..n/2; bin 0's (and an even n's bin n/2's)
			// imaginary part is dropped.
			for k := 0; k <= n/2; k++ {
				im := row[2*k+1]
				if k == 0 || 2*k == n {
					im = 0
				}
				a[k] = mk(row[2*k], im)
				if k > 0 && n-k != k {
					a[n-k] = conj(a[k])
				}
			}
		}
		if in.Kind == tile.FFTForward || in.Kind == tile.FFTR2C {
			p.forward(a, z)
		} else {
			p.inverse(a, z)
		}
		o := out[r*outcols : (r+1)*outcols]
		sc := C(complex(scale, 0))
		switch in.Kind {
		case tile.FFTC2R:
			for k := range n {
				v := z[k]
				if scale != 1 {
					v *= sc
				}
				o[k] = float64(real(complex128(v)))
			}
		default:
			for k := range outcols / 2 {
				v := z[k]
				if scale != 1 {
					v *= sc
				}
				c := complex128(v)
				o[2*k], o[2*k+1] = real(c), imag(c)
			}
			if in.Kind == tile.FFTR2C {
				// A real input's bin 0 and (even n) bin n/2 are real exactly, as torch.fft
				// and the golden model give them; the fast path leaves rounding residue
				// there, which a following div turned into ±Inf where the model has 0/0.
				o[1] = 0
				if n%2 == 0 && n/2 < outcols/2 {
					o[n+1] = 0
				}
			}
		}
	}
}
