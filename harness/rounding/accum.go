package rounding

import (
	"math"
	"math/big"

	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

// The accumulation rules of Tile IR (docs/numerics.md, engine/compiler/tile): an accumulating
// instruction computes in its accumulator dtype and rounds to nearest even at every step, in a
// fixed order. MMA adds the K products of an output element in increasing k order, each
// product and each sum rounded; Reduce folds a tile's row left to right from its first element,
// each sum rounded, and the kernel adds each tile's partial into the row's accumulator, rounded.
// Accum computes those steps exactly (big numbers) and rounds each with this package's encoder,
// so a narrow accumulator (accum=bf16, accum=f32 on f64 operands, fp8 accumulators) is checked
// bit for bit without engine/numerics.

// exactPrec holds any sum or product of two float64 values exactly (their exponents span 2098
// binades, plus 106 bits of significand).
const exactPrec = 2300

// Accum is an accumulator dtype's arithmetic: every result is the exact result rounded once
// to the dtype (integers: wrapped at its width).
type Accum struct{ DType numerics.DType }

// step applies op to a and b exactly and rounds the result: float64 arithmetic is IEEE's
// rounding to f64 already; integers wrap (i does the operation in int64, exact for two int32
// operands). Non-finite operands follow IEEE arithmetic (Inf + finite = Inf, Inf - Inf = NaN),
// which no rounding changes.
func (a Accum) step(x, y float64, op func(z, x, y *big.Float) *big.Float, f func(x, y float64) float64, i func(x, y int64) int64) float64 {
	switch {
	case a.DType.IsInt():
		return float64(int8OrInt32(a.DType, i(int64(x), int64(y))))
	case a.DType == numerics.F64:
		return f(x, y)
	case math.IsInf(x, 0) || math.IsInf(y, 0) || x != x || y != y:
		return a.roundFloat(f(x, y))
	}
	z := new(big.Float).SetPrec(exactPrec)
	bx, by := new(big.Float).SetPrec(exactPrec).SetFloat64(x), new(big.Float).SetPrec(exactPrec).SetFloat64(y)
	if op(z, bx, by).Sign() == 0 {
		// Exact zero: IEEE's sign (x + y of opposite zeros and exact cancellation give +0,
		// a product or quotient the xor of the signs), which float64 arithmetic gives exactly.
		return f(x, y)
	}
	return DecodeDType(a.DType, EncodeExact(a.DType, z))
}

// roundFloat is a float64 value (Inf, NaN or exact) rounded to the accumulator.
func (a Accum) roundFloat(v float64) float64 {
	switch {
	case a.DType.IsInt():
		return float64(int8OrInt32(a.DType, int64(v)))
	case a.DType == numerics.F64, v != v:
		return v
	}
	return DecodeDType(a.DType, EncodeDType(a.DType, v))
}

func int8OrInt32(d numerics.DType, v int64) int64 {
	if d == numerics.I8 {
		return int64(int8(v))
	}
	return int64(int32(v))
}

// Add is RN(x + y), Mul RN(x·y), Div RN(x/y) in the accumulator.
func (a Accum) Add(x, y float64) float64 {
	return a.step(x, y, (*big.Float).Add, func(x, y float64) float64 { return x + y }, func(x, y int64) int64 { return x + y })
}
func (a Accum) Mul(x, y float64) float64 {
	return a.step(x, y, (*big.Float).Mul, func(x, y float64) float64 { return x * y }, func(x, y int64) int64 { return x * y })
}
func (a Accum) Div(x, y float64) float64 {
	return a.step(x, y, (*big.Float).Quo, func(x, y float64) float64 { return x / y }, func(x, y int64) int64 { return x / y })
}

// Round is x (exact in float64) rounded to the accumulator.
func (a Accum) Round(x float64) float64 { return a.roundFloat(x) }

// Dot is one MMA output: s = +0, then s = RN(s + RN(a_k·b_k)) for k in increasing order.
func (a Accum) Dot(xs, ys []float64) float64 {
	s := 0.0
	for k := range xs {
		s = a.Add(s, a.Mul(xs[k], ys[k]))
	}
	return s
}

// ReduceRow is a reduce kernel's result for one row cut into tiles of width w (the schedule's
// BN): each tile, padded with the load's fill, is folded left to right from its first element
// (RN of it), and its partial combined into the accumulator, which starts at +0 for sums and
// at fill for a max. max propagates NaN; mean divides the sum by len(row).
func (a Accum) ReduceRow(op string, row []float64, w int, fill float64) float64 {
	acc := 0.0
	if op == "reduce_max" {
		acc = fill
	}
	for start := 0; start < len(row); start += w {
		tile := make([]float64, w)
		for i := range tile {
			tile[i] = fill
			if start+i < len(row) {
				tile[i] = row[start+i]
			}
		}
		if op == "reduce_max" {
			p := tile[0]
			for _, v := range tile[1:] {
				p = max(p, v)
			}
			acc = a.Round(max(acc, a.Round(p)))
			continue
		}
		p := a.Round(tile[0])
		for _, v := range tile[1:] {
			p = a.Add(p, v)
		}
		acc = a.Add(acc, p)
	}
	if op == "reduce_mean" {
		acc = a.Div(acc, float64(len(row)))
	}
	return acc
}

// EncodeExact is the pattern of the exact value x rounded to float dtype d (not f64): Encode's
// rules (nearest, ties to even, overflow to ±Inf or, saturating, ±max) on a value that need not
// be a float64.
func EncodeExact(d numerics.DType, x *big.Float) uint64 {
	f, ok := FormatOf(d)
	if !ok {
		panic("rounding: EncodeExact to " + d.String())
	}
	if x.IsInf() {
		return f.Encode(math.Inf(x.Sign()))
	}
	var sign uint64
	if x.Signbit() {
		sign = f.signBit()
	}
	if x.Sign() == 0 {
		return sign
	}
	prec := x.Prec() + 64 // the scalings below are exact at x's precision; the +64 holds n + rest
	a := new(big.Float).SetPrec(prec).Abs(x)
	e := a.MantExp(nil) - 1 // a in [2^e, 2^(e+1))
	q := e - int(f.Man)
	if e < f.emin() {
		q = f.emin() - int(f.Man)
	}
	scaled := new(big.Float).SetPrec(prec).SetMantExp(a, -q)
	n, _ := scaled.Int(nil)
	rest := new(big.Float).SetPrec(prec).Sub(scaled, new(big.Float).SetPrec(prec).SetInt(n))
	switch rest.Cmp(big.NewFloat(0.5)) {
	case 1:
		n.Add(n, big.NewInt(1))
	case 0:
		if n.Bit(0) == 1 {
			n.Add(n, big.NewInt(1))
		}
	}
	rounded := new(big.Float).SetPrec(prec).SetInt(n)
	rounded.SetMantExp(rounded, q)
	if rounded.Cmp(new(big.Float).SetFloat64(f.MaxFinite())) > 0 {
		if f.Saturate {
			return sign | f.maxBits()
		}
		return sign | f.infBits()
	}
	if e < f.emin() {
		return sign | n.Uint64()
	}
	return sign | (uint64(e-f.emin())<<f.Man + n.Uint64())
}
