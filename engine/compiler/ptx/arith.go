package ptx

import (
	"math"
)

// arith is the small instruction set that the f64 math routines and the narrow-float codecs
// are written against. Two implementations exist: ptxArith emits one PTX instruction per call,
// goArith evaluates the same call in Go with the same IEEE semantics. The routines are written
// once, generically, so the Go twin that the unit tests compare with math.Exp, numerics.Encode
// and friends is the very algorithm the GPU runs, not a transcription of it.
//
// F is an f64 value, I a 64-bit integer (unsigned unless an op says signed), P a predicate.
type arith[F, I, P any] interface {
	f(c float64) F
	add(a, b F) F
	sub(a, b F) F
	mul(a, b F) F
	div(a, b F) F
	fma(a, b, c F) F
	sqrt(a F) F
	neg(a F) F
	abs(a F) F
	rint(a F) F // nearest integer, ties to even

	flt(a, b F) P // ordered comparisons: false when either is NaN
	fle(a, b F) P
	fgt(a, b F) P
	fge(a, b F) P
	feq(a, b F) P
	fnan(a F) P
	fsel(p P, a, b F) F

	bits(a F) I
	frombits(i I) F
	i(c uint64) I
	iadd(a, b I) I
	isub(a, b I) I
	imul(a, b I) I
	and(a, b I) I
	or(a, b I) I
	shl(a, n I) I // shift counts >= 64 give 0
	shr(a, n I) I // logical
	sar(a, n I) I // arithmetic
	ilt(a, b I) P // signed
	iltu(a, b I) P
	ieq(a, b I) P
	imin(a, b I) I // signed
	imax(a, b I) I // signed
	isel(p P, a, b I) I
	f2i(a F) I // truncate toward zero; NaN gives 0; saturates at the int64 range
	i2f(a I) F // signed int64 to f64, nearest even

	pand(p, q P) P
	por(p, q P) P
	pnot(p P) P

	tab(t *table, idx I, k int) F // t.vals[idx*t.stride+k]
}

// table is a read-only f64 array that a routine indexes; the PTX side places it in .const.
type table struct {
	name   string
	stride int
	vals   []float64
}

// goArith is the Go twin of ptxArith.
type goArith struct{}

func (goArith) f(c float64) float64                   { return c }
func (goArith) add(a, b float64) float64              { return a + b }
func (goArith) sub(a, b float64) float64              { return a - b }
func (goArith) mul(a, b float64) float64              { return float64(a * b) }
func (goArith) div(a, b float64) float64              { return a / b }
func (goArith) fma(a, b, c float64) float64           { return math.FMA(a, b, c) }
func (goArith) sqrt(a float64) float64                { return math.Sqrt(a) }
func (goArith) neg(a float64) float64                 { return -a }
func (goArith) abs(a float64) float64                 { return math.Abs(a) }
func (goArith) rint(a float64) float64                { return math.RoundToEven(a) }
func (goArith) flt(a, b float64) bool                 { return a < b }
func (goArith) fle(a, b float64) bool                 { return a <= b }
func (goArith) fgt(a, b float64) bool                 { return a > b }
func (goArith) fge(a, b float64) bool                 { return a >= b }
func (goArith) feq(a, b float64) bool                 { return a == b }
func (goArith) fnan(a float64) bool                   { return a != a }
func (goArith) bits(a float64) uint64                 { return math.Float64bits(a) }
func (goArith) frombits(i uint64) float64             { return math.Float64frombits(i) }
func (goArith) i(c uint64) uint64                     { return c }
func (goArith) iadd(a, b uint64) uint64               { return a + b }
func (goArith) isub(a, b uint64) uint64               { return a - b }
func (goArith) imul(a, b uint64) uint64               { return a * b }
func (goArith) and(a, b uint64) uint64                { return a & b }
func (goArith) or(a, b uint64) uint64                 { return a | b }
func (goArith) shl(a, n uint64) uint64                { return a << min(n, 64) }
func (goArith) shr(a, n uint64) uint64                { return a >> min(n, 64) }
func (goArith) sar(a, n uint64) uint64                { return uint64(int64(a) >> min(n, 64)) }
func (goArith) ilt(a, b uint64) bool                  { return int64(a) < int64(b) }
func (goArith) iltu(a, b uint64) bool                 { return a < b }
func (goArith) ieq(a, b uint64) bool                  { return a == b }
func (goArith) imin(a, b uint64) uint64               { return uint64(min(int64(a), int64(b))) }
func (goArith) imax(a, b uint64) uint64               { return uint64(max(int64(a), int64(b))) }
func (goArith) i2f(a uint64) float64                  { return float64(int64(a)) }
func (goArith) pand(p, q bool) bool                   { return p && q }
func (goArith) por(p, q bool) bool                    { return p || q }
func (goArith) pnot(p bool) bool                      { return !p }
func (goArith) tab(t *table, i uint64, k int) float64 { return t.vals[int(i)*t.stride+k] }

func (goArith) fsel(p bool, a, b float64) float64 {
	if p {
		return a
	}
	return b
}

func (goArith) isel(p bool, a, b uint64) uint64 {
	if p {
		return a
	}
	return b
}

// f2i is PTX cvt.rzi.s64.f64: out-of-range values saturate. The twin gives 0 for NaN; no
// routine depends on that (the value is discarded or NaN propagates another way).
func (goArith) f2i(a float64) uint64 {
	switch {
	case a != a:
		return 0
	case a >= 0x1p63:
		return math.MaxInt64
	case a < -0x1p63:
		return 1 << 63
	}
	return uint64(int64(a))
}
