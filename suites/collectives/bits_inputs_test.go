package collectives_test

import (
	"math"

	"github.com/tessera-qa/tessera-qa/collectives/bitref"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

// Inputs of the bitwise specs (bits_test.go). A family draws, for element i, the n ranks'
// values together (some families build values that cancel across ranks), as bit patterns of
// the dtype; everything is a pure function of (family, dtype, n, i), so a failure repeats.

type family struct {
	name string
	// elem fills v (one value per rank) for element i of dtype dt.
	elem func(dt numerics.DType, i int, v []uint64)
}

// families are the input kinds of the small-count specs; "spread" is also the large-count one.
var families = []family{
	{"spread", spreadElem},          // finite values whose order of addition shows in the bits
	{"specials", specialsElem},      // ±0, ±Inf, NaNs with payloads, subnormals, ±max among spread values
	{"zeros", zerosElem},            // ±0 and the odd ±smallest subnormal: signs of zeros in sums, max, min
	{"overflow", overflowElem},      // values near the largest finite: sums past the range
	{"exact-edges", exactEdgesElem}, // cancellation to 0 or a tiny remainder, subnormal totals, double-rounding bait, fast-path spans
}

func hash(dt numerics.DType, i, r int, salt uint64) uint64 {
	z := uint64(dt)<<56 ^ uint64(i)*0x9e3779b97f4a7c15 ^ uint64(r)<<40 ^ salt
	z += 0x9e3779b97f4a7c15
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

// pbits is the significand width (hidden bit included), minExp the exponent of the smallest
// normal and maxExp that of the largest finite binade of each float dtype.
var pbits = [...]int{numerics.F64: 53, numerics.F32: 24, numerics.F16: 11, numerics.BF16: 8, numerics.F8E4M3: 4, numerics.F8E5M2: 3}
var minExp = [...]int{numerics.F64: -1022, numerics.F32: -126, numerics.F16: -14, numerics.BF16: -126, numerics.F8E4M3: -6, numerics.F8E5M2: -14}

// val is ±(1+m)·2^e with m random on the dtype's stored bits: exact in dt.
func val(dt numerics.DType, h uint64, e int) uint64 {
	p := pbits[dt]
	m := float64(h>>11&(1<<(p-1)-1)) / float64(uint64(1)<<(p-1))
	x := math.Ldexp(1+m, e)
	if h&1 != 0 {
		x = -x
	}
	return enc(dt, x)
}

func enc(dt numerics.DType, x float64) uint64 {
	if dt == numerics.F64 {
		return math.Float64bits(x)
	}
	return numerics.Encode(dt, x)
}

// spreadRange is the exponent range of spread values: wide enough that additions round
// differently in another order, narrow enough that no sum overflows.
func spreadRange(dt numerics.DType) (lo, hi int) {
	switch dt {
	case numerics.F8E4M3:
		return -3, 3
	case numerics.F8E5M2:
		return -6, 6
	case numerics.F16:
		return -8, 8
	}
	return -12, 12
}

func spreadOne(dt numerics.DType, h uint64) uint64 {
	if dt.IsInt() { // the full width: int8 and int32 sums wrap
		return h >> 8
	}
	lo, hi := spreadRange(dt)
	return val(dt, h, lo+int(h>>40%uint64(hi-lo+1)))
}

func spreadElem(dt numerics.DType, i int, v []uint64) {
	for r := range v {
		v[r] = spreadOne(dt, hash(dt, i, r, 1))
	}
}

// specialValues lists the special patterns of dt: zeros, infinities (where the format has
// them), NaNs with several payloads and signs, the smallest subnormal, the largest finite.
func specialValues(dt numerics.DType) []uint64 {
	if dt.IsInt() {
		if dt == numerics.I8 {
			return []uint64{0, 0x7f, 0x80, 0xff, 1}
		}
		return []uint64{0, 0x7fffffff, 0x80000000, 0xffffffff, 1}
	}
	sz := uint(dt.Size() * 8)
	sign := uint64(1) << (sz - 1)
	out := []uint64{0, sign, 1, sign | 1, enc(dt, numerics.MaxFinite(dt)), enc(dt, -numerics.MaxFinite(dt))}
	if inf := enc(dt, math.Inf(1)); !isNaNOf(dt, inf) && numerics.Decode(dt, inf) != numerics.MaxFinite(dt) {
		out = append(out, inf, inf|sign)
	}
	// NaNs: the canonical one, the all-ones pattern (negative, every payload bit set) and,
	// where the format has room, a quiet NaN with a low payload bit and its negative.
	out = append(out, numerics.Encode(dt, math.NaN()), 1<<sz-1)
	switch dt {
	case numerics.F64:
		out = append(out, 0x7ff8000000000123, 0xfff0000000000001)
	case numerics.F32:
		out = append(out, 0x7fc00123, 0xff800001)
	case numerics.F16:
		out = append(out, 0x7e01, 0xfc01)
	case numerics.BF16:
		out = append(out, 0x7fc1, 0xff81)
	case numerics.F8E5M2:
		out = append(out, 0x7d, 0xfe)
	}
	return out
}

func isNaNOf(dt numerics.DType, b uint64) bool { return numerics.IsNaNBits(dt, b) }

func specialsElem(dt numerics.DType, i int, v []uint64) {
	sp := specialValues(dt)
	for r := range v {
		h := hash(dt, i, r, 2)
		if h%3 == 0 {
			v[r] = sp[h>>8%uint64(len(sp))]
		} else {
			v[r] = spreadOne(dt, h)
		}
	}
}

func zerosElem(dt numerics.DType, i int, v []uint64) {
	if dt.IsInt() {
		spreadElem(dt, i, v)
		return
	}
	sign := uint64(1) << (dt.Size()*8 - 1)
	for r := range v {
		h := hash(dt, i, r, 3)
		v[r] = 0
		if h&1 != 0 {
			v[r] = sign
		}
		if h%16 == 0 {
			v[r] |= 1 // ±smallest subnormal
		}
	}
}

func overflowElem(dt numerics.DType, i int, v []uint64) {
	if dt.IsInt() {
		specialsElem(dt, i, v)
		return
	}
	mx := numerics.MaxFinite(dt)
	for r := range v {
		h := hash(dt, i, r, 4)
		x := mx * (0.5 + float64(h>>12%1024)/2048)
		if h%5 == 0 {
			x = -x
		}
		v[r] = enc(dt, x)
	}
}

// exactEdgesElem builds, by i mod 6, elements at exact mode's edges. The values sit on
// ranks chosen by i, so each shape meets every position in the global order.
func exactEdgesElem(dt numerics.DType, i int, v []uint64) {
	if dt.IsInt() {
		spreadElem(dt, i, v)
		return
	}
	n := len(v)
	for r := range v {
		v[r] = 0
	}
	h := hash(dt, i, 0, 5)
	p := pbits[dt]
	at := func(k int) *uint64 { return &v[(k+i/6)%n] }
	neg := 1.0
	if h&2 != 0 {
		neg = -1
	}
	switch i % 6 {
	case 0: // cancels to exactly zero: small integers times 2^e, the last the negated total
		var sum float64
		for k := 0; k < n-1; k++ {
			x := float64(int64(hash(dt, i, k, 6)%7) - 3)
			*at(k) = enc(dt, x)
			sum += x
		}
		*at(n - 1) = enc(dt, -sum)
	case 1: // a tiny remainder: B, -B and t far below B's ulp; in order, B + t is B
		b := math.Ldexp(neg*(1+float64(h>>20%8)/8), 2)
		*at(0) = enc(dt, b)
		*at(1 % n) = enc(dt, math.Ldexp(neg, minExp[dt]+1))
		if n > 2 {
			*at(2) = enc(dt, -b)
		}
	case 2: // double-rounding bait: 1 + half an ulp + a tiny value above (or below) it
		*at(0) = enc(dt, neg*(1+math.Ldexp(float64(h>>20%4), 1-p)))
		*at(1 % n) = enc(dt, neg*math.Ldexp(1, -p))
		if n > 2 {
			t := math.Ldexp(1, minExp[dt])
			if h&4 != 0 {
				t = -t
			}
			*at(2) = enc(dt, neg*t)
		}
	case 3: // a subnormal total: 1.5 and -1 times the smallest normal
		m := math.Ldexp(1, minExp[dt])
		*at(0) = enc(dt, neg*1.5*m)
		*at(1 % n) = enc(dt, -neg*m)
	case 4: // a near-zero result whose sign is the small side's: B and -(B + ulp)
		b := math.Ldexp(1+float64(h>>20%8)/8, 3)
		*at(0) = enc(dt, neg*b)
		*at(1 % n) = enc(dt, -neg*(b+math.Ldexp(1, 3-(p-1))))
	case 5: // an exponent span swept across exact's fast-path limit: one large value, the
		// rest d binades below it with full significands, d = 0, 1, 2, ... by element
		lo, top := minExp[dt], int(math.Floor(math.Log2(numerics.MaxFinite(dt))))-4
		e := min(top, lo+p+70)
		d := (i / 6) % (e - lo + 1)
		*at(0) = val(dt, hash(dt, i, 7, 7), e)
		for k := 1; k < n; k++ {
			*at(k) = val(dt, hash(dt, i, k, 8), e-d)
		}
	}
}

// fill writes the family's values for elements [0, count) into one buffer per rank.
func fill(f family, dt numerics.DType, n, count int) [][]byte {
	sz := dt.Size()
	bufs := make([][]byte, n)
	for r := range bufs {
		bufs[r] = make([]byte, count*sz)
	}
	v := make([]uint64, n)
	for i := 0; i < count; i++ {
		f.elem(dt, i, v)
		for r := range bufs {
			bitref.SetBits(bufs[r], i, sz, v[r])
		}
	}
	return bufs
}
