package exact

import (
	"encoding/binary"
	"math"
	"math/bits"
	"unsafe"

	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

// The fast path. Every value of every float dtype is exact in float64, so when float64 can
// hold every partial sum of an element exactly, adding the contributions in float64 in any
// order gives the exact sum, and one numerics.Encode (float32() for f32) is the single
// correct rounding. Float64 can hold them when the span from the highest bit a partial sum
// can reach down to the lowest bit any contribution has set is at most 53 bits: each value
// is a multiple of 2^low with |v| < 2^high, so a partial sum of k <= n of them is K * 2^low
// with |K| < n * 2^(high-low) <= 2^(high + ceilLog2(n) - low).
//
// The work goes in blocks of `block` elements, part by part (so the inner loops are tight
// and stay in L1): a phase function accumulates the float64 sums and, per dtype, what the
// check needs; then the finisher rounds and stores the block, computing the elements that
// fail their check with exactElem. f32, the dtype whose speed matters, has its own kernel in
// f32.go, with four parts per pass and the last pass fused with the store.
//
// ±Inf and NaN need no room: IEEE addition gives NaN for any NaN or for +Inf + -Inf and the
// infinity otherwise, which are Sum's rules, provided no finite partial sum overflows. For
// f32, bf16, f16 and fp8 data no float64 partial sum can overflow, so an element whose check
// passes with specials in it is still right; f64 elements with specials take the slow path.

const block = 256

// nativeLE: the host is little-endian, so the f32 kernel and the f64 phase read the parts
// through typed views (engine/dist's reduce does the same; the engine's storage is
// little-endian). Elsewhere, and in TestPortablePath, they take the portable path.
var nativeLE = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

type scratch struct {
	acc    [block]float64
	hi, lo [block]uint32 // per element: what the phase function tracks for the check
	bad    [block]uint16 // f32: the elements of a block that failed the check
	a      accum
}

// A phase function fills acc with the float64 sums of a block and hi, lo with what the
// element's check needs, in a form that check reads as
//
//	int32(hi>>shift) - int32(lo>>shift) > lim  =>  the element takes the slow path.
type check struct {
	shift uint
	lim   int32
}

// sumFloats is Sum (avg == 0) or Avg (avg = n) for float dtypes on validated arguments.
func sumFloats(dt numerics.DType, parts [][]byte, out []byte, avg int) {
	size := dt.Size()
	n := len(out) / size
	if len(parts) == 0 {
		clear(out) // +0 in every format; +0 / n too
		return
	}
	sc := new(scratch)
	sc.a.reset()
	L := int32(ceilLog2(len(parts)))
	fin := finisher{dt: dt, parts: parts, tgt: formats[dt], a: &sc.a, nan: numerics.Encode(dt, math.NaN())}
	if avg > 0 {
		fin.tgt = f64Format // Avg rounds the exact sum to float64 first
		fin.div = float64(avg)
	}
	if dt == numerics.F32 && nativeLE {
		sumF32(sc, parts, out, &fin)
		return
	}
	phase, ck := phaseFor(dt, len(parts))
	for base := 0; base < n; base += block {
		m := min(block, n-base)
		phase(sc, dt, parts, base, m, L)
		fin.store(sc, ck, base, out[base*size:(base+m)*size])
	}
}

type phaseFunc func(sc *scratch, dt numerics.DType, parts [][]byte, base, m int, L int32)

// phaseFor picks the phase function and its check for nparts contributions of dt (f32 on a
// little-endian host has its own kernel instead, see f32.go).
func phaseFor(dt numerics.DType, nparts int) (phaseFunc, check) {
	L := int32(ceilLog2(nparts))
	switch {
	case dt == numerics.BF16:
		return (*scratch).phaseBF16, check{7, 45 - L}
	case dt != numerics.F64 && nparts <= fastParts(dt):
		return (*scratch).phaseNarrow, check{}
	}
	return (*scratch).phaseChecked, check{}
}

// fails reports whether element i of the block must take the slow path.
func (ck check) fails(sc *scratch, i int) bool {
	return int32(sc.hi[i]>>ck.shift)-int32(sc.lo[i]>>ck.shift) > ck.lim
}

// phaseBF16 is the f32 check (see f32.go) for the top halves of f32: the same exponent
// field, a 7-bit mantissa, so the lowest set bit is at or above 2^(key-134) and the check is
// maxE - minKey <= 45-L.
func (sc *scratch) phaseBF16(_ numerics.DType, parts [][]byte, base, m int, _ int32) {
	acc, hi, lo := sc.acc[:m], sc.hi[:m], sc.lo[:m]
	negZero := math.Copysign(0, -1)
	for i := range acc {
		acc[i], hi[i], lo[i] = negZero, 0, math.MaxUint32
	}
	for _, q := range parts {
		p := q[2*base : 2*(base+m)]
		for i := range acc {
			if len(p) < 2 {
				break
			}
			u := uint32(binary.LittleEndian.Uint16(p))
			p = p[2:]
			acc[i] += float64(math.Float32frombits(u << 16))
			u &^= 1 << 15
			hi[i] = max(hi[i], u)
			lo[i] = min(lo[i], u-1)
		}
	}
}

// phaseNarrow: f16 and fp8 with at most fastParts(dt) contributions, where the check always
// passes (see fastParts), so there is none.
func (sc *scratch) phaseNarrow(dt numerics.DType, parts [][]byte, base, m int, _ int32) {
	acc := sc.acc[:m]
	clear(sc.hi[:m])
	clear(sc.lo[:m])
	size := dt.Size()
	for k, q := range parts {
		p := q[size*base : size*(base+m)]
		for i := range acc {
			var v float64
			if size == 1 {
				v = numerics.Decode(dt, uint64(p[i]))
			} else {
				v = numerics.Decode(dt, uint64(binary.LittleEndian.Uint16(p[2*i:])))
			}
			if k == 0 {
				acc[i] = v
			} else {
				acc[i] += v
			}
		}
	}
}

// phaseChecked works on the decoded float64 of any dtype: f64, and f16/fp8 beyond
// fastParts (and f32 on a big-endian host). It reads the actual lowest set bit (trailing
// zeros of the significand), because full-precision f64 data leaves no spare bits and an
// exponent-only bound would never pass; f64 data that came from a narrower type, or small
// integers, pass. Per element it keeps the largest `high` (|v| < 2^high) and the smallest
// `low` (v a multiple of 2^low); specials and any partial sum that could reach 2^1024
// (float64 overflow) go to the slow path.
func (sc *scratch) phaseChecked(dt numerics.DType, parts [][]byte, base, m int, L int32) {
	acc := sc.acc[:m]
	var hi, lo [block]int32
	negZero := math.Copysign(0, -1) // -0 + x == x for every x, -0 included
	for i := range acc {
		acc[i], hi[i], lo[i] = negZero, -1<<20, 1<<20
	}
	for _, q := range parts {
		if dt == numerics.F64 && nativeLE { // little-endian: read through a view
			v := unsafe.Slice((*uint64)(unsafe.Pointer(&q[8*base:][0])), m)[:len(acc)]
			for i, u := range v {
				acc[i] += math.Float64frombits(u)
				hi[i], lo[i] = fold(u, hi[i], lo[i])
			}
			continue
		}
		for i := range acc {
			x := numerics.Decode(dt, load(dt, q, base+i))
			acc[i] += x
			hi[i], lo[i] = fold(math.Float64bits(x), hi[i], lo[i])
		}
	}
	for i := range acc {
		sc.hi[i], sc.lo[i] = 0, 0 // the check (shift 0, lim 0) passes
		if hi[i]+L-lo[i] > 53 || hi[i]+L > 1024 {
			sc.hi[i] = 1 // and now fails
		}
	}
}

// fold adds the float64 pattern u to an element's (high, low) bounds.
func fold(u uint64, hi, lo int32) (int32, int32) {
	if u<<1 == 0 {
		return hi, lo // ±0: no bits (the float64 sum gets -0 right on its own)
	}
	e := int32(u>>52) & 0x7FF
	man := u & (1<<52 - 1)
	switch e {
	case 0x7FF:
		return 1 << 20, lo // special: always the slow path
	case 0:
		e = 1
	default:
		man |= 1 << 52
	}
	return max(hi, e-1022), min(lo, e-1075+int32(bits.TrailingZeros64(man)))
}

// finisher rounds a block and writes it. An element that fails its check is computed by
// exactElem right there, before its own output is written, so out may alias a part.
type finisher struct {
	dt    numerics.DType
	parts [][]byte
	tgt   format  // what exactElem rounds to: dt's format for Sum, float64's for Avg
	div   float64 // Avg's count, 0 for Sum
	nan   uint64  // dt's canonical NaN
	a     *accum
}

func (f *finisher) value(sc *scratch, ck check, base, i int) float64 {
	s := sc.acc[i]
	if ck.fails(sc, i) {
		s = exactElem(f.a, f.dt, f.parts, base+i, f.tgt)
	}
	if f.div != 0 {
		s /= f.div
	}
	return s
}

func (f *finisher) store(sc *scratch, ck check, base int, out []byte) {
	switch f.dt {
	case numerics.F32: // only on the portable path: sumF32 is the usual one
		for i := 0; len(out) >= 4; i++ {
			binary.LittleEndian.PutUint32(out, f32Round(f.value(sc, ck, base, i), 0, uint32(f.nan)))
			out = out[4:]
		}
	case numerics.F64:
		for i := 0; len(out) >= 8; i++ {
			s := f.value(sc, ck, base, i)
			u := math.Float64bits(s)
			if s != s {
				u = f.nan
			}
			binary.LittleEndian.PutUint64(out, u)
			out = out[8:]
		}
	case numerics.F16, numerics.BF16:
		for i := 0; len(out) >= 2; i++ {
			binary.LittleEndian.PutUint16(out, uint16(numerics.Encode(f.dt, f.value(sc, ck, base, i))))
			out = out[2:]
		}
	default:
		for i := range out {
			out[i] = byte(numerics.Encode(f.dt, f.value(sc, ck, base, i)))
		}
	}
}
