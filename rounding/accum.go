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

// arith names the three steps an accumulator takes.
type arith int

const (
	opAdd arith = iota
	opMul
	opDiv
)

// step applies op to x and y exactly and rounds the result: float64 arithmetic is IEEE's
// rounding to f64 already; integers wrap (in int64, exact for two int32 operands). Non-finite
// operands follow IEEE arithmetic (Inf + finite = Inf, Inf - Inf = NaN), which no rounding
// changes. Where the float64 result is exact (exactInFloat64, most steps) it is rounded once;
// otherwise the exact value is computed with big numbers.
func (a Accum) step(x, y float64, op arith) float64 {
	var r float64
	switch op {
	case opAdd:
		r = x + y
	case opMul:
		r = x * y
	default:
		r = x / y
	}
	switch {
	case a.DType.IsInt():
		i, j := int64(x), int64(y)
		switch op {
		case opAdd:
			return float64(int8OrInt32(a.DType, i+j))
		case opMul:
			return float64(int8OrInt32(a.DType, i*j))
		}
		return float64(int8OrInt32(a.DType, i/j))
	case a.DType == numerics.F64:
		return r
	case math.IsInf(x, 0) || math.IsInf(y, 0) || x != x || y != y, op == opDiv && y == 0:
		return a.roundFloat(r)
	case exactInFloat64(x, y, r, op):
		return a.roundFloat(r)
	}
	return a.bigStep(x, y, r, op)
}

// bigStep is step on finite floats through big numbers: exact, then rounded once.
func (a Accum) bigStep(x, y, r float64, op arith) float64 {
	z := new(big.Float).SetPrec(exactPrec)
	bx, by := new(big.Float).SetPrec(exactPrec).SetFloat64(x), new(big.Float).SetPrec(exactPrec).SetFloat64(y)
	switch op {
	case opAdd:
		z.Add(bx, by)
	case opMul:
		z.Mul(bx, by)
	default:
		z.Quo(bx, by)
	}
	if z.Sign() == 0 {
		// Exact zero: IEEE's sign (x + y of opposite zeros and exact cancellation give +0,
		// a product or quotient the xor of the signs), which float64 arithmetic gives exactly.
		return r
	}
	return DecodeDType(a.DType, EncodeExact(a.DType, z))
}

// exactInFloat64 reports whether r, the float64 result of x op y, is the exact result: the
// error of a sum (TwoSum) or the residual of a product or quotient (one fused multiply-add) is
// zero. Only far from the subnormals, where the residual itself would round.
func exactInFloat64(x, y, r float64, op arith) bool {
	const safe = 0x1p-900
	tiny := func(v float64) bool { return v != 0 && math.Abs(v) < safe }
	if math.IsInf(r, 0) || math.Abs(r) < safe || tiny(x) || tiny(y) {
		return false
	}
	switch op {
	case opAdd:
		bv := r - x
		return (x-(r-bv))+(y-bv) == 0
	case opMul:
		return math.FMA(x, y, -r) == 0
	}
	return math.FMA(r, y, -x) == 0
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
	return a.step(x, y, opAdd)
}
func (a Accum) Mul(x, y float64) float64 {
	return a.step(x, y, opMul)
}
func (a Accum) Div(x, y float64) float64 {
	return a.step(x, y, opDiv)
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
