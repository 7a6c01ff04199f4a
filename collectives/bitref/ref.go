package bitref

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/big"

	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

// Mode is the promise whose bits are computed. Fast mode promises no order of additions, so
// only its max, min and int sums (which do not depend on order) have a reference: use
// Deterministic for those.
type Mode int

const (
	Deterministic Mode = iota
	Exact
)

func (m Mode) String() string { return [...]string{"deterministic", "exact"}[m] }

// Red is a reduction.
type Red int

const (
	Sum Red = iota
	Avg
	Max
	Min
)

func (r Red) String() string { return [...]string{"sum", "avg", "max", "min"}[r] }

// Reduce returns the reduction of the contributions, in global order, element by element:
// every contribution holds the same number of elements of dt (little-endian).
func Reduce(mode Mode, dt numerics.DType, red Red, contribs [][]byte) ([]byte, error) {
	if len(contribs) == 0 {
		return nil, fmt.Errorf("bitref: %s %s of no contributions", red, dt)
	}
	if !dt.IsFloat() && !dt.IsInt() {
		return nil, fmt.Errorf("bitref: cannot reduce %s", dt)
	}
	sz := dt.Size()
	for i, c := range contribs {
		if len(c) != len(contribs[0]) || len(c)%sz != 0 {
			return nil, fmt.Errorf("bitref: contribution %d has %d bytes, contribution 0 %d (%s)", i, len(c), len(contribs[0]), dt)
		}
	}
	count := len(contribs[0]) / sz
	out := make([]byte, len(contribs[0]))
	vals := make([]uint64, len(contribs))
	for i := 0; i < count; i++ {
		for k, c := range contribs {
			vals[k] = Bits(c, i, sz)
		}
		SetBits(out, i, sz, Element(mode, dt, red, vals))
	}
	return out, nil
}

// Element is the documented result of one element's contributions (bit patterns of dt, in
// global order).
func Element(mode Mode, dt numerics.DType, red Red, vals []uint64) uint64 {
	switch {
	case red == Max || red == Min:
		return extreme(dt, red == Max, vals)
	case dt.IsInt():
		return intSum(dt, vals, red == Avg)
	case mode == Exact:
		return exactSum(dt, vals, red == Avg)
	case dt == numerics.F64:
		return f64Sum(vals, red == Avg)
	}
	return f32Sum(dt, vals, red == Avg)
}

// canonicalNaN is the NaN every reduction returns.
func canonicalNaN(dt numerics.DType) uint64 { return numerics.Encode(dt, math.NaN()) }

func isNaN(dt numerics.DType, b uint64) bool {
	v := numerics.Decode(dt, b)
	return v != v
}

// intValue sign-extends an int8 or int32 pattern.
func intValue(dt numerics.DType, b uint64) int64 {
	if dt == numerics.I8 {
		return int64(int8(uint8(b)))
	}
	return int64(int32(uint32(b)))
}

func intSum(dt numerics.DType, vals []uint64, avg bool) uint64 {
	var s int64
	for _, b := range vals {
		s += intValue(dt, b)
	}
	if avg {
		s /= int64(len(vals)) // Go's division truncates toward zero
	}
	if dt == numerics.I8 {
		return uint64(uint8(int8(s)))
	}
	return uint64(uint32(int32(s)))
}

func f64Sum(vals []uint64, avg bool) uint64 {
	acc := math.Float64frombits(vals[0])
	for _, b := range vals[1:] {
		acc += math.Float64frombits(b)
	}
	if avg {
		acc /= float64(len(vals))
	}
	if acc != acc {
		return canonicalNaN(numerics.F64)
	}
	return math.Float64bits(acc)
}

// f32Sum is f32 and every narrower float: float32 adds, in order, one rounding at the end.
func f32Sum(dt numerics.DType, vals []uint64, avg bool) uint64 {
	acc := float32(numerics.Decode(dt, vals[0]))
	for _, b := range vals[1:] {
		acc += float32(numerics.Decode(dt, b))
	}
	if avg {
		acc /= float32(len(vals))
	}
	if acc != acc {
		return canonicalNaN(dt)
	}
	if dt == numerics.F32 {
		return uint64(math.Float32bits(acc))
	}
	return numerics.Encode(dt, float64(acc))
}

// extreme is max or min in the total order -0 < +0, any NaN giving the canonical NaN. Ints
// compare as values.
func extreme(dt numerics.DType, isMax bool, vals []uint64) uint64 {
	if dt.IsInt() {
		best := vals[0]
		for _, b := range vals[1:] {
			if x, y := intValue(dt, b), intValue(dt, best); (isMax && x > y) || (!isMax && x < y) {
				best = b
			}
		}
		return best
	}
	for _, b := range vals {
		if isNaN(dt, b) {
			return canonicalNaN(dt)
		}
	}
	best := vals[0]
	for _, b := range vals[1:] {
		if above(dt, b, best) == isMax && b != best && !same(dt, b, best) {
			best = b
		}
	}
	return best
}

// above reports whether a > b in the total order of non-NaN values with -0 < +0.
func above(dt numerics.DType, a, b uint64) bool {
	x, y := numerics.Decode(dt, a), numerics.Decode(dt, b)
	if x == 0 && y == 0 {
		return !math.Signbit(x) && math.Signbit(y)
	}
	return x > y
}

// same reports whether a and b are one value of the total order (equal and, for zeros, of one
// sign): then the first in global order stays, which for a total order is no choice at all.
func same(dt numerics.DType, a, b uint64) bool {
	x, y := numerics.Decode(dt, a), numerics.Decode(dt, b)
	return x == y && math.Signbit(x) == math.Signbit(y)
}

