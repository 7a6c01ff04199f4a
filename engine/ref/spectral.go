package ref

import (
	"math"
	"slices"

	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
)

// The spectral ops' golden model: the DFT by its definition, X_k = sum_j x_j w^(jk), in
// float64 with the angle 2*pi*(j*k mod n)/n reduced exactly, summed in index order, O(n^2)
// per line; the 2-D forms apply it along both axes without rounding in between. Nothing is
// shared with the CPU backend's fast transform (engine/backend/cpu/fft.go).

func init() {
	impls["fft"] = oneAxisFFT
	impls["ifft"] = oneAxisFFT
	impls["rfft"] = oneAxisFFT
	impls["irfft"] = oneAxisFFT
	impls["fft2"] = twoAxisFFT
	impls["ifft2"] = twoAxisFFT
	impls["rfft2"] = twoAxisFFT
	impls["irfft2"] = twoAxisFFT
	impls["complex_mul"] = complexMul
	impls["conj"] = conjOp
}

// cube is a complex array of a logical shape, row-major.
type cube struct {
	shape []int
	v     []complex128
}

func complexCube(t *tensor.Tensor) cube {
	f := floatsOf(t)
	c := cube{shape: slices.Clone(t.Shape[:len(t.Shape)-1]), v: make([]complex128, len(f)/2)}
	for i := range c.v {
		c.v[i] = complex(f[2*i], f[2*i+1])
	}
	return c
}

func realCube(t *tensor.Tensor) cube {
	f := floatsOf(t)
	c := cube{shape: slices.Clone(t.Shape), v: make([]complex128, len(f))}
	for i, x := range f {
		c.v[i] = complex(x, 0)
	}
	return c
}

// split views axis as (outer, length, inner).
func (c cube) split(axis int) (outer, l, inner int) {
	return product(c.shape[:axis]), c.shape[axis], product(c.shape[axis+1:])
}

// fit crops or zero-pads axis to length l.
func (c cube) fit(axis, l int) cube {
	outer, old, inner := c.split(axis)
	s := slices.Clone(c.shape)
	s[axis] = l
	out := cube{shape: s, v: make([]complex128, outer*l*inner)}
	for o := range outer {
		for k := range min(l, old) {
			copy(out.v[(o*l+k)*inner:(o*l+k+1)*inner], c.v[(o*old+k)*inner:(o*old+k+1)*inner])
		}
	}
	return out
}

// dft transforms along axis by the definition: sign -1 forward, +1 inverse, times scale.
func (c cube) dft(axis int, sign, scale float64) cube {
	outer, l, inner := c.split(axis)
	out := cube{shape: slices.Clone(c.shape), v: make([]complex128, len(c.v))}
	w := make([]complex128, l)
	for r := range l {
		w[r] = unitRoot(r, l, sign)
	}
	for o := range outer {
		for i := range inner {
			for k := range l {
				var acc complex128
				for j := range l {
					acc += c.v[(o*l+j)*inner+i] * w[(j*k)%l]
				}
				out.v[(o*l+k)*inner+i] = acc * complex(scale, 0)
			}
		}
	}
	return out
}

// hermitian extends bins 0..l/2 along axis to a full length-l spectrum, dropping the
// imaginary parts of bin 0 and (even l) bin l/2, as irfft does.
func (c cube) hermitian(axis, l int) cube {
	c = c.fit(axis, l/2+1)
	outer, m, inner := c.split(axis)
	s := slices.Clone(c.shape)
	s[axis] = l
	out := cube{shape: s, v: make([]complex128, outer*l*inner)}
	for o := range outer {
		for i := range inner {
			for k := range m {
				z := c.v[(o*m+k)*inner+i]
				if k == 0 || 2*k == l {
					z = complex(real(z), 0)
				}
				out.v[(o*l+k)*inner+i] = z
				if k > 0 && l-k != k {
					out.v[(o*l+l-k)*inner+i] = complex(real(z), -imag(z))
				}
			}
		}
	}
	return out
}

func putComplex(out *tensor.Tensor, c cube) {
	for i, z := range c.v {
		out.SetFloat64(2*i, real(z))
		out.SetFloat64(2*i+1, imag(z))
	}
}

func putReal(out *tensor.Tensor, c cube) {
	for i, z := range c.v {
		out.SetFloat64(i, real(z))
	}
}

