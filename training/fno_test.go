package training

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/backend"
	"github.com/tessera-qa/tessera-qa/engine/compiler"
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
)

// fnoShapes cover odd and even H and W: an even W whose Nyquist column is kept (m2 = W/2+1),
// odd both ways, corners that meet (2 m1 = H), and a rank-2 CP factorization.
var fnoShapes = []Dims{
	{Batch: 2, In: 2, Hidden: 3, Out: 2, GridH: 6, GridW: 8, Modes1: 2, Modes2: 5},
	{Batch: 2, In: 2, Hidden: 3, Out: 2, GridH: 5, GridW: 7, Modes1: 2, Modes2: 3},
	{Batch: 2, In: 1, Hidden: 2, Out: 1, GridH: 6, GridW: 7, Modes1: 3, Modes2: 2},
	{Batch: 2, In: 2, Hidden: 3, Out: 1, GridH: 5, GridW: 8, Modes1: 1, Modes2: 3, CPRank: 2},
}

func floats(ts map[string]*tensor.Tensor) map[string][]float64 {
	out := map[string][]float64{}
	for k, t := range ts {
		out[k] = t.Float64s()
	}
	return out
}

// The engine's fno (loss and every gradient element, f64 and f32) matches the float64
// definition (fno_ref_test.go: plain DFT sums, gradient by central differences), and one SGD
// step of train moves the loss to the reference's loss at the reference's updated parameters.
// Bounds: f64 loss 1e-12 relative, gradients 1e-8 + 1e-6 relative (the difference quotient's
// error is about 1e-10); f32 loss 1e-5 relative, gradients 2e-5 + 1e-3 relative.
func TestFNOMatchesTheFloat64Definition(t *testing.T) {
	b, err := backend.Get("cpu")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range fnoShapes {
		name := fmt.Sprintf("H=%d W=%d modes %dx%d cp=%d", d.GridH, d.GridW, d.Modes1, d.Modes2, d.CPRank)
		ref := fnoRef{d: d, B: d.Batch}
		var refLoss float64
		var refGrad map[string][]float64
		var p0 map[string][]float64
		for _, dt := range []numerics.DType{numerics.F64, numerics.F32} {
			cfg := Config{Model: FNOModel, Dims: d, DType: dt, Seed: 3, Backend: b}
			st, err := newDataStep(cfg, 0, 1, time.Minute)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			params, _ := st.init(cfg.Seed)
			x, target := st.m.Batch(cfg.Seed, 1, 0, 1)
			if p0 == nil {
				p0 = floats(params)
				refLoss = ref.loss(p0, x.Float64s(), target.Float64s())
				refGrad = ref.grad(p0, x.Float64s(), target.Float64s())
			}
			loss, grads, err := st.step(context.Background(), cfg.Seed, 1, params)
			if err != nil {
				t.Fatalf("%s %s: %v", name, dt, err)
			}
			lossTol, gAbs, gRel := 1e-12, 1e-8, 1e-6
			if dt == numerics.F32 {
				lossTol, gAbs, gRel = 1e-5, 2e-5, 1e-3
			}
			if got := loss.Float64(0); math.Abs(got-refLoss) > lossTol*refLoss {
				t.Errorf("%s %s: loss %v, reference %v", name, dt, got, refLoss)
			}
			worst := 0.0
			for pn, g := range grads {
				for i, v := range g.Float64s() {
					want := refGrad[pn][i]
					if e := math.Abs(v - want); e > gAbs+gRel*math.Abs(want) {
						t.Fatalf("%s %s: grad %s[%d] = %v, reference %v", name, dt, pn, i, v, want)
					} else {
						worst = max(worst, e)
					}
				}
			}
			t.Logf("%s %s: loss %v (reference %v), worst gradient difference %.2g", name, dt, loss.Float64(0), refLoss, worst)
		}
		// One step of train with SGD, f64: its second loss is the reference's at p0 - lr g.
		const lr = 0.05
		opt, err := NewOptimizer("sgd", lr, b)
		if err != nil {
			t.Fatal(err)
		}
		res, err := Run(context.Background(), Config{Model: FNOModel, Dims: d, DType: numerics.F64, Steps: 2, Seed: 3, Backend: b, Optimizer: opt})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		p1 := map[string][]float64{}
		for pn, w := range p0 {
			p1[pn] = make([]float64, len(w))
			for i := range w {
				p1[pn][i] = w[i] - lr*refGrad[pn][i]
			}
		}
		m, _ := Build(FNOModel, numerics.F64, d, d.Batch)
		x2, t2 := m.Batch(3, 2, 0, 1)
		want := ref.loss(p1, x2.Float64s(), t2.Float64s())
		if got := res.Losses[1].Value; math.Abs(got-want) > 1e-9*want || !(want < refLoss*2) {
			t.Errorf("%s: loss after one SGD step %v, reference %v (first %v)", name, got, want, refLoss)
		}
	}
}

