package numerics

import "math"

// Encode rounds x to d (round to nearest even) and returns the bit pattern in the low
// d.Size()*8 bits. See the package comment for NaN, overflow, int and bool rules.
func Encode(d DType, x float64) uint64 { return EncodeMode(d, x, RoundNearestEven) }

// EncodeMode is Encode with an explicit rounding mode. Int and bool targets ignore r: they
// always truncate toward zero (ints) or test x != 0 (bool).
func EncodeMode(d DType, x float64, r Rounding) uint64 {
	switch d {
	case F64:
		return math.Float64bits(x)
	case F32:
		if r != RoundTowardZero {
			if x != x {
				return fmtF32.nan
			}
			// Go defines float64->float32 as IEEE round-to-nearest-even with subnormals.
			return uint64(math.Float32bits(float32(x)))
		}
		return fmtF32.encode(x, r)
	case F16:
		return fmtF16.encode(x, r)
	case BF16:
		return fmtBF16.encode(x, r)
	case F8E4M3:
		return fmtE4M3.encode(x, r)
	case F8E5M2:
		return fmtE5M2.encode(x, r)
	case I8:
		return uint64(uint8(truncSat(x, math.MinInt8, math.MaxInt8)))
	case I32:
		return uint64(uint32(truncSat(x, math.MinInt32, math.MaxInt32)))
	case Bool:
		if x != 0 { // true for NaN too
			return 1
		}
		return 0
	}
	return 0
}

// truncSat converts toward zero, clamping to [lo, hi]; NaN gives 0. The clamps compare
// before converting because Go leaves out-of-range float->int conversions unspecified.
func truncSat(x float64, lo, hi int64) int64 {
	switch {
	case x != x:
		return 0
	case x <= float64(lo):
		return lo
	case x >= float64(hi):
		return hi
	}
	return int64(x)
}

// The 16- and 8-bit float decoders are table lookups because the CPU backend decodes every
// element it loads. BF16 needs no table: it is the top half of an f32.
var (
	f16Table  = buildTable(&fmtF16)
	e4m3Table = buildTable(&fmtE4M3)
	e5m2Table = buildTable(&fmtE5M2)
)

func buildTable(f *floatFormat) []float64 {
	t := make([]float64, 1<<(1+f.expBits+f.manBits))
	for i := range t {
		t[i] = f.decode(uint64(i))
	}
	return t
}

// Decode returns the exact value of a bit pattern held in the low d.Size()*8 bits of bits.
// Ints are sign-extended; bool is 1 for any non-zero byte; an invalid dtype gives NaN.
func Decode(d DType, bits uint64) float64 {
	switch d {
	case F64:
		return math.Float64frombits(bits)
	case F32:
		return float64(math.Float32frombits(uint32(bits)))
	case F16:
		return f16Table[uint16(bits)]
	case BF16:
		return float64(math.Float32frombits(uint32(uint16(bits)) << 16))
	case F8E4M3:
		return e4m3Table[uint8(bits)]
	case F8E5M2:
		return e5m2Table[uint8(bits)]
	case I8:
		return float64(int8(bits))
	case I32:
		return float64(int32(bits))
	case Bool:
		if uint8(bits) != 0 {
			return 1
		}
		return 0
	}
	return math.NaN()
}

// Round returns x rounded to d (nearest even) as a float64: Decode(d, Encode(d, x)), with the
// round trip skipped where a conversion does the same job.
func Round(d DType, x float64) float64 {
	switch d {
	case F64:
		return x
	case F32:
		return float64(float32(x))
	case I8:
		return float64(truncSat(x, math.MinInt8, math.MaxInt8))
	case I32:
		return float64(truncSat(x, math.MinInt32, math.MaxInt32))
	}
	return Decode(d, Encode(d, x))
}

// MaxFinite is the largest finite value of d: 448 for e4m3, 57344 for e5m2, 65504 for f16,
// the int maximum for ints, 1 for bool and 0 for an invalid dtype.
func MaxFinite(d DType) float64 {
	switch d {
	case I8:
		return math.MaxInt8
	case I32:
		return math.MaxInt32
	case Bool:
		return 1
	}
	if f := formatOf(d); f != nil {
		return f.decode(f.maxEnc)
	}
	return 0
}

// WrapInt wraps v to d's width in two's complement, as integer arithmetic on the device does
// (I8: int64(int8(v))). Bool maps non-zero to 1; other dtypes return v unchanged.
func WrapInt(d DType, v int64) int64 {
	switch d {
	case I8:
		return int64(int8(v))
	case I32:
		return int64(int32(v))
	case Bool:
		if v != 0 {
			return 1
		}
		return 0
	}
	return v
}
