package graph

import (
	"github.com/tessera-qa/tessera-qa/engine/errs"
)

// Gradient rules of the spectral ops. In the view_as_real layout the gradient of a real loss
// with respect to a complex input is the adjoint applied to the output's gradient, and the
// adjoint of a DFT is a DFT: fft with norm p has adjoint ifft with DualNorm(p) (backward <->
// forward, ortho is unitary), and a pad or crop to n has the crop or zero pad back as its
// adjoint. rfft's adjoint pads the bins to n and takes the real part of the inverse; irfft's
// doubles the bins that stand for a conjugate pair (all but bin 0 and an even n's n/2).

func init() {
	one := func(adj func(b *Builder, dy *Value, ax, inLen, l int, norm string) *Value) *GradRule {
		return gradOf(func(b *Builder, n *Node, dy *Value, _ []bool) []*Value {
			ax, l, err := FFTAxis(n, n.Inputs[0].Type)
			if err != nil {
				b.Fail(err)
				return []*Value{nil}
			}
			return []*Value{adj(b, dy, ax, n.Inputs[0].Type.Shape[ax], l, n.StringAttr("norm"))}
		}, false)
	}
	for op, adj := range map[string]func(*Builder, *Value, int, int, int, string) *Value{
		"fft": fftAdj, "ifft": ifftAdj, "rfft": rfftAdj, "irfft": irfftAdj,
	} {
		registry[op].Grad = one(adj)
	}
	two := gradOf(func(b *Builder, n *Node, dy *Value, _ []bool) []*Value {
		x := n.Inputs[0]
		l, err := FFT2Lengths(n, x.Type)
		if err != nil {
			b.Fail(err)
			return []*Value{nil}
		}
		norm := n.StringAttr("norm")
		r := x.Type.Rank()
		if n.Op != "rfft2" {
			r-- // logical rank
		}
		in0, in1 := x.Type.Shape[r-2], x.Type.Shape[r-1]
		switch n.Op {
		case "fft2": // fft(-2) o fft(-1): adjoints in reverse order
			return []*Value{fftAdj(b, fftAdj(b, dy, r-2, in0, l[0], norm), r-1, in1, l[1], norm)}
		case "ifft2":
			return []*Value{ifftAdj(b, ifftAdj(b, dy, r-2, in0, l[0], norm), r-1, in1, l[1], norm)}
		case "rfft2": // fft(-2) o rfft(-1)
			return []*Value{rfftAdj(b, fftAdj(b, dy, r-2, in0, l[0], norm), r-1, in1, l[1], norm)}
		}
		// irfft2 = irfft(-1) o ifft(-2)
		return []*Value{ifftAdj(b, irfftAdj(b, dy, r-1, in1, l[1], norm), r-2, in0, l[0], norm)}
	}, false)
	for _, op := range []string{"fft2", "ifft2", "rfft2", "irfft2"} {
		registry[op].Grad = two
	}
	registry["conj"].Grad = gradOf(func(b *Builder, _ *Node, dy *Value, _ []bool) []*Value {
		return []*Value{b.Op("conj", nil, dy)}
	}, false)
	registry["complex_mul"].Grad = gradOf(func(b *Builder, n *Node, dy *Value, need []bool) []*Value {
		a, c := n.Inputs[0], n.Inputs[1]
		out := make([]*Value, 2)
		if need[0] {
			out[0] = b.sumTo(b.Op("complex_mul", nil, dy, b.Op("conj", nil, c)), a.Type.Shape)
		}
		if need[1] {
			out[1] = b.sumTo(b.Op("complex_mul", nil, dy, b.Op("conj", nil, a)), c.Type.Shape)
		}
		return out
	}, false)
}

func fftAttrs(ax int, norm string) Attrs {
	return Attrs{"dim": Int(int64(ax)), "norm": String(norm)}
}

// fftAdj: the input had inLen points on axis ax, the transform length l.
func fftAdj(b *Builder, dy *Value, ax, inLen, _ int, norm string) *Value {
	return b.fitAxis(b.Op("ifft", fftAttrs(ax, DualNorm(norm)), dy), ax, inLen)
}

func ifftAdj(b *Builder, dy *Value, ax, inLen, _ int, norm string) *Value {
	return b.fitAxis(b.Op("fft", fftAttrs(ax, DualNorm(norm)), dy), ax, inLen)
}

func rfftAdj(b *Builder, dy *Value, ax, inLen, l int, norm string) *Value {
	at := fftAttrs(ax, DualNorm(norm))
	at["n"] = Int(int64(l))
	z := b.Op("ifft", at, dy) // the bins zero-padded to l, then the adjoint DFT
	r := z.Type.Rank()
	st, en := make([]int64, r), ints64(z.Type.Shape)
	en[r-1] = 1
	re := b.reshapeTo(b.Op("slice", Attrs{"starts": Ints(st...), "ends": Ints(en...)}, z), z.Type.Shape[:r-1])
	return b.fitAxis(re, ax, inLen)
}

func irfftAdj(b *Builder, dy *Value, ax, inLen, l int, norm string) *Value {
	at := fftAttrs(ax, DualNorm(norm))
	at["n"] = Int(int64(l))
	g := b.Op("rfft", at, dy) // l/2+1 bins
	// Bins 1 .. ceil(l/2)-1 stand for a pair (k and l-k): their gradient doubles (x + x is exact).
	lo, hi := 1, (l+1)/2
	if hi > lo {
		part := func(s, e int) *Value { return b.sliceAxis(g, ax, s, e) }
		mid := part(lo, hi)
		pieces := []*Value{part(0, lo), b.Op("add", nil, mid, mid)}
		if k := l/2 + 1; hi < k {
			pieces = append(pieces, part(hi, k))
		}
		g = b.Op("concat", Attrs{"axis": Int(int64(ax))}, pieces...)
	}
	return b.fitAxis(g, ax, inLen)
}

func (b *Builder) sliceAxis(v *Value, ax, s, e int) *Value { return SliceAxis(b.Op, v, ax, s, e) }

// fitAxis crops v to length l on axis ax or pads it with zeros behind (PadAxis).
func (b *Builder) fitAxis(v *Value, ax, l int) *Value {
	if have := v.Type.Shape[ax]; have == 0 && l > 0 {
		b.Fail(errs.New(errs.Shape, "cannot zero-pad an empty axis %d of %s to %d", ax, v.Type, l))
		return v
	}
	return PadAxis(b.Op, v, ax, 0, l-v.Type.Shape[ax])
}
