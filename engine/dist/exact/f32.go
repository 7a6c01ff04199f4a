package exact

import (
	"encoding/binary"
	"math"
	"unsafe"
)

// The f32 kernel: the fast path for the dtype the communicator's exact mode is built for.
//
// The check works on bit patterns: with E the 8-bit exponent field, |v| < 2^(E-126)
// (subnormals: E = 0), and the lowest set bit is at or above 2^(key-150) where
// key = (mag-1)>>23 is E, or E-1 for an exact power of two (conservative), 0 for subnormals
// and 511 for zeros, so zeros never lower the bound. The check high + L - low <= 53 (see
// fast.go) becomes maxE - minKey <= 29 - L. The kernel keeps the largest magnitude and the
// smallest magnitude-minus-one (unsigned) per element and shifts only once at the end:
// two integer min/max per value.
//
// The kernel reads the parts through []float32 and []uint32 views of their bytes (the
// engine runs on little-endian hosts only, as engine/dist's reduce does; on any other host
// sumFloats sends f32 through the generic checked path instead), so that a value is loaded
// once as a float and once as an integer with no conversion between register files.
//
// Parts go four at a time. A part count that is not a multiple of four is padded with blocks
// of -0, the identity of float64 addition (-0 + x == x for every x, -0 included) and of the
// check (magnitude 0, magnitude-1 = MaxUint32), while L comes from the real count. With more
// than four parts the first groups accumulate into the scratch arrays and the last group is
// fused with the check, the rounding and the store, so four parts make one pass over memory.
// Elements that fail the check are not stored by that pass; their indices go to scratch.bad
// and exactElem computes them afterwards from the parts, which are still intact even when
// out aliases a part, because only the elements that passed were written.

const f32Span = 29 // 53 - 24 (the f32 significand)

func f32Lim(nparts int) int32 { return f32Span - int32(ceilLog2(nparts)) }

// f32Fails is the check on the largest magnitude hi and the smallest magnitude-1 lo.
func f32Fails(hi, lo uint32, lim int32) bool { return int32(hi>>23)-int32(lo>>23) > lim }

// f32View and u32View see the first n elements of b (which holds at least n) as float32
// and uint32. Unaligned views are fine on the hosts the engine runs on and for checkptr,
// these element types holding no pointers.
func f32View(b []byte, n int) []float32 {
	if n == 0 {
		return nil
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(&b[:4*n][0])), n)
}

func u32View(b []byte, n int) []uint32 {
	if n == 0 {
		return nil
	}
	return unsafe.Slice((*uint32)(unsafe.Pointer(&b[:4*n][0])), n)
}

// negZeroBlock is one block of f32 -0, the padding part.
var negZeroBlock = func() []byte {
	b := make([]byte, 4*block)
	for i := 3; i < len(b); i += 4 {
		b[i] = 0x80
	}
	return b
}()

func sumF32(sc *scratch, parts [][]byte, out []byte, f *finisher) {
	lim := f32Lim(len(parts))
	nan := uint32(f.nan)
	for base := 0; base < len(out)/4; base += block {
		m := min(block, len(out)/4-base)
		b0 := 4 * base
		nb := sc.f32Block(parts, base, m, out[b0:b0+4*m], lim, f.div, nan)
		for _, i := range sc.bad[:nb] {
			s := exactElem(f.a, f.dt, f.parts, base+int(i), f.tgt)
			binary.LittleEndian.PutUint32(out[b0+4*int(i):], f32Round(s, f.div, nan))
		}
	}
}

// f32Block sums elements [base, base+m) into out (which holds just those), except those
// that fail the check: it returns how many, listed in sc.bad.
func (sc *scratch) f32Block(parts [][]byte, base, m int, out []byte, lim int32, div float64, nan uint32) int {
	b0, b1 := 4*base, 4*(base+m)
	var g [4][]byte
	groups := (len(parts) + 3) / 4
	for grp := range groups {
		for j := range g {
			if k := 4*grp + j; k < len(parts) {
				g[j] = parts[k][b0:b1]
			} else {
				g[j] = negZeroBlock[:b1-b0]
			}
		}
		if grp < groups-1 {
			sc.f32Acc4(grp == 0, m, g[0], g[1], g[2], g[3])
		}
	}
	return sc.f32Last4(groups > 1, m, g[0], g[1], g[2], g[3], out, lim, div, nan)
}

