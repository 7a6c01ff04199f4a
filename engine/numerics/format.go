package numerics

import (
	"math"

	"github.com/tessera-qa/tessera-qa/engine/failpoint"
)

// floatFormat describes a binary float layout: sign, expBits exponent bits, manBits stored
// mantissa bits. All encodings below are magnitudes (sign bit clear).
type floatFormat struct {
	expBits, manBits uint
	bias             int
	maxEnc           uint64 // largest finite magnitude
	nan              uint64 // canonical quiet NaN, sign clear
	hasInf           bool   // IEEE-style: maxEnc+1 is Inf, above it NaN; else only nan is NaN
	satfinite        bool   // overflow and ±Inf saturate to ±max (PTX cvt.satfinite)
}

var (
	fmtF64  = floatFormat{11, 52, 1023, 0x7FEFFFFFFFFFFFFF, 0x7FF8000000000000, true, false}
	fmtF32  = floatFormat{8, 23, 127, 0x7F7FFFFF, 0x7FC00000, true, false}
	fmtF16  = floatFormat{5, 10, 15, 0x7BFF, 0x7E00, true, false}
	fmtBF16 = floatFormat{8, 7, 127, 0x7F7F, 0x7FC0, true, false}
	fmtE4M3 = floatFormat{4, 3, 7, 0x7E, 0x7F, false, true}
	fmtE5M2 = floatFormat{5, 2, 15, 0x7B, 0x7E, true, true}
)

// formatOf returns d's layout, or nil for a non-float dtype.
func formatOf(d DType) *floatFormat {
	switch d {
	case F64:
		return &fmtF64
	case F32:
		return &fmtF32
	case F16:
		return &fmtF16
	case BF16:
		return &fmtBF16
	case F8E4M3:
		return &fmtE4M3
	case F8E5M2:
		return &fmtE5M2
	}
	return nil
}

func (f *floatFormat) signBit() uint64 { return 1 << (f.expBits + f.manBits) }

func (f *floatFormat) isNaN(bits uint64) bool {
	mag := bits & (f.signBit() - 1)
	if f.hasInf {
		return mag > f.maxEnc+1
	}
	return mag == f.nan
}

// minSubExp is the exponent of the smallest subnormal: its value is 2^minSubExp.
func (f *floatFormat) minSubExp() int { return 1 - f.bias - int(f.manBits) }

// decode is the slow, table-building path: it assembles float64 bits field by field.
func (f *floatFormat) decode(bits uint64) float64 {
	neg := bits&f.signBit() != 0
	mag := bits & (f.signBit() - 1)
	exp := int(mag >> f.manBits)
	man := mag & (1<<f.manBits - 1)
	var v float64
	switch {
	case f.isNaN(mag):
		v = math.NaN()
	case f.hasInf && mag == f.maxEnc+1:
		v = math.Inf(1)
	case exp == 0:
		v = math.Ldexp(float64(man), f.minSubExp())
	default:
		v = math.Float64frombits(uint64(exp-f.bias+1023)<<52 | man<<(52-f.manBits))
	}
	if neg {
		v = -v
	}
	return v
}

// encode rounds x to the format. It works on the float64's integer significand, so there is
// exactly one rounding step whatever the target width.
func (f *floatFormat) encode(x float64, r Rounding) uint64 {
	b := math.Float64bits(x)
	sign := (b >> 63) << (f.expBits + f.manBits)
	a := b &^ (1 << 63)
	const minNormal, inf = 0x0010000000000000, 0x7FF0000000000000
	if a-minNormal >= inf-minNormal { // one unsigned compare catches zero, subnormal, Inf, NaN
		switch {
		case a > inf:
			return f.nan
		case a == inf && f.satfinite:
			return sign | f.maxEnc
		case a == inf:
			return sign | (f.maxEnc + 1)
		}
		// ±0 or a float64 subnormal, below half the smallest subnormal of every narrower format.
		return sign
	}
	e := int(a>>52) - 1023
	sig := a&(1<<52-1) | 1<<52
	emin := 1 - f.bias
	shift := 52 - f.manBits
	var base uint64
	if e >= emin {
		// Adding the rounded significand (hidden bit included) to the exponent field minus one
		// lets a mantissa carry move into the exponent, and on into Inf, on its own.
		base = uint64(e-emin) << f.manBits
	} else {
		shift += uint(emin - e)
		if shift > 60 {
			shift = 60 // sig < 2^53, so everything is remainder and below half: rounds to 0
		}
	}
	q := sig >> shift
	if r != RoundTowardZero {
		// Adding half-minus-one plus the kept LSB rounds up exactly when the remainder is above
		// half, or equal to it with an odd LSB: ties to even without a data-dependent branch.
		q = (sig + (1<<(shift-1) - 1) + failpoint.Pick(failpoint.NumericsTiesAwayFromZero, q&1, 1)) >> shift
	}
	enc := base + q
	if enc > f.maxEnc {
		if f.satfinite || r == RoundTowardZero {
			return sign | f.maxEnc
		}
		return sign | (f.maxEnc + 1)
	}
	return sign | enc
}