// format is a float dtype's significand width (hidden bit included) and the exponent of its
// smallest subnormal, which is the ulp of every value below the normal range: IEEE 754
// binary64/32/16, bfloat16 and OCP fp8 E4M3/E5M2.
type format struct{ p, uMin int }

var formats = map[numerics.DType]format{
	numerics.F64: {53, -1074}, numerics.F32: {24, -149}, numerics.F16: {11, -24}, numerics.BF16: {8, -133},
	numerics.F8E4M3: {4, -9}, numerics.F8E5M2: {3, -16},
}

const prec = 4096 // bits: any sum of up to 2^900 f64 values is exact at this width

// exactSum is exact mode's sum (the exact sum rounded once to dt) or avg
// (round_dt(round_f64(S) / n)).
func exactSum(dt numerics.DType, vals []uint64, avg bool) uint64 {
	if r, ok := exactInF64(dt, vals); ok {
		if avg {
			r /= float64(len(vals))
		}
		return numerics.Encode(dt, r)
	}
	var nan, pinf, ninf bool
	allNegZero := true
	s := new(big.Float).SetPrec(prec)
	for _, b := range vals {
		v := numerics.Decode(dt, b)
		switch {
		case v != v:
			nan = true
		case math.IsInf(v, 1):
			pinf = true
		case math.IsInf(v, -1):
			ninf = true
		case v == 0:
			allNegZero = allNegZero && math.Signbit(v)
		default:
			allNegZero = false
			s.Add(s, new(big.Float).SetPrec(prec).SetFloat64(v))
		}
	}
	var r float64 // the value rounded to dt (Sum) or to f64 (Avg), before the last step
	switch {
	case nan || pinf && ninf:
		return canonicalNaN(dt)
	case pinf:
		r = math.Inf(1)
	case ninf:
		r = math.Inf(-1)
	case s.Sign() == 0 && allNegZero:
		r = math.Copysign(0, -1)
	case s.Sign() == 0:
		r = 0
	case avg:
		r = roundTo(s, formats[numerics.F64])
	default:
		r = roundTo(s, formats[dt])
	}
	if avg {
		r /= float64(len(vals))
	}
	if r != r {
		return canonicalNaN(dt)
	}
	return numerics.Encode(dt, r)
}

// exactInF64 is the shortcut for the common element whose float64 sum is exact: it adds in
// float64 and checks every add with Knuth's TwoSum (the rounding error of a+b is
// (a - (s - bb)) + (b - bb), bb = s - a, exactly); when every error is zero, the float64 sum
// is the exact sum and one conversion to dt is the single rounding. Any special value,
// nonzero error or overflow says no, and the caller takes math/big.
func exactInF64(dt numerics.DType, vals []uint64) (float64, bool) {
	s := numerics.Decode(dt, vals[0])
	zeros := s == 0 // a sum that cancels to zero takes math/big, where the sign rule is spelt out
	if math.IsInf(s, 0) || s != s {
		return 0, false
	}
	for _, b := range vals[1:] {
		v := numerics.Decode(dt, b)
		if math.IsInf(v, 0) || v != v {
			return 0, false
		}
		t := s + v
		bb := t - s
		if math.IsInf(t, 0) || (s-(t-bb))+(v-bb) != 0 {
			return 0, false
		}
		zeros = zeros && v == 0
		s = t
	}
	if s == 0 && !zeros {
		return 0, false
	}
	return s, true
}

// roundTo rounds the nonzero x to nearest even on the grid of f: p significant bits, but no
// finer than 2^uMin. The result is returned as a float64, exactly (every such grid point up to
// f's range is a float64); beyond float64's range it is ±Inf.
func roundTo(x *big.Float, f format) float64 {
	e := x.MantExp(nil) // |x| in [2^(e-1), 2^e)
	q := max(e-f.p, f.uMin)
	y := new(big.Float).SetPrec(prec).SetMantExp(x, -q)
	t, _ := y.Int(nil) // toward zero
	rest := new(big.Float).SetPrec(prec).Sub(y, new(big.Float).SetPrec(prec).SetInt(t))
	rest.Abs(rest)
	switch c := rest.Cmp(big.NewFloat(0.5)); {
	case c > 0, c == 0 && t.Bit(0) == 1:
		t.Add(t, big.NewInt(int64(y.Sign())))
	}
	r := new(big.Float).SetPrec(prec).SetInt(t)
	r.SetMantExp(r, q)
	v, _ := r.Float64()
	if t.Sign() == 0 {
		v = math.Copysign(0, float64(y.Sign())) // unreachable for sums of dt values: they are multiples of 2^uMin
	}
	return v
}

// Bits is element i of a little-endian buffer of sz-byte elements, as raw bits.
func Bits(b []byte, i, sz int) uint64 {
	switch sz {
	case 1:
		return uint64(b[i])
	case 2:
		return uint64(binary.LittleEndian.Uint16(b[2*i:]))
	case 4:
		return uint64(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return binary.LittleEndian.Uint64(b[8*i:])
}

// SetBits stores the raw bits v as element i of a little-endian buffer of sz-byte elements.
func SetBits(b []byte, i, sz int, v uint64) {
	switch sz {
	case 1:
		b[i] = byte(v)
	case 2:
		binary.LittleEndian.PutUint16(b[2*i:], uint16(v))
	case 4:
		binary.LittleEndian.PutUint32(b[4*i:], uint32(v))
	default:
		binary.LittleEndian.PutUint64(b[8*i:], v)
	}
}
