package graph

import (
	"fmt"
	"math"
	"slices"

	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

// Spectral ops (issue 26), torch.fft semantics.
//
// Complex values are real tensors with a trailing dimension of 2 holding (re, im), the
// torch.view_as_real layout: f32[B,N,2] is a batch of B complex64 vectors of length N. So no
// new dtype exists, and every dtype table, the text format, golden files and backends carry
// complex values as they are. The "logical" shape of a complex tensor is its shape without
// the trailing 2; `dim` counts logical axes (dim=-1 is the last complex axis).
//
//   - fft, ifft: complex -> complex along dim; n pads with zeros or crops that axis first.
//   - rfft: real -> the n/2+1 non-negative frequencies (complex).
//   - irfft: complex (bins 0..n/2 of a Hermitian signal) -> real of length n (default
//     2*(bins-1)); the imaginary parts of bin 0 and, for even n, bin n/2 are ignored.
//   - fft2, ifft2, rfft2, irfft2: the same over the last two logical axes, s = [n0, n1].
//   - norm: "backward" (forward unscaled, inverse 1/n), "ortho" (both 1/sqrt(n)),
//     "forward" (forward 1/n, inverse unscaled).
//   - complex_mul(a, b): elementwise complex product, numpy broadcasting over logical axes.
//   - conj(x): (re, -im).
//
// The FFTs accept f32 and f64 (torch.fft's CPU dtypes) and compute in the input's precision.
var (
	spectralDTypes = []numerics.DType{numerics.F32, numerics.F64}
	// FFTNorms are the values of norm, torch.fft's.
	FFTNorms = []string{"backward", "ortho", "forward"}
)

func normSpec() AttrSpec {
	return AttrSpec{Name: "norm", Kind: AttrString, Default: dflt(String("backward")), Values: FFTNorms,
		Doc: `"backward" (inverse scaled 1/n), "ortho" (both 1/sqrt(n)), "forward" (forward scaled 1/n)`}
}

func init() {
	oneAxis := func(name, doc string, infer func(n *Node, in []Type) (Type, error)) {
		register(&OpDef{Name: name, Kind: KindSpectral, MinArgs: 1, MaxArgs: 1, DTypes: spectralDTypes,
			Attrs: []AttrSpec{
				{Name: "n", Kind: AttrInt, Optional: true, Doc: "transform length: the axis is zero-padded or cropped to n (absent: its length)"},
				{Name: "dim", Kind: AttrInt, Default: dflt(Int(-1)), Doc: "the (logical) axis"},
				normSpec(),
			}, Infer: infer, Doc: doc})
	}
	oneAxis("fft", "discrete Fourier transform of complex x ([...,2]) along dim, torch.fft.fft", c2cInfer)
	oneAxis("ifft", "inverse DFT of complex x ([...,2]) along dim, torch.fft.ifft", c2cInfer)
	oneAxis("rfft", "DFT of real x along dim, the n/2+1 non-negative frequencies ([...,2]), torch.fft.rfft", r2cInfer)
	oneAxis("irfft", "inverse of rfft: real output of length n (default 2*(m-1)) from m bins, torch.fft.irfft", c2rInfer)
	twoAxes := func(name, doc string) {
		register(&OpDef{Name: name, Kind: KindComplex, MinArgs: 1, MaxArgs: 1, DTypes: spectralDTypes,
			Attrs: []AttrSpec{
				{Name: "s", Kind: AttrInts, Optional: true, Doc: "[n0, n1]: lengths of the last two logical axes (absent: theirs; irfft2: 2*(m-1) for the last)"},
				normSpec(),
			}, Infer: fft2Infer, Doc: doc})
	}
	twoAxes("fft2", "fft over the last two logical axes, torch.fft.fft2")
	twoAxes("ifft2", "ifft over the last two logical axes, torch.fft.ifft2")
	twoAxes("rfft2", "rfft over the last axis, then fft over the one before, torch.fft.rfft2")
	twoAxes("irfft2", "ifft over the second-to-last axis, then irfft over the last, torch.fft.irfft2")

	register(&OpDef{Name: "complex_mul", Kind: KindComplex, MinArgs: 2, MaxArgs: 2, DTypes: floats, Infer: complexMulInfer,
		Doc: "elementwise complex product of [...,2] tensors, numpy broadcasting over the other axes: (ar*br - ai*bi, ar*bi + ai*br), each product and sum rounded to the dtype"})
	register(&OpDef{Name: "conj", Kind: KindComplex, MinArgs: 1, MaxArgs: 1, DTypes: floats, Infer: func(n *Node, in []Type) (Type, error) {
		if err := isComplex(in[0]); err != nil {
			return Type{}, err
		}
		return in[0], nil
	}, Doc: "complex conjugate of a [...,2] tensor: (re, -im)"})
}

func isComplex(t Type) error {
	if t.Rank() < 1 || t.Shape[t.Rank()-1] != 2 {
		return errs.New(errs.Shape, "a complex value needs a trailing dimension of 2 (re, im; the torch.view_as_real layout), got %s", t)
	}
	return nil
}

// FFTAxis resolves a one-axis FFT node's logical axis and transform length for input type t
// (complex inputs: the logical rank excludes the trailing 2). For irfft the length is the
// real output's.
func FFTAxis(n *Node, t Type) (axis, length int, err error) {
	rank := t.Rank()
	if n.Op != "rfft" {
		if err := isComplex(t); err != nil {
			return 0, 0, err
		}
		rank--
	}
	if rank < 1 {
		return 0, 0, fmt.Errorf("%s needs at least one (logical) axis, got %s", n.Op, t)
	}
	axis, err = NormAxis(int(n.IntAttr("dim")), rank)
	if err != nil {
		return 0, 0, fmt.Errorf("dim %d: %w", n.IntAttr("dim"), err)
	}
	length = t.Shape[axis]
	if n.Op == "irfft" {
		length = 2 * (length - 1)
	}
	if n.HasAttrSet("n") {
		length = int(n.IntAttr("n"))
	}
	if length < 1 || length > MaxElements {
		return 0, 0, fmt.Errorf("%s: invalid number of data points (%d) along dim %d of %s: need n >= 1", n.Op, length, axis, t)
	}
	return axis, length, nil
}

func c2cInfer(n *Node, in []Type) (Type, error) {
	ax, l, err := FFTAxis(n, in[0])
	if err != nil {
		return Type{}, err
	}
	s := slices.Clone(in[0].Shape)
	s[ax] = l
	return Type{DType: in[0].DType, Shape: s}, nil
}

func r2cInfer(n *Node, in []Type) (Type, error) {
	ax, l, err := FFTAxis(n, in[0])
	if err != nil {
		return Type{}, err
	}
	s := append(slices.Clone(in[0].Shape), 2)
	s[ax] = l/2 + 1
	return Type{DType: in[0].DType, Shape: s}, nil
}

func c2rInfer(n *Node, in []Type) (Type, error) {
	ax, l, err := FFTAxis(n, in[0])
	if err != nil {
		return Type{}, err
	}
	s := slices.Clone(in[0].Shape[:in[0].Rank()-1])
	s[ax] = l
	return Type{DType: in[0].DType, Shape: s}, nil
}

// FFT2Lengths resolves a 2-D FFT node's lengths [n0, n1] over the last two logical axes of t
// (irfft2: n1 is the real output's last length).
func FFT2Lengths(n *Node, t Type) ([2]int, error) {
	rank := t.Rank()
	if n.Op != "rfft2" {
		if err := isComplex(t); err != nil {
			return [2]int{}, err
		}
		rank--
	}
	if rank < 2 {
		return [2]int{}, fmt.Errorf("%s needs at least two (logical) axes, got %s", n.Op, t)
	}
	l := [2]int{t.Shape[rank-2], t.Shape[rank-1]}
	if n.Op == "irfft2" {
		l[1] = 2 * (l[1] - 1)
	}
	if n.HasAttrSet("s") {
		s := n.IntsAttr("s")
		if len(s) != 2 {
			return [2]int{}, fmt.Errorf("%s: s %v needs 2 entries (this op transforms the last two axes)", n.Op, s)
		}
		l = [2]int{s[0], s[1]}
	}
	for _, v := range l {
		if v < 1 || v > MaxElements {
			return [2]int{}, fmt.Errorf("%s: invalid number of data points %v: need every length >= 1", n.Op, l)
		}
	}
	return l, nil
}

func fft2Infer(n *Node, in []Type) (Type, error) {
	l, err := FFT2Lengths(n, in[0])
	if err != nil {
		return Type{}, err
	}
	t := in[0]
	s := slices.Clone(t.Shape)
	switch n.Op {
	case "rfft2":
		r := t.Rank()
		s[r-2], s[r-1] = l[0], l[1]/2+1
		s = append(s, 2)
	case "irfft2":
		s = s[:t.Rank()-1]
		r := len(s)
		s[r-2], s[r-1] = l[0], l[1]
	default:
		r := t.Rank() - 1
		s[r-2], s[r-1] = l[0], l[1]
	}
	return Type{DType: t.DType, Shape: s}, nil
}

func complexMulInfer(n *Node, in []Type) (Type, error) {
	for _, t := range in {
		if err := isComplex(t); err != nil {
			return Type{}, err
		}
	}
	la := Type{DType: in[0].DType, Shape: in[0].Shape[:in[0].Rank()-1]}
	lb := Type{DType: in[1].DType, Shape: in[1].Shape[:in[1].Rank()-1]}
	out, err := broadcastInfer(n, []Type{la, lb})
	if err != nil {
		return Type{}, err
	}
	out.Shape = append(slices.Clone(out.Shape), 2)
	return out, nil
}

// FFTScale is the factor a transform of length l applies for norm on the given direction
// (inverse: ifft, irfft and the inverse half of the 2-D forms).
func FFTScale(norm string, l int, inverse bool) float64 {
	switch {
	case norm == "ortho":
		return 1 / math.Sqrt(float64(l))
	case (norm == "forward") != inverse:
		return 1 / float64(l)
	}
	return 1
}

// DualNorm is the norm whose transform of the other direction is the adjoint (the VJP's).
func DualNorm(norm string) string {
	switch norm {
	case "backward":
		return "forward"
	case "forward":
		return "backward"
	}
	return norm
}
