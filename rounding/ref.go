// Package rounding checks every encoding path of the engine bit for bit against an encoder
// written here from the format definitions alone (docs/numerics.md), independent of
// engine/numerics: exact big-number rounding to nearest, ties to even, with the documented
// overflow, NaN and saturation rules. suites/rounding runs it through numerics.Encode, the
// cast op and the stores of the arithmetic kernels, on every backend; PyTorch's conversions
// check this encoder where they follow the same rules (f32 sources to f16 and bf16).
//
// Index:
//
//	ref.go     Format, the formats' parameters, Encode and Decode written from first principles
//	inputs.go  the inputs that make rounding go wrong: ties, ulp neighbours, subnormals, overflow, NaN
//	paths.go   Path: one encoding route through the engine (Encode, cast, mul, matmul, reduce_sum),
//	           Check: run it and compare bits
//	accum.go   Accum: an accumulator's arithmetic (each step exact, then rounded once) and the
//	           orders of MMA and Reduce; EncodeExact, Encode of a value that is not a float64
//	accumcases.go AccumCombos (what the verifier accepts, read off the registry), AccumCase,
//	           AccumCases: matmul and reductions on narrow and wide accumulators, bit for bit
//	torch.go   the PyTorch cross-check of this encoder
package rounding

import (
	"math"
	"math/big"

	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

// Format is a binary float layout as docs/numerics.md tabulates it: a sign, Exp exponent bits,
// Man stored mantissa bits, the bias, and how the top of the range behaves.
type Format struct {
	Name     string
	Exp, Man uint
	Bias     int
	// IEEE: the all-ones exponent holds Inf (mantissa 0) and NaN; otherwise (e4m3 "FN") it
	// holds normal numbers except the all-ones mantissa, which is NaN.
	IEEE bool
	// NaN is the canonical NaN pattern, sign clear.
	NaN uint64
	// Saturate: a finite value that rounds above the largest finite value, and ±Inf, become
	// ±max (the fp8 formats, like PTX cvt.rn.satfinite); otherwise they become ±Inf.
	Saturate bool
}

// The formats, from the table of docs/numerics.md.
var (
	F32  = Format{"f32", 8, 23, 127, true, 0x7FC00000, false}
	F16  = Format{"f16", 5, 10, 15, true, 0x7E00, false}
	BF16 = Format{"bf16", 8, 7, 127, true, 0x7FC0, false}
	E4M3 = Format{"fp8e4m3", 4, 3, 7, false, 0x7F, true}
	E5M2 = Format{"fp8e5m2", 5, 2, 15, true, 0x7E, true}
)

// FormatOf returns the layout of a float dtype narrower than f64.
func FormatOf(d numerics.DType) (Format, bool) {
	switch d {
	case numerics.F32:
		return F32, true
	case numerics.F16:
		return F16, true
	case numerics.BF16:
		return BF16, true
	case numerics.F8E4M3:
		return E4M3, true
	case numerics.F8E5M2:
		return E5M2, true
	}
	return Format{}, false
}

func (f Format) signBit() uint64 { return 1 << (f.Exp + f.Man) }
func (f Format) emin() int       { return 1 - f.Bias }

// maxBits is the largest finite magnitude's pattern.
func (f Format) maxBits() uint64 {
	top := uint64(1)<<f.Exp - 1 // all-ones exponent field
	if f.IEEE {
		return (top-1)<<f.Man | (1<<f.Man - 1)
	}
	return top<<f.Man | (1<<f.Man - 2)
}

func (f Format) infBits() uint64 { return (uint64(1)<<f.Exp - 1) << f.Man }

// Decode is the value of a pattern, from its fields: (-1)^s · 1.m · 2^(e-bias) for a normal,
// 0.m · 2^emin for a subnormal, and the top of the range as IEEE says or as e4m3 FN says.
func (f Format) Decode(bits uint64) float64 {
	neg := bits&f.signBit() != 0
	e := int(bits>>f.Man) & (1<<f.Exp - 1)
	m := bits & (1<<f.Man - 1)
	top := 1<<f.Exp - 1
	var v float64
	switch {
	case f.IEEE && e == top && m == 0:
		v = math.Inf(1)
	case f.IEEE && e == top, !f.IEEE && e == top && m == 1<<f.Man-1:
		return math.NaN()
	case e == 0:
		v = math.Ldexp(float64(m), f.emin()-int(f.Man))
	default:
		v = math.Ldexp(float64(m|1<<f.Man), e-f.Bias-int(f.Man))
	}
	if neg {
		v = -v
	}
	return v
}

// MaxFinite is the largest finite value.
func (f Format) MaxFinite() float64 { return f.Decode(f.maxBits()) }

// Encode rounds x to the format: to nearest, ties to the even pattern, computed exactly with
// big numbers on the quantum of x's binade (the subnormal quantum below the normal range).
// NaN gives the canonical NaN with the sign dropped; a rounded magnitude above the largest
// finite value and ±Inf give ±Inf, or ±max when the format saturates; ±0 keeps its sign.
func (f Format) Encode(x float64) uint64 {
	if x != x {
		return f.NaN
	}
	var sign uint64
	if math.Signbit(x) {
		sign = f.signBit()
	}
	a := math.Abs(x)
	switch {
	case math.IsInf(a, 1) && f.Saturate:
		return sign | f.maxBits()
	case math.IsInf(a, 1):
		return sign | f.infBits()
	case a == 0:
		return sign
	}
	_, exp := math.Frexp(a) // a = frac · 2^exp, frac in [0.5, 1)
	e := exp - 1            // a in [2^e, 2^(e+1))
	q := e - int(f.Man)     // the quantum is 2^q
	if e < f.emin() {
		q = f.emin() - int(f.Man)
	}
	// n = a / 2^q exactly, rounded to an integer half to even.
	scaled := new(big.Float).SetPrec(64).SetFloat64(a)
	scaled.SetMantExp(scaled, -q)
	n, _ := scaled.Int(nil) // a > 0: truncation is floor
	rest := new(big.Float).SetPrec(64).Sub(scaled, new(big.Float).SetPrec(64).SetInt(n))
	switch rest.Cmp(big.NewFloat(0.5)) {
	case 1:
		n.Add(n, big.NewInt(1))
	case 0:
		if n.Bit(0) == 1 {
			n.Add(n, big.NewInt(1))
		}
	}
	// The rounded magnitude n·2^q against the largest finite value.
	rounded := new(big.Float).SetPrec(64).SetInt(n)
	rounded.SetMantExp(rounded, q)
	if rounded.Cmp(new(big.Float).SetFloat64(f.MaxFinite())) > 0 {
		if f.Saturate {
			return sign | f.maxBits()
		}
		return sign | f.infBits()
	}
	// Subnormal: the pattern is n itself (n = 2^Man is the smallest normal). Normal: the
	// exponent field minus one, shifted, plus n (whose hidden bit adds the one back, and whose
	// carry to 2^(Man+1) moves into the next binade).
	if e < f.emin() {
		return sign | n.Uint64()
	}
	return sign | (uint64(e-f.emin())<<f.Man + n.Uint64())
}

// EncodeDType is the documented cast of a float64 (which may hold an f32, an integer, ...) to
// dtype d, as a bit pattern in the low d.Size()*8 bits: floats as Format.Encode (f64 is the
// identity), ints truncate toward zero and saturate with NaN giving 0, bool is x != 0.
func EncodeDType(d numerics.DType, x float64) uint64 {
	if f, ok := FormatOf(d); ok {
		return f.Encode(x)
	}
	switch d {
	case numerics.F64:
		return math.Float64bits(x)
	case numerics.I8:
		return uint64(uint8(int8(truncSat(x, -128, 127))))
	case numerics.I32:
		return uint64(uint32(int32(truncSat(x, math.MinInt32, math.MaxInt32))))
	case numerics.Bool:
		if x != 0 {
			return 1
		}
		return 0
	}
	panic("rounding: no encoder for " + d.String())
}

// truncSat truncates toward zero exactly (big.Float.Int) and clamps to [lo, hi].
func truncSat(x float64, lo, hi int64) int64 {
	if x != x {
		return 0
	}
	if math.IsInf(x, 0) {
		if x > 0 {
			return hi
		}
		return lo
	}
	i, _ := new(big.Float).SetFloat64(x).Int(nil)
	switch {
	case i.Cmp(big.NewInt(lo)) < 0:
		return lo
	case i.Cmp(big.NewInt(hi)) > 0:
		return hi
	}
	return i.Int64()
}

// DecodeDType is the exact value of a pattern of dtype d: floats from their fields, ints
// sign-extended, bool 0 or 1.
func DecodeDType(d numerics.DType, bits uint64) float64 {
	if f, ok := FormatOf(d); ok {
		return f.Decode(bits)
	}
	switch d {
	case numerics.F64:
		return math.Float64frombits(bits)
	case numerics.I8:
		return float64(int8(bits))
	case numerics.I32:
		return float64(int32(bits))
	case numerics.Bool:
		if uint8(bits) != 0 {
			return 1
		}
		return 0
	}
	panic("rounding: no decoder for " + d.String())
}

// WrapDType is an integer cast between int dtypes: two's complement at the target's width.
func WrapDType(d numerics.DType, v int64) uint64 {
	switch d {
	case numerics.I8:
		return uint64(uint8(v))
	case numerics.I32:
		return uint64(uint32(v))
	case numerics.Bool:
		if v != 0 {
			return 1
		}
		return 0
	}
	panic("rounding: no integer cast to " + d.String())
}
