package exact

import (
	"encoding/binary"
	"math"

	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/failpoint"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

// Sum writes into out the correctly rounded (round to nearest even) exact sum, element by
// element, of parts. Every part and out hold the same number of elements of dt
// (little-endian, the engine's storage: 16/8-bit floats as bit patterns, see engine/numerics
// and engine/tensor). out may alias parts[0] (or any part) exactly; a partial overlap is not
// supported. Integer dtypes (int8, int32) sum exactly in int64 and wrap to the dtype
// (numerics.WrapInt), like the engine's integer arithmetic. Errors are coded: E_DTYPE for
// bool or an invalid dtype, E_INPUT for a length mismatch.
//
// The result depends only on the multiset of contributions of each element: not on their
// order, nor on how they were split over ranks, as long as the raw contributions (not
// rounded partial sums) reach Sum. Special values: any NaN gives the canonical NaN
// (numerics.Encode(dt, NaN)); +Inf and -Inf together give NaN, one kind of infinity gives
// numerics.Encode(dt, ±Inf) (which saturates fp8 e5m2 to ±57344, like every engine cast); an
// exact zero sum is -0 only if every contribution is -0 (no contributions: +0); a finite sum
// beyond the range rounds as numerics.Encode rounds it (±Inf for f64, f32, f16, bf16, ±max
// for fp8).
func Sum(dt numerics.DType, parts [][]byte, out []byte) error {
	if err := validate("Sum", dt, parts, out); err != nil {
		return err
	}
	if dt.IsInt() {
		sumInts(dt, parts, out, 0)
		return nil
	}
	sumFloats(dt, parts, out, 0)
	return nil
}

// Avg writes round_dt(round_f64(S) / n) where S is the exact sum of parts and n the number of
// contributions the mean is over, normally len(parts); n is explicit because a caller may
// divide by a count other than the number of slices it passes. n must be at least 1.
//
// Avg is deterministic and independent of order and split like Sum, but it is not correctly
// rounded: S is rounded to float64 (correctly), the quotient by n is rounded to float64 again
// and then to dt, so the result is within 1 ulp of float64 of S/n before the last rounding
// to dt, and that double rounding can land one dt ulp away from the correctly rounded mean
// at (rare) near-midpoints. Special values follow Sum's rules (NaN/n, Inf/n, -0/n keep their
// kind and sign). For f64 an exact sum beyond float64's range gives ±Inf even when S/n would
// fit. Integer dtypes: the exact int64 sum divided by n, truncated toward zero, then wrapped.
func Avg(dt numerics.DType, parts [][]byte, out []byte, n int) error {
	if err := validate("Avg", dt, parts, out); err != nil {
		return err
	}
	if n < 1 {
		return errs.New(errs.Input, "exact.Avg: count %d, want at least 1", n)
	}
	if dt.IsInt() {
		sumInts(dt, parts, out, n)
		return nil
	}
	sumFloats(dt, parts, out, n)
	return nil
}

func validate(fn string, dt numerics.DType, parts [][]byte, out []byte) error {
	if !dt.IsFloat() && !dt.IsInt() {
		return errs.New(errs.DType, "exact.%s: dtype %v cannot be summed (want a float or int dtype)", fn, dt)
	}
	if len(out)%dt.Size() != 0 {
		return errs.New(errs.Input, "exact.%s: out has %d bytes, not a whole number of %v elements", fn, len(out), dt)
	}
	for i, p := range parts {
		if len(p) != len(out) {
			return errs.New(errs.Input, "exact.%s: part %d has %d bytes, out has %d (%v)", fn, i, len(p), len(out), dt)
		}
	}
	return nil
}

// sumInts sums in int64 (exact for any realistic number of int32 parts: 2^32 of them) and
// wraps; avg > 0 divides first, truncating toward zero as Go's integer division does.
func sumInts(dt numerics.DType, parts [][]byte, out []byte, avg int) {
	size := dt.Size()
	for i := 0; i < len(out); i += size {
		var s int64
		for _, p := range parts {
			if dt == numerics.I8 {
				s += int64(int8(p[i]))
			} else {
				s += int64(int32(binary.LittleEndian.Uint32(p[i:])))
			}
		}
		if avg > 0 {
			s /= int64(avg)
		}
		s = numerics.WrapInt(dt, s)
		if dt == numerics.I8 {
			out[i] = byte(s)
		} else {
			binary.LittleEndian.PutUint32(out[i:], uint32(s))
		}
	}
}

// exactElem is the slow path for element i: the exact sum of its contributions rounded to f
// (dt's own format for Sum, float64's for Avg), as a float64, with the special-value and
// signed-zero rules applied. a is scratch, reset here.
func exactElem(a *accum, dt numerics.DType, parts [][]byte, i int, f format) float64 {
	a.reset()
	var nan, posInf, negInf bool
	allNegZero := len(parts) > 0
	for _, p := range parts {
		v := numerics.Decode(dt, load(dt, p, i))
		switch {
		case v != v:
			nan = true
		case math.IsInf(v, 1):
			posInf = true
		case math.IsInf(v, -1):
			negInf = true
		case v == 0:
			allNegZero = allNegZero && math.Signbit(v)
		default:
			allNegZero = false
			a.add(v)
		}
	}
	switch {
	case nan || posInf && negInf:
		return math.NaN()
	case posInf:
		return math.Inf(1)
	case negInf:
		return math.Inf(-1)
	}
	r, zero := a.round(failpoint.Pick(failpoint.DistExactDoubleRounding, f, f64Format)) // the caller rounds again to dt
	if zero && allNegZero {
		return math.Copysign(0, -1)
	}
	return r
}

// load returns the bit pattern of element i of a part.
func load(dt numerics.DType, p []byte, i int) uint64 {
	switch dt.Size() {
	case 8:
		return binary.LittleEndian.Uint64(p[8*i:])
	case 4:
		return uint64(binary.LittleEndian.Uint32(p[4*i:]))
	case 2:
		return uint64(binary.LittleEndian.Uint16(p[2*i:]))
	}
	return uint64(p[i])
}
