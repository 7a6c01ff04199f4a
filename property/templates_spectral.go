package property

import (
	"github.com/tessera-qa/tessera-qa/engine/graph"
)

// spectral generates the FFTs and the complex helpers (issue 26) on fresh inputs of uniform
// class (an Inf among a line's inputs makes every output of the line NaN or Inf in an order
// that a fast transform and the definition need not share): complex inputs have a trailing 2;
// the one-axis FFTs draw dim, n (pad, crop or absent) and norm, the 2-D forms s and norm.
func (b *builder) spectral(d *graph.OpDef) error {
	a := b.s.Attr
	lens := []int{1, 2, 3, 5, 8, 12, 17}
	l0, l1 := lens[a[0]%len(lens)], lens[a[1]%len(lens)]
	shape := []int{1 + a[2]%3, l0, l1}
	real := d.Name == "rfft" || d.Name == "rfft2"
	if !real {
		shape = append(shape, 2)
	}
	x := b.input(b.dtype(d), shape, ClassUniform)
	norm := graph.String(graph.FFTNorms[a[3]%len(graph.FFTNorms)])
	var attrs graph.Attrs
	switch d.Name {
	case "complex_mul":
		y := b.input(x.Type.DType, []int{l1, 2}, ClassUniform) // broadcasts over the leading axes
		_, err := b.node(d.Name, nil, x, y)
		return err
	case "conj":
	case "fft", "ifft", "rfft", "irfft":
		attrs = graph.Attrs{"norm": norm, "dim": graph.Int(int64(a[2]%3 - 2))}
		if n := []int{0, 4, 7, 16}[(a[0]/7)%4]; n > 0 {
			attrs["n"] = graph.Int(int64(n))
		} else if d.Name == "irfft" {
			attrs["n"] = graph.Int(int64(1 + a[1]%9)) // the default 2*(m-1) is 0 for one bin
		}
	default: // the 2-D forms
		attrs = graph.Attrs{"norm": norm}
		if a[0]%2 == 1 {
			attrs["s"] = graph.Ints(int64(1+a[1]%6), int64(1+a[2]%7))
		} else if d.Name == "irfft2" {
			attrs["s"] = graph.Ints(int64(l0), int64(1+a[1]%9))
		}
	}
	_, err := b.node(d.Name, attrs, x)
	return err
}

// spectralTerms is the number of terms an output element of a spectral op sums: the
// transform length (both lengths for the 2-D forms), 2 for complex_mul, 1 for conj.
func spectralTerms(n *graph.Node) int {
	in := n.Inputs[0].Type
	switch n.Op {
	case "complex_mul":
		return 2
	case "conj":
		return 1
	case "fft2", "ifft2", "rfft2", "irfft2":
		l, err := graph.FFT2Lengths(n, in)
		if err != nil {
			return 1
		}
		return l[0] * l[1]
	}
	_, l, err := graph.FFTAxis(n, in)
	if err != nil {
		return 1
	}
	return l
}
