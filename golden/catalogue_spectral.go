package golden

import (
	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/harness"
)

// Issue 26's spectral ops: lengths that are powers of two, smooth (mixed radix) and prime
// (Bluestein), n padding and cropping, inner and outer axes, the three norms; complex_mul
// with broadcasting, conj. Inputs are uniform in [-0.5, 0.5), the FFT accuracy convention.
func init() {
	register(fftFamily, "fft", "ifft", "rfft", "irfft")
	register(fft2Family, "fft2", "ifft2", "rfft2", "irfft2")
	register(complexFamily, "complex_mul", "conj")
}

var distHalf = harness.Dist{Kind: harness.DistUniform, Lo: -0.5, Hi: 0.5}

func fftFamily(op string, dt numerics.DType) []Spec {
	cplx := op != "rfft"
	mk := func(tag string, k int, attrs graph.Attrs, shape ...int) draft {
		if cplx {
			shape = append(shape, 2)
		}
		return draft{tag: tag, dists: dists("x", distHalf), tol: tolReduce(k), build: func(b *graph.Builder) *graph.Value {
			return b.Op(op, attrs, b.Input("x", dt, shape...))
		}}
	}
	at := func(kv ...any) graph.Attrs {
		a := graph.Attrs{}
		for i := 0; i < len(kv); i += 2 {
			switch v := kv[i+1].(type) {
			case int:
				a[kv[i].(string)] = graph.Int(int64(v))
			case string:
				a[kv[i].(string)] = graph.String(v)
			}
		}
		return a
	}
	one := mk("1x1", 1, nil, 1, 1)
	if op == "irfft" { // one bin gives 2*(1-1) = 0 points: torch refuses it, so say n
		one = mk("1x1-n1", 1, at("n", 1), 1, 1)
	}
	return finish(op, dt, one,
		mk("4x64", 64, nil, 4, 64),
		mk("3x60-ortho", 60, at("norm", "ortho"), 3, 60),
		mk("2x97-forward", 97, at("norm", "forward"), 2, 97),
		mk("5x12x3-dim1", 12, at("dim", 1), 5, 12, 3),
		mk("6x5-dim0", 6, at("dim", 0), 6, 5),
		mk("3x16-n10", 16, at("n", 10), 3, 16),
		mk("3x9-n14", 14, at("n", 14), 3, 9),
	)
}

func fft2Family(op string, dt numerics.DType) []Spec {
	cplx := op != "rfft2"
	mk := func(tag string, attrs graph.Attrs, shape ...int) draft {
		k := shape[len(shape)-1] * shape[len(shape)-2]
		if cplx {
			shape = append(shape, 2)
		}
		return draft{tag: tag, dists: dists("x", distHalf), tol: tolReduce(k), build: func(b *graph.Builder) *graph.Value {
			return b.Op(op, attrs, b.Input("x", dt, shape...))
		}}
	}
	return finish(op, dt,
		mk("2x8x6", nil, 2, 8, 6),
		mk("3x7x5-ortho", graph.Attrs{"norm": graph.String("ortho")}, 3, 7, 5),
		mk("6x4-s5x7", graph.Attrs{"s": graph.Ints(5, 7)}, 6, 4),
	)
}

func complexFamily(op string, dt numerics.DType) []Spec {
	if op == "conj" {
		mk := func(shape ...int) draft {
			return draft{tag: shapeTag(shape), dists: dists("x", distNormal), tol: tolDefault, build: func(b *graph.Builder) *graph.Value {
				return b.Op(op, nil, b.Input("x", dt, shape...))
			}}
		}
		return finish(op, dt, mk(7, 13, 2), mk(2))
	}
	mk := func(tag string, sa, sb []int) draft {
		return draft{tag: tag, dists: dists("a", distNormal, "b", distNormal), tol: tolReduce(2), build: func(b *graph.Builder) *graph.Value {
			return b.Op(op, nil, b.Input("a", dt, sa...), b.Input("b", dt, sb...))
		}}
	}
	return finish(op, dt, mk("7x13x2", []int{7, 13, 2}, []int{7, 13, 2}), mk("4x1x5x2-bcast3x1x2", []int{4, 1, 5, 2}, []int{3, 1, 2}))
}