// Dense and CP-factorized spectral weights are the same operator: the factorized model's loss
// equals the dense model's with the product expanded on the host (float64), and the factors'
// gradients are the dense gradient pulled back through the product (g_u[i,r] = sum g_R[i,o,k]
// conj(v[o,r] s[k,r]), the view_as_real form of the chain rule), both within 1e-12.
func TestFNOFactorizedWeightsAgreeWithDense(t *testing.T) {
	b, _ := backend.Get("cpu")
	d := Dims{Batch: 2, In: 2, Hidden: 3, Out: 2, GridH: 6, GridW: 7, Modes1: 2, Modes2: 3, CPRank: 2}
	dense := d
	dense.CPRank = 0
	run := func(d Dims, params map[string]*tensor.Tensor) (float64, map[string]*tensor.Tensor, map[string]*tensor.Tensor) {
		st, err := newDataStep(Config{Model: FNOModel, Dims: d, DType: numerics.F64, Backend: b}, 0, 1, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if params == nil {
			params, _ = st.init(5)
		}
		loss, grads, err := st.step(context.Background(), 5, 1, params)
		if err != nil {
			t.Fatal(err)
		}
		return loss.Float64(0), grads, params
	}
	fLoss, fGrad, fp := run(d, nil)
	K, m1, m2, rk := d.Hidden, d.Modes1, d.Modes2, d.CPRank
	dp := map[string]*tensor.Tensor{}
	for k, v := range fp {
		dp[k] = v
	}
	c := func(w []float64, j int) complex128 { return complex(w[2*j], w[2*j+1]) }
	for _, sp := range []string{"spec1", "spec2"} {
		u, v, s := fp[sp+"_u"].Float64s(), fp[sp+"_v"].Float64s(), fp[sp+"_s"].Float64s()
		w := tensor.New(numerics.F64, []int{K, K, m1, m2, 2})
		for i := range K {
			for o := range K {
				for k := range m1 * m2 {
					var sum complex128
					for q := range rk {
						sum += c(u, i*rk+q) * c(v, o*rk+q) * c(s, k*rk+q)
					}
					j := ((i*K+o)*m1*m2 + k) * 2
					w.SetFloat64(j, real(sum))
					w.SetFloat64(j+1, imag(sum))
				}
			}
		}
		dp[sp] = w
		delete(dp, sp+"_u")
		delete(dp, sp+"_v")
		delete(dp, sp+"_s")
	}
	dLoss, dGrad, _ := run(dense, dp)
	if math.Abs(fLoss-dLoss) > 1e-12*dLoss {
		t.Fatalf("factorized loss %v, dense %v", fLoss, dLoss)
	}
	for _, sp := range []string{"spec1", "spec2"} {
		gR := dGrad[sp].Float64s()
		v, s := fp[sp+"_v"].Float64s(), fp[sp+"_s"].Float64s()
		gu := make([]complex128, K*rk)
		for i := range K {
			for o := range K {
				for k := range m1 * m2 {
					for q := range rk {
						gu[i*rk+q] += c(gR, (i*K+o)*m1*m2+k) * cmplxConj(c(v, o*rk+q)*c(s, k*rk+q))
					}
				}
			}
		}
		got := fGrad[sp+"_u"].Float64s()
		for j, want := range gu {
			if math.Abs(got[2*j]-real(want)) > 1e-12 || math.Abs(got[2*j+1]-imag(want)) > 1e-12 {
				t.Fatalf("%s_u[%d]: factorized gradient (%v, %v), dense pulled back %v", sp, j, got[2*j], got[2*j+1], want)
			}
		}
		for _, f := range []string{"_u", "_v", "_s"} {
			if n := norm(fGrad[sp+f].Float64s()); !(n > 1e-6) {
				t.Fatalf("%s%s: gradient norm %v: the factor is not trained", sp, f, n)
			}
		}
	}
	if !(norm(dGrad["spec2"].Float64s()) > 1e-6) {
		t.Fatal("dense spec2 gradient is zero: the second corner is not used")
	}
}

func cmplxConj(z complex128) complex128 { return complex(real(z), -imag(z)) }

func norm(xs []float64) float64 {
	var s float64
	for _, x := range xs {
		s += x * x
	}
	return math.Sqrt(s)
}

// spectralOnly runs SpectralConv alone (f64) on one channel: field h [H, W], complex weights
// set at the given (corner, k1, k2) positions, and returns s [H, W].
func spectralOnly(t *testing.T, H, W, m1, m2 int, h func(y, x int) float64, weights map[[3]int]complex128) []float64 {
	t.Helper()
	b := graph.NewBuilder("spectral_conv")
	hv := b.Input("h", numerics.F64, 1, 1, H, W)
	r1, r2 := b.Input("r1", numerics.F64, 1, 1, m1, m2, 2), b.Input("r2", numerics.F64, 1, 1, m1, m2, 2)
	b.Output(SpectralConv(b, hv, r1, r2))
	g, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	p, err := compiler.Compile(g, compiler.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ht := tensor.New(numerics.F64, []int{1, 1, H, W})
	for y := range H {
		for x := range W {
			ht.SetFloat64(y*W+x, h(y, x))
		}
	}
	rs := []*tensor.Tensor{tensor.New(numerics.F64, []int{1, 1, m1, m2, 2}), tensor.New(numerics.F64, []int{1, 1, m1, m2, 2})}
	for at, w := range weights {
		j := (at[1]*m2 + at[2]) * 2
		rs[at[0]].SetFloat64(j, real(w))
		rs[at[0]].SetFloat64(j+1, imag(w))
	}
	be, _ := backend.Get("cpu")
	outs, err := be.Run(p, map[string]*tensor.Tensor{"h": ht, "r1": rs[0], "r2": rs[1]})
	if err != nil {
		t.Fatal(err)
	}
	return outs[0].Float64s()
}

func expectField(t *testing.T, what string, got []float64, H, W int, want func(y, x int) float64) {
	t.Helper()
	for y := range H {
		for x := range W {
			if e := math.Abs(got[y*W+x] - want(y, x)); e > 1e-12 {
				t.Fatalf("%s: s[%d,%d] = %v, want %v", what, y, x, got[y*W+x], want(y, x))
			}
		}
	}
}

// The second corner holds the negative frequencies: a field whose only stored rfft2 bin is
// (k1 = -1, k2 = 1), cos(2 pi (-y/H + x/W)), is mixed by r2's last row (row H-1) alone, and
// weight a+ib gives a cos(theta) - b sin(theta). A dropped second corner gives 0; one put back
// at the wrong rows, or mixed with r1, gives another field. The positive twin (k1 = +1) is
// mixed by r1's row 1 and ignores r2.
func TestFNOSecondCornerIsTheNegativeFrequencies(t *testing.T) {
	for _, hw := range [][2]int{{6, 8}, {7, 5}} {
		H, W, m1, m2 := hw[0], hw[1], 2, 2
		theta := func(k1 int) func(y, x int) float64 {
			return func(y, x int) float64 { return 2 * math.Pi * (float64(k1*y)/float64(H) + float64(x)/float64(W)) }
		}
		a, bb := 0.7, -0.4
		w := complex(a, bb)
		neg, pos := theta(-1), theta(1)
		decoy := complex(5, 3) // on the other corner's matching row: must not matter
		got := spectralOnly(t, H, W, m1, m2, func(y, x int) float64 { return math.Cos(neg(y, x)) },
			map[[3]int]complex128{{1, m1 - 1, 1}: w, {0, 1, 1}: decoy})
		expectField(t, fmt.Sprintf("%dx%d negative mode", H, W), got, H, W, func(y, x int) float64 { return a*math.Cos(neg(y, x)) - bb*math.Sin(neg(y, x)) })
		got = spectralOnly(t, H, W, m1, m2, func(y, x int) float64 { return math.Cos(pos(y, x)) },
			map[[3]int]complex128{{0, 1, 1}: w, {1, m1 - 1, 1}: decoy})
		expectField(t, fmt.Sprintf("%dx%d positive mode", H, W), got, H, W, func(y, x int) float64 { return a*math.Cos(pos(y, x)) - bb*math.Sin(pos(y, x)) })
	}
}

// DC and Nyquist: irfft2 takes only the real part of the DC column's and an even W's Nyquist
// column's bins, so weights with imaginary parts scale the constant and the (-1)^x fields by
// their real parts alone (torch.fft.irfft2 does the same). Odd W has no Nyquist column.
func TestFNOHandlesDCAndNyquist(t *testing.T) {
	dc, ny := complex(0.6, 0.9), complex(-1.5, 2.5)
	got := spectralOnly(t, 4, 6, 1, 4, func(y, x int) float64 { return 1 + 0.5*math.Pow(-1, float64(x)) },
		map[[3]int]complex128{{0, 0, 0}: dc, {0, 0, 3}: ny})
	expectField(t, "4x6 DC + Nyquist", got, 4, 6, func(y, x int) float64 { return real(dc) + 0.5*real(ny)*math.Pow(-1, float64(x)) })
	got = spectralOnly(t, 3, 5, 1, 3, func(y, x int) float64 { return 2 }, map[[3]int]complex128{{0, 0, 0}: dc, {0, 0, 2}: ny})
	expectField(t, "3x5 DC", got, 3, 5, func(y, x int) float64 { return 2 * real(dc) })
}

// Modes that do not fit the grid are refused before any graph is built.
func TestFNORefusesModesThatDoNotFit(t *testing.T) {
	for _, d := range []Dims{
		{Batch: 1, In: 1, Hidden: 1, Out: 1, GridH: 5, GridW: 8, Modes1: 3, Modes2: 2}, // 2 m1 > H: corners overlap
		{Batch: 1, In: 1, Hidden: 1, Out: 1, GridH: 6, GridW: 8, Modes1: 2, Modes2: 6}, // m2 > W/2+1
		{Batch: 1, In: 1, Hidden: 0, Out: 1, GridH: 6, GridW: 8, Modes1: 2, Modes2: 2},
	} {
		if _, err := Build(FNOModel, numerics.F32, d, 1); errs.CodeOf(err) != errs.Input {
			t.Errorf("%+v: %v, want E_INPUT", d, err)
		}
	}
}
