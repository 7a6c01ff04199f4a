package ptx

import (
	"math"

	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

// narrow describes a binary float format narrower than f64, as engine/numerics defines it
// (its layout type is unexported; TestNarrowMatchesNumerics proves these agree with it).
type narrow struct {
	expBits, manBits uint64
	bias             uint64
	maxEnc           uint64 // largest finite magnitude
	nan              uint64 // canonical NaN, sign clear
	hasInf           bool   // maxEnc+1 is Inf and everything above it NaN; else only nan is NaN
	satfinite        bool   // overflow and ±Inf give ±max (PTX cvt.satfinite, OCP fp8)
}

var narrowOf = map[numerics.DType]narrow{
	numerics.F16:    {5, 10, 15, 0x7BFF, 0x7E00, true, false},
	numerics.BF16:   {8, 7, 127, 0x7F7F, 0x7FC0, true, false},
	numerics.F8E4M3: {4, 3, 7, 0x7E, 0x7F, false, true},
	numerics.F8E5M2: {5, 2, 15, 0x7B, 0x7E, true, true},
}

// encodeNarrow rounds x to the format (nearest even) and returns the bit pattern, exactly as
// numerics.Encode does: it rounds the float64's integer significand once, whatever the width,
// so no double rounding through f32 happens.
func encodeNarrow[F, I, P any](m arith[F, I, P], f narrow, x F) I {
	b := m.bits(x)
	sign := m.shl(m.shr(b, m.i(63)), m.i(f.expBits+f.manBits))
	a := m.and(b, m.i(^signBit))
	const minNormal, inf = 0x0010000000000000, 0x7FF0000000000000
	inf2 := f.maxEnc + 1
	if f.satfinite {
		inf2 = f.maxEnc
	}
	// Zero, f64 subnormals (below half of every narrow format's smallest subnormal), Inf, NaN.
	special := m.por(m.iltu(a, m.i(minNormal)), m.iltu(m.i(inf-1), a))
	spec := m.isel(m.iltu(m.i(inf), a), m.i(f.nan), m.or(sign, m.isel(m.ieq(a, m.i(inf)), m.i(inf2), m.i(0))))

	e := m.isub(m.shr(a, m.i(52)), m.i(1023)) // signed
	sig := m.or(m.and(a, m.i(1<<52-1)), m.i(1<<52))
	emin := 1 - int64(f.bias)
	below := m.ilt(e, m.i(uint64(emin)))
	// Below the normal range the rounding point moves left by emin-e bits (capped: beyond 60
	// everything is remainder below half and rounds to 0).
	extra := m.imin(m.isub(m.i(uint64(emin)), e), m.i(60-(52-f.manBits)))
	shift := m.iadd(m.i(52-f.manBits), m.isel(below, extra, m.i(0)))
	base := m.isel(below, m.i(0), m.shl(m.isub(e, m.i(uint64(emin))), m.i(f.manBits)))
	q := m.shr(sig, shift)
	half := m.isub(m.shl(m.i(1), m.isub(shift, m.i(1))), m.i(1))
	q = m.shr(m.iadd(m.iadd(sig, half), m.and(q, m.i(1))), shift)
	enc := m.iadd(base, q)
	over := m.iltu(m.i(f.maxEnc), enc)
	enc = m.isel(over, m.i(inf2), enc)
	return m.isel(special, spec, m.or(sign, enc))
}

// decodeNarrow is the exact value of a bit pattern of the format, as numerics.Decode gives it.
func decodeNarrow[F, I, P any](m arith[F, I, P], f narrow, bits I) F {
	sb := uint64(1) << (f.expBits + f.manBits)
	mag := m.and(bits, m.i(sb-1))
	exp := m.shr(mag, m.i(f.manBits))
	man := m.and(mag, m.i(1<<f.manBits-1))
	var isNaN P
	if f.hasInf {
		isNaN = m.iltu(m.i(f.maxEnc+1), mag)
	} else {
		isNaN = m.ieq(mag, m.i(f.nan))
	}
	minSubExp := 1 - int64(f.bias) - int64(f.manBits)
	sub := m.mul(m.i2f(man), pow2(m, m.i(uint64(minSubExp))))
	norm := m.frombits(m.or(m.shl(m.iadd(exp, m.i(uint64(1023-int64(f.bias)))), m.i(52)), m.shl(man, m.i(52-f.manBits))))
	v := m.fsel(m.ieq(exp, m.i(0)), sub, norm)
	if f.hasInf {
		v = m.fsel(m.ieq(mag, m.i(f.maxEnc+1)), m.f(posInf), v)
	}
	v = m.fsel(isNaN, m.f(nanF64), v)
	neg := m.pnot(m.ieq(m.and(bits, m.i(sb)), m.i(0)))
	return m.fsel(neg, m.frombits(m.or(m.bits(v), m.i(signBit))), v)
}

var (
	posInf = math.Inf(1)
	nanF64 = math.NaN()
)

// narrowEncode is encodeNarrow of an f64 register through the module's .func for dt, and
// narrowDecode decodeNarrow of a bit pattern (emitter.callFunc says why).
func narrowEncode(e *emitter, dt numerics.DType, x string) string {
	f := narrowOf[dt]
	return e.callFunc("tq_encode_"+dt.String(), "fd", "rd", x, func(m ptxArith, a string) string { return encodeNarrow(m, f, a) })
}

func narrowDecode(e *emitter, dt numerics.DType, bits string) string {
	f := narrowOf[dt]
	return e.callFunc("tq_decode_"+dt.String(), "rd", "fd", bits, func(m ptxArith, a string) string { return decodeNarrow(m, f, a) })
}
