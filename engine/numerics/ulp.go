package numerics

import "math"

// Ordered maps a bit pattern to an integer that is monotone in its value, so that the ULP
// distance between two patterns is the difference of their images. -0 and +0 both map to 0
// (they are the same value, and ±smallest subnormal stay two steps apart). Callers exclude
// NaN patterns, whose image is meaningless. Ints and bool map to their value.
func Ordered(d DType, bits uint64) int64 {
	if f := formatOf(d); f != nil {
		b := bits & (f.signBit()<<1 - 1) // F64: shifts out to 0, minus 1 keeps all bits
		mag := int64(b &^ f.signBit())
		if b&f.signBit() != 0 {
			return -mag
		}
		return mag
	}
	return int64(Decode(d, bits))
}

// ULPDistance is the number of representable steps between two patterns of d, or for ints
// |a-b| as values. Two NaNs are 0 apart; a NaN and a number are math.MaxUint64 apart, so a
// tolerance never lets a NaN pass for a number.
func ULPDistance(d DType, a, b uint64) uint64 {
	if f := formatOf(d); f != nil {
		na, nb := f.isNaN(a), f.isNaN(b)
		if na || nb {
			if na && nb {
				return 0
			}
			return math.MaxUint64
		}
	}
	oa, ob := Ordered(d, a), Ordered(d, b)
	// The difference of two int64s can exceed MaxInt64 (F64 -max vs +max) but not MaxUint64,
	// and uint64 subtraction gives it exactly.
	if oa >= ob {
		return uint64(oa) - uint64(ob)
	}
	return uint64(ob) - uint64(oa)
}

// IsNaNBits reports whether a pattern of float dtype d is a NaN; always false for ints/bool.
func IsNaNBits(d DType, bits uint64) bool {
	if f := formatOf(d); f != nil {
		return f.isNaN(bits)
	}
	return false
}