// transform applies one axis of op (a one-axis op name) to c, length l.
func transform(c cube, op string, axis, l int, norm string) cube {
	switch op {
	case "fft":
		return c.fit(axis, l).dft(axis, -1, graph.FFTScale(norm, l, false))
	case "ifft":
		return c.fit(axis, l).dft(axis, 1, graph.FFTScale(norm, l, true))
	case "rfft":
		return c.fit(axis, l).dft(axis, -1, graph.FFTScale(norm, l, false)).fit(axis, l/2+1)
	}
	return c.hermitian(axis, l).dft(axis, 1, graph.FFTScale(norm, l, true)) // irfft
}

func oneAxisFFT(n *graph.Node, in []*tensor.Tensor, out *tensor.Tensor) error {
	typ := graph.Type{DType: in[0].DType, Shape: in[0].Shape}
	axis, l, err := graph.FFTAxis(n, typ)
	if err != nil {
		return err
	}
	var c cube
	if n.Op == "rfft" {
		c = realCube(in[0])
	} else {
		c = complexCube(in[0])
	}
	r := transform(c, n.Op, axis, l, n.StringAttr("norm"))
	if n.Op == "irfft" {
		putReal(out, r)
	} else {
		putComplex(out, r)
	}
	return nil
}

func twoAxisFFT(n *graph.Node, in []*tensor.Tensor, out *tensor.Tensor) error {
	typ := graph.Type{DType: in[0].DType, Shape: in[0].Shape}
	l, err := graph.FFT2Lengths(n, typ)
	if err != nil {
		return err
	}
	norm := n.StringAttr("norm")
	var c cube
	if n.Op == "rfft2" {
		c = realCube(in[0])
	} else {
		c = complexCube(in[0])
	}
	r := len(c.shape)
	switch n.Op {
	case "fft2":
		c = transform(transform(c, "fft", r-1, l[1], norm), "fft", r-2, l[0], norm)
	case "ifft2":
		c = transform(transform(c, "ifft", r-1, l[1], norm), "ifft", r-2, l[0], norm)
	case "rfft2":
		c = transform(transform(c, "rfft", r-1, l[1], norm), "fft", r-2, l[0], norm)
	case "irfft2":
		c = transform(transform(c, "ifft", r-2, l[0], norm), "irfft", r-1, l[1], norm)
	}
	if n.Op == "irfft2" {
		putReal(out, c)
	} else {
		putComplex(out, c)
	}
	return nil
}

func complexMul(_ *graph.Node, in []*tensor.Tensor, out *tensor.Tensor) error {
	a, b := complexCube(in[0]), complexCube(in[1])
	os := out.Shape[:len(out.Shape)-1]
	sa, sb := broadcastStridesOf(a.shape, os), broadcastStridesOf(b.shape, os)
	for i := range product(os) {
		x, y := a.v[index(i, os, sa)], b.v[index(i, os, sb)]
		out.SetFloat64(2*i, real(x)*real(y)-imag(x)*imag(y))
		out.SetFloat64(2*i+1, real(x)*imag(y)+imag(x)*real(y))
	}
	return nil
}

// broadcastStridesOf gives, per axis of out, the stride of a row-major shape in broadcast
// against out (0 on broadcast axes).
func broadcastStridesOf(in, out []int) []int {
	st := tensor.Strides(in)
	res := make([]int, len(out))
	off := len(out) - len(in)
	for d := range out {
		if j := d - off; j >= 0 && in[j] != 1 {
			res[d] = st[j]
		}
	}
	return res
}

func conjOp(_ *graph.Node, in []*tensor.Tensor, out *tensor.Tensor) error {
	f := floatsOf(in[0])
	for i, x := range f {
		if i%2 == 1 {
			x = -x
		}
		out.SetFloat64(i, x)
	}
	return nil
}

// unitRoot is exp(sign*2*pi*i*r/l); the quarter turns are exact (so a real input's bin 0 and
// bin l/2 have an imaginary part of exactly 0, as in the engine and in pocketfft).
func unitRoot(r, l int, sign float64) complex128 {
	if (4*r)%l == 0 {
		return [4]complex128{1, complex(0, sign), -1, complex(0, -sign)}[(4*r/l)%4]
	}
	s, c := math.Sincos(sign * 2 * math.Pi * float64(r) / float64(l))
	return complex(c, s)
}
