package exact

import (
	"math"
	"math/bits"
)

// The slow path: an exact fixed-point accumulator.
//
// Every finite float64 (so every value of every float dtype) is an integer multiple of
// 2^-1074, the smallest float64 subnormal, and below 2^1024 in magnitude, so it is an integer
// of at most 2098 bits in units of 2^-1074. accum keeps the sum of the positive and of the
// negative contributions apart as two unsigned integers of 34 64-bit limbs (2176 bits: room
// for 2^78 contributions of the largest magnitude). Adding a value touches the two limbs its
// 53-bit significand straddles, plus a carry that is rare and only ever moves upwards; there
// is no borrow because nothing is subtracted until the end, when the smaller magnitude is
// taken from the larger once. lo and hi bound the limbs that may be non-zero, so clearing and
// the final comparison cost the span of the contributions, not all 34 limbs.

const (
	limbs   = 34
	unitExp = -1074 // the accumulator counts units of 2^unitExp
)

type accum struct {
	mag    [2][limbs]uint64 // [0]: positive contributions, [1]: negative, by the sign bit
	lo, hi int              // limbs outside [lo, hi] are zero in both; lo > hi when empty
}

func (a *accum) reset() {
	if a.lo <= a.hi {
		clear(a.mag[0][a.lo : a.hi+1])
		clear(a.mag[1][a.lo : a.hi+1])
	}
	a.lo, a.hi = limbs, -1
}

// add adds a finite, non-zero float64 exactly.
func (a *accum) add(v float64) {
	b := math.Float64bits(v)
	e := uint(b>>52) & 0x7FF
	m := b & (1<<52 - 1)
	if e == 0 {
		e = 1 // subnormal: same scale as the smallest normal binade, no hidden bit
	} else {
		m |= 1 << 52
	}
	// v = m * 2^(e-1075) = m << (e-1) units of 2^-1074.
	sh := e - 1
	k, off := int(sh>>6), sh&63
	lo, hi := m<<off, m>>(64-off) // off == 0: m>>64 is 0 in Go
	acc := &a.mag[b>>63]          // no branch on the sign, which random data makes unpredictable
	var c uint64
	acc[k], c = bits.Add64(acc[k], lo, 0)
	acc[k+1], c = bits.Add64(acc[k+1], hi, c)
	j := k + 1
	for c != 0 {
		j++
		acc[j], c = bits.Add64(acc[j], 0, c)
	}
	a.lo = min(a.lo, k)
	a.hi = max(a.hi, j)
}

// round returns the exact sum rounded to nearest even to a binary format of precision f.p
// whose smallest subnormal is 2^f.uMin, with an unbounded exponent above: a result beyond the
// dtype's range comes back as the finite (or, past float64, infinite) value that the rounding
// gives, and numerics.Encode then applies the dtype's own overflow rule (Inf for IEEE types,
// saturation for fp8), exactly as it would to the exact sum. The result is exactly
// representable in float64 whenever it is finite. zero reports an exact sum of zero (the
// caller decides the sign of that zero); r is +0 then.
func (a *accum) round(f format) (r float64, zero bool) {
	if a.lo > a.hi {
		return 0, true
	}
	// Sign: compare the magnitudes from the top limb down.
	big, small, neg := &a.mag[0], &a.mag[1], false
	for i := a.hi; i >= a.lo; i-- {
		if big[i] != small[i] {
			if small[i] > big[i] {
				big, small, neg = small, big, true
			}
			break
		}
	}
	// big -= small in place over the touched limbs (reset clears them); the borrow cannot
	// leave the range because big >= small.
	d := big
	var bw uint64
	top := -1
	for i := a.lo; i <= a.hi; i++ {
		d[i], bw = bits.Sub64(big[i], small[i], bw)
		if d[i] != 0 {
			top = i
		}
	}
	if top < 0 {
		return 0, true
	}
	msb := top*64 + 63 - bits.LeadingZeros64(d[top]) // bit index of the leading one
	// The result's ulp: p bits below the leading one, but never below the subnormal ulp.
	ulp := max(msb+unitExp-(f.p-1), f.uMin)
	s := ulp - unitExp // >= 0 since uMin >= unitExp
	m := extract(d, s) // the bits kept: msb - s < p <= 53, so they fit
	if s > 0 {
		g := s - 1 // guard bit index
		guard := d[g>>6]>>(g&63)&1 != 0
		sticky := d[g>>6]&(1<<(g&63)-1) != 0
		for i := a.lo; i < g>>6 && !sticky; i++ {
			sticky = d[i] != 0
		}
		if guard && (sticky || m&1 != 0) {
			m++ // may reach 2^p: still exact, the next binade's smallest value
		}
	}
	if f.p == 53 {
		// float64 itself: the biased exponent field minus one, shifted, plus the significand
		// (hidden bit included) is the pattern; a carry out of the significand moves into the
		// exponent, a subnormal (ulp -1074, m < 2^52) has field 0, and a field of 2047 or more
		// is float64's own overflow, ±Inf.
		u := uint64(ulp+1074)<<52 + m
		r = math.Float64frombits(min(u, 0x7FF0000000000000))
	} else {
		// Narrower formats: m < 2^25 and 2^ulp (ulp >= -149) are normal float64s, so the
		// product is exact; so is any overflowed result of a sum of narrow values.
		r = float64(m) * math.Float64frombits(uint64(ulp+1023)<<52)
	}
	if neg {
		r = -r
	}
	return r, false
}

// extract returns bits [s, s+64) of d.
func extract(d *[limbs]uint64, s int) uint64 {
	k, off := s>>6, uint(s&63)
	m := d[k] >> off
	if off != 0 && k+1 < limbs {
		m |= d[k+1] << (64 - off)
	}
	return m
}
