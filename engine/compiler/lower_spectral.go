package compiler

import (
	"slices"

	"github.com/tessera-qa/tessera-qa/engine/compiler/tile"
	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

// Spectral ops (issue 26). desugarSpectral rewrites the 2-D FFTs into two one-axis FFTs and
// the complex helpers into slices, elementwise ops and a concat (so they fuse like any
// elementwise work); lowerFFT turns a one-axis FFT into one Tile IR kernel: a grid over
// blocks of lines, each line loaded as one tile row (zero fill pads to n, the access crops),
// transformed by a tile.FFT, stored.

// desugarSpectral handles n if it is a spectral form the kernels do not lower; it reports
// whether it did.
func desugarSpectral(n *graph.Node, add func(string, graph.Attrs, ...*graph.Value) *graph.Value, last func(string, graph.Attrs, ...*graph.Value)) bool {
	switch n.Op {
	case "fft2", "ifft2", "rfft2", "irfft2", "complex_mul", "conj":
	default:
		return false
	}
	x := n.Inputs[0]
	switch n.Op {
	case "fft2", "ifft2", "rfft2", "irfft2":
		l, err := graph.FFT2Lengths(n, x.Type)
		if err != nil {
			return false // the verifier refused it already; leave it for the error path
		}
		norm := graph.String(n.StringAttr("norm"))
		at := func(dim, length int) graph.Attrs {
			return graph.Attrs{"dim": graph.Int(int64(dim)), "n": graph.Int(int64(length)), "norm": norm}
		}
		switch n.Op {
		case "fft2", "ifft2":
			op := n.Op[:len(n.Op)-1]
			last(op, at(-2, l[0]), add(op, at(-1, l[1]), x))
		case "rfft2":
			last("fft", at(-2, l[0]), add("rfft", at(-1, l[1]), x))
		case "irfft2":
			last("irfft", at(-1, l[1]), add("ifft", at(-2, l[0]), x))
		}
		return true
	case "complex_mul", "conj":
		part := func(v *graph.Value, k int) *graph.Value {
			r := v.Type.Rank()
			st, en := make([]int64, r), make([]int64, r)
			for d, s := range v.Type.Shape {
				en[d] = int64(s)
			}
			st[r-1], en[r-1] = int64(k), int64(k+1)
			return add("slice", graph.Attrs{"starts": graph.Ints(st...), "ends": graph.Ints(en...)}, v)
		}
		cat := graph.Attrs{"axis": graph.Int(-1)}
		if n.Op == "conj" {
			last("concat", cat, part(x, 0), add("neg", nil, part(x, 1)))
			return true
		}
		// 16- and 8-bit floats compute in f32 and round once, as every float op does.
		y, dt := n.Inputs[1], x.Type.DType
		narrow := dt != numerics.F32 && dt != numerics.F64
		if narrow {
			f32 := graph.Attrs{"to": graph.DTypeAttr(numerics.F32)}
			x, y = add("cast", f32, x), add("cast", f32.Clone(), y)
		}
		ar, ai, br, bi := part(x, 0), part(x, 1), part(y, 0), part(y, 1)
		re := add("sub", nil, add("mul", nil, ar, br), add("mul", nil, ai, bi))
		im := add("add", nil, add("mul", nil, ar, bi), add("mul", nil, ai, br))
		if narrow {
			last("cast", graph.Attrs{"to": graph.DTypeAttr(dt)}, add("concat", cat, re, im))
		} else {
			last("concat", cat, re, im)
		}
		return true
	}
	return false
}

// defFFTElems is about how many tile elements one grid point of an FFT kernel holds.
const defFFTElems = 8192

func fftSchedule(n *graph.Node, key string) Schedule {
	x := n.Inputs[0]
	ax, l, _ := graph.FFTAxis(n, x.Type)
	lines := fftLines(n, x.Type, ax)
	in, out := tile.FFTCols(fftKind(n.Op), l)
	return Schedule{Key: key, Kind: "fft", BM: fit(lines, max(1, defFFTElems/max(in, out))), BN: max(in, out), Stages: 1,
		LoopOrder: "grid(lines) fft-per-row"}
}

func fftKind(op string) tile.FFTKind {
	switch op {
	case "ifft":
		return tile.FFTInverse
	case "rfft":
		return tile.FFTR2C
	case "irfft":
		return tile.FFTC2R
	}
	return tile.FFTForward
}

// logical is the shape without a complex value's trailing 2.
func logical(op string, t graph.Type, input bool) []int {
	real := (op == "rfft" && input) || (op == "irfft" && !input)
	if real {
		return t.Shape
	}
	return t.Shape[:t.Rank()-1]
}

// fftLines is the number of lines (transforms) of an FFT: every axis but the transformed one.
func fftLines(n *graph.Node, t graph.Type, ax int) int {
	s := slices.Clone(logical(n.Op, t, true))
	s[ax] = 1
	return tensorElems(s)
}

func tensorElems(s []int) int {
	p := 1
	for _, d := range s {
		p *= d
	}
	return p
}

// lineAccess addresses a block of lines of a tensor of logical shape s along axis ax: rows are
// the lines (outer, inner), columns the first `take` points of the axis, (re, im) pairs for a
// complex tensor; the tile is `cols` wide, so columns past the taken points read fill (zero).
func lineAccess(param int, s []int, ax int, cplx bool, take, cols int, pid tile.Var, bm int) tile.Access {
	outer, l, inner := tensorElems(s[:ax]), s[ax], tensorElems(s[ax+1:])
	w := 1
	if cplx {
		w = 2
	}
	cd, cst := []int{take}, []int{inner * w}
	if cplx {
		cd, cst = []int{take, 2}, []int{inner * w, 1}
	}
	return tile.Access{Param: param, Base: tile.C(0), RowDims: []int{outer, inner}, RowStrides: []int{l * inner * w, w},
		ColDims: cd, ColStrides: cst, RowStart: tile.V(pid, bm), ColStart: tile.C(0), Rows: bm, Cols: cols, Mask: true}
}

func (b *kbuilder) lowerFFT(n *graph.Node, sc Schedule) error {
	x, y := n.Inputs[0], n.Output
	ax, l, err := graph.FFTAxis(n, x.Type)
	if err != nil {
		return err
	}
	kind := fftKind(n.Op)
	inCols, outCols := tile.FFTCols(kind, l)
	sIn, sOut := logical(n.Op, x.Type, true), logical(n.Op, y.Type, false)
	lines := fftLines(n, x.Type, ax)
	bm := sc.BM
	pid := b.grid(ceilDiv(lines, bm))[0]
	// Points read from the input along the axis: its length, cropped to what the transform takes.
	take := min(sIn[ax], l)
	if kind == tile.FFTC2R {
		take = min(sIn[ax], l/2+1)
	}
	inCplx := kind != tile.FFTR2C
	src := b.load(lineAccess(b.param(x, false), sIn, ax, inCplx, take, inCols, pid, bm), 0)
	dt := numerics.F32
	if x.Type.DType == numerics.F64 {
		dt = numerics.F64
	}
	inverse := kind == tile.FFTInverse || kind == tile.FFTC2R
	dst := b.reg()
	b.emit(tile.FFT{Dst: dst, Src: src, Op: n.Op, Kind: kind, N: l, Scale: graph.FFTScale(n.StringAttr("norm"), l, inverse), DType: dt})
	outCplx := kind != tile.FFTC2R
	w := outCols
	if outCplx {
		w /= 2
	}
	b.emit(tile.Store{Src: dst, At: lineAccess(b.param(y, true), slices.Clone(sOut), ax, outCplx, w, outCols, pid, bm)})
	return nil
}