// f32Acc4 adds four parts into the scratch arrays (first: sets them).
func (sc *scratch) f32Acc4(first bool, m int, p, q, r, s []byte) {
	acc, hi, lo := sc.acc[:m], sc.hi[:m], sc.lo[:m]
	pf, qf, rf, sf := f32View(p, m)[:len(acc)], f32View(q, m)[:len(acc)], f32View(r, m)[:len(acc)], f32View(s, m)[:len(acc)]
	pu, qu, ru, su := u32View(p, m)[:len(acc)], u32View(q, m)[:len(acc)], u32View(r, m)[:len(acc)], u32View(s, m)[:len(acc)]
	for j := range acc {
		sum := float64(pf[j]) + float64(qf[j]) + float64(rf[j]) + float64(sf[j])
		a, b, c, d := pu[j]&^(1<<31), qu[j]&^(1<<31), ru[j]&^(1<<31), su[j]&^(1<<31)
		h, l := max(a, b, c, d), min(a-1, b-1, c-1, d-1)
		if !first {
			sum += acc[j]
			h, l = max(h, hi[j]), min(l, lo[j])
		}
		acc[j], hi[j], lo[j] = sum, h, l
	}
}

// f32Last4 adds the last four parts (to the scratch arrays if more), checks, rounds and
// stores; it returns the number of elements that failed, listed in sc.bad. The two loops
// differ only in reading the scratch arrays: one loop with a flag spills registers.
func (sc *scratch) f32Last4(more bool, m int, p, q, r, s, out []byte, lim int32, div float64, nan uint32) int {
	o := u32View(out, m)
	// Slicing every view to len(o) once lets the compiler drop the bounds checks in the loops.
	pf, qf, rf, sf := f32View(p, m)[:len(o)], f32View(q, m)[:len(o)], f32View(r, m)[:len(o)], f32View(s, m)[:len(o)]
	pu, qu, ru, su := u32View(p, m)[:len(o)], u32View(q, m)[:len(o)], u32View(r, m)[:len(o)], u32View(s, m)[:len(o)]
	nb := 0
	if more {
		acc, hi, lo := sc.acc[:len(o)], sc.hi[:len(o)], sc.lo[:len(o)]
		for j := range o {
			sum := acc[j] + float64(pf[j]) + float64(qf[j]) + float64(rf[j]) + float64(sf[j])
			a, b, c, d := pu[j]&^(1<<31), qu[j]&^(1<<31), ru[j]&^(1<<31), su[j]&^(1<<31)
			h, l := max(hi[j], a, b, c, d), min(lo[j], a-1, b-1, c-1, d-1)
			if f32Fails(h, l, lim) {
				sc.bad[nb] = uint16(j)
				nb++
				continue
			}
			o[j] = f32Round(sum, div, nan)
		}
		return nb
	}
	for j := range o {
		sum := float64(pf[j]) + float64(qf[j]) + float64(rf[j]) + float64(sf[j])
		a, b, c, d := pu[j]&^(1<<31), qu[j]&^(1<<31), ru[j]&^(1<<31), su[j]&^(1<<31)
		h, l := max(a, b, c, d), min(a-1, b-1, c-1, d-1)
		if f32Fails(h, l, lim) {
			sc.bad[nb] = uint16(j)
			nb++
			continue
		}
		o[j] = f32Round(sum, div, nan)
	}
	return nb
}

// f32Round divides by div (Avg) unless it is 0 (Sum), rounds to f32 and canonicalizes NaN.
func f32Round(sum, div float64, nan uint32) uint32 {
	if div != 0 {
		sum /= div
	}
	u := math.Float32bits(float32(sum)) // Go converts with IEEE round to nearest even
	if sum != sum {
		u = nan
	}
	return u
}
