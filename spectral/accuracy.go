package spectral

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/tessera-qa/tessera-qa/engine/backend"
	_ "github.com/tessera-qa/tessera-qa/engine/backend/cpu" // the backend the suite measures
	"github.com/tessera-qa/tessera-qa/engine/compiler"
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
)

// Row is the accuracy of one length: relative L2 and L-infinity errors (L-inf relative to the
// reference's largest magnitude) of the forward transform, the inverse (norm backward) and
// the round trip ifft(fft(x)) against x, and the bound they are judged by.
type Row struct {
	N                int
	FwdL2, FwdLinf   float64
	InvL2, InvLinf   float64
	TripL2, TripLinf float64
	Bound            float64
	DType            numerics.DType
}

// Worst is the largest relative L2 error of the row.
func (r Row) Worst() float64 { return max(r.FwdL2, r.InvL2, r.TripL2) }

// OK reports whether every L2 error is within the bound (L-inf within 4x the bound: a single
// element's error over the largest magnitude is noisier than the L2 norm).
func (r Row) OK() bool {
	return r.Worst() <= r.Bound && max(r.FwdLinf, r.InvLinf, r.TripLinf) <= 4*r.Bound
}

func (r Row) String() string {
	return fmt.Sprintf("N=%d %s fwd %.3g/%.3g inv %.3g/%.3g trip %.3g/%.3g bound %.3g", r.N, r.DType, r.FwdL2, r.FwdLinf, r.InvL2, r.InvLinf, r.TripL2, r.TripLinf, r.Bound)
}

// BoundConst is c in the bound c * u * sqrt(log2 N): measured worst c on the CPU backend is
// about 1 (powers of two), 2 (other smooth N) and 3 (Bluestein primes); 6 leaves room without
// admitting sqrt(N) growth, which exceeds it from N ~ 2^10 on.
const BoundConst = 6

// UnitRoundoff is u of a dtype the spectral ops accept.
func UnitRoundoff(dt numerics.DType) float64 {
	if dt == numerics.F64 {
		return 0x1p-53
	}
	return 0x1p-24
}

// Bound is BoundConst * u * sqrt(log2 N).
func Bound(dt numerics.DType, n int) float64 {
	return BoundConst * UnitRoundoff(dt) * math.Sqrt(max(math.Log2(float64(n)), 1))
}

// Uniform returns n complex values with parts uniform in [-0.5, 0.5), rounded to dt.
func Uniform(dt numerics.DType, n int, seed uint64) []complex128 {
	r := rand.New(rand.NewPCG(seed, uint64(n)))
	x := make([]complex128, n)
	for i := range x {
		x[i] = complex(numerics.Round(dt, r.Float64()-0.5), numerics.Round(dt, r.Float64()-0.5))
	}
	return x
}

// Transform runs a one-axis complex FFT op (fft or ifft, norm backward) of the engine on x.
func Transform(op string, dt numerics.DType, x []complex128) ([]complex128, error) {
	n := len(x)
	b := graph.NewBuilder("spectral_" + op)
	b.Output(b.Op(op, nil, b.Input("x", dt, n, 2)))
	g, err := b.Build()
	if err != nil {
		return nil, err
	}
	p, err := compiler.Compile(g, compiler.Options{})
	if err != nil {
		return nil, err
	}
	be, err := backend.Get("cpu")
	if err != nil {
		return nil, err
	}
	in := tensor.New(dt, []int{n, 2})
	for i, z := range x {
		in.SetFloat64(2*i, real(z))
		in.SetFloat64(2*i+1, imag(z))
	}
	out, err := be.Run(p, map[string]*tensor.Tensor{"x": in})
	if err != nil {
		return nil, err
	}
	y := make([]complex128, n)
	for i := range y {
		y[i] = complex(out[0].Float64(2*i), out[0].Float64(2*i+1))
	}
	return y, nil
}

// Errors returns the relative L2 and L-infinity errors of got against want.
func Errors(got, want []complex128) (l2, linf float64) {
	var num, den, emax, wmax float64
	for i := range want {
		d := got[i] - want[i]
		e := real(d)*real(d) + imag(d)*imag(d)
		w := real(want[i])*real(want[i]) + imag(want[i])*imag(want[i])
		num, den = num+e, den+w
		emax, wmax = max(emax, e), max(wmax, w)
	}
	if den == 0 {
		return math.Inf(1), math.Inf(1)
	}
	return math.Sqrt(num / den), math.Sqrt(emax / wmax)
}

// Measure computes the row of length n in dtype dt (f32; f64 only for n <= DirectMax, where
// the compensated definition is accurate enough to judge it).
func Measure(dt numerics.DType, n int, seed uint64) (Row, error) {
	if n < 2 {
		return Row{}, errs.New(errs.Input, "spectral: N=%d: the accuracy suite starts at N=2", n)
	}
	if dt == numerics.F64 && n > DirectMax {
		return Row{}, errs.New(errs.Input, "spectral: N=%d: f64 is judged only up to N=%d (the float64 fast reference is not more accurate than the engine)", n, DirectMax)
	}
	x := Uniform(dt, n, seed)
	row := Row{N: n, DType: dt, Bound: Bound(dt, n)}
	fwd, err := Transform("fft", dt, x)
	if err != nil {
		return row, err
	}
	row.FwdL2, row.FwdLinf = Errors(fwd, Reference(x, -1))
	inv, err := Transform("ifft", dt, x)
	if err != nil {
		return row, err
	}
	ref := Reference(x, 1)
	for i := range ref {
		ref[i] /= complex(float64(n), 0)
	}
	row.InvL2, row.InvLinf = Errors(inv, ref)
	trip, err := Transform("ifft", dt, fwd)
	if err != nil {
		return row, err
	}
	row.TripL2, row.TripLinf = Errors(trip, x)
	return row, nil
}
