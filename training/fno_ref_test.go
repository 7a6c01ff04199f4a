package training

import (
	"math"
	"math/cmplx"
)

// An independent float64 evaluation of the fno block, written from its definition: the kept
// modes by a plain DFT sum, the inverse as irfft2's formula
//
//	s[y,x] = 1/(H W) sum_(k1, k2 kept) c_k2 Re(Y[k1,k2] e^(2 pi i (k1 y/H + k2 x/W)))
//
// with c_k2 = 1 for the DC column and an even W's Nyquist column (irfft takes only their real
// parts) and 2 for the others (each stands for a conjugate pair). It shares no code with the
// engine (no FFT, no graph, no ops).

type fnoRef struct {
	d Dims
	B int
}

// cis is e^(2 pi i num/den) with num reduced mod den first, so large products lose nothing.
func cis(num, den int) complex128 {
	num %= den
	if num < 0 {
		num += den
	}
	return cmplx.Rect(1, 2*math.Pi*float64(num)/float64(den))
}

// dense is spectral weight of corner name at [i, o, k1, k2] (complex), expanded from CP
// factors when the parameters hold them.
func (r fnoRef) dense(p map[string][]float64, name string) func(i, o, k1, k2 int) complex128 {
	K, m1, m2 := r.d.Hidden, r.d.Modes1, r.d.Modes2
	if w, ok := p[name]; ok {
		return func(i, o, k1, k2 int) complex128 {
			j := (((i*K+o)*m1+k1)*m2 + k2) * 2
			return complex(w[j], w[j+1])
		}
	}
	u, v, s, rk := p[name+"_u"], p[name+"_v"], p[name+"_s"], r.d.CPRank
	c := func(w []float64, j int) complex128 { return complex(w[2*j], w[2*j+1]) }
	return func(i, o, k1, k2 int) complex128 {
		var sum complex128
		for q := range rk {
			sum += c(u, i*rk+q) * c(v, o*rk+q) * c(s, (k1*m2+k2)*rk+q)
		}
		return sum
	}
}

// outputs is the block's projection output [B*H*W, Out] for x [B, C, H, W].
func (r fnoRef) outputs(p map[string][]float64, x []float64) []float64 {
	d := r.d
	B, C, K, O, H, W, m1, m2 := r.B, d.In, d.Hidden, d.Out, d.GridH, d.GridW, d.Modes1, d.Modes2
	r1, r2 := r.dense(p, "spec1"), r.dense(p, "spec2")
	out := make([]float64, B*H*W*O)
	h := make([]float64, K*H*W) // one sample, channel-first
	for b := range B {
		for k := range K {
			for y := range H {
				for xx := range W {
					v := p["lift_b"][k]
					for c := range C {
						v += x[((b*C+c)*H+y)*W+xx] * p["lift_w"][c*K+k]
					}
					h[(k*H+y)*W+xx] = v
				}
			}
		}
		// kept rows: 0..m1-1 (weights r1) and H-m1..H-1 (r2, row j of the corner)
		type mode struct{ k1, k2 int }
		var modes []mode
		for j := range m1 {
			for k2 := range m2 {
				modes = append(modes, mode{j, k2}, mode{H - m1 + j, k2})
			}
		}
		s := make([]float64, K*H*W)
		for _, md := range modes {
			X := make([]complex128, K)
			for k := range K {
				for y := range H {
					for xx := range W {
						X[k] += complex(h[(k*H+y)*W+xx], 0) * cis(-(md.k1*y*W+md.k2*xx*H), H*W)
					}
				}
			}
			c := 2.0
			if md.k2 == 0 || 2*md.k2 == W {
				c = 1
			}
			for o := range K {
				var Y complex128
				for i := range K {
					if md.k1 < m1 {
						Y += X[i] * r1(i, o, md.k1, md.k2)
					} else {
						Y += X[i] * r2(i, o, md.k1-(H-m1), md.k2)
					}
				}
				for y := range H {
					for xx := range W {
						s[(o*H+y)*W+xx] += c * real(Y*cis(md.k1*y*W+md.k2*xx*H, H*W)) / float64(H*W)
					}
				}
			}
		}
		for y := range H {
			for xx := range W {
				row := (b*H+y)*W + xx
				z := make([]float64, K)
				for o := range K {
					v := s[(o*H+y)*W+xx] + p["lin_b"][o]
					for k := range K {
						v += h[(k*H+y)*W+xx] * p["lin_w"][k*K+o]
					}
					z[o] = 0.5 * v * (1 + math.Erf(v/math.Sqrt2))
				}
				for j := range O {
					v := p["proj_b"][j]
					for o := range K {
						v += z[o] * p["proj_w"][o*O+j]
					}
					out[row*O+j] = v
				}
			}
		}
	}
	return out
}

// loss is the mean squared error of the outputs against target.
func (r fnoRef) loss(p map[string][]float64, x, target []float64) float64 {
	var sum float64
	for i, v := range r.outputs(p, x) {
		sum += (v - target[i]) * (v - target[i])
	}
	return sum / float64(len(target))
}

// grad is the loss's gradient by central differences (step 1e-5; in float64 its error is
// about 1e-10 here).
func (r fnoRef) grad(p map[string][]float64, x, target []float64) map[string][]float64 {
	const h = 1e-5
	g := map[string][]float64{}
	for name, w := range p {
		g[name] = make([]float64, len(w))
		for i := range w {
			keep := w[i]
			w[i] = keep + h
			up := r.loss(p, x, target)
			w[i] = keep - h
			down := r.loss(p, x, target)
			w[i] = keep
			g[name][i] = (up - down) / (2 * h)
		}
	}
	return g
}
