package dist

import (
	"math"
	"unsafe"

	"github.com/tessera-qa/tessera-qa/engine/dist/exact"
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/failpoint"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

// reduce folds ins (every contribution to one chunk, already in the order the mode wants) into
// out, element by element. This is the only place a collective does arithmetic, so it is the
// only place the determinism contract can be broken.
//
// Deterministic and fast modes accumulate in f64 for f64, in f32 for every narrower float
// (each value decodes exactly to f32; adds round to nearest even in f32, in the given order;
// the result is rounded once to the dtype) and in int64 for ints (wrapped to the dtype at the
// end, which equals wrapping at every add). These are the operations a GPU reduction kernel
// performs with add.rn.f32, so a device transport can reproduce the bits. A NaN result is the
// dtype's canonical NaN whatever payload the inputs carried.
//
// Max and min use IEEE's total order for zeros (+0 > -0) and return the canonical NaN when any
// contribution is NaN, so they are independent of order in every mode. Exact mode's sum and
// avg are package exact's.
func reduce(mode Mode, dt numerics.DType, op RedOp, ins [][]byte, out []byte) error {
	if len(ins) == 0 {
		return errs.New(errs.Internal, "reduce: no contributions")
	}
	if mode == Exact && (op == Sum || op == Avg) {
		if op == Sum {
			return exact.Sum(dt, ins, out)
		}
		return exact.Avg(dt, ins, out, len(ins))
	}
	if op == Max || op == Min {
		minMax(dt, op == Max, ins, out)
		return nil
	}
	avg := op == Avg
	switch {
	case dt == numerics.F64:
		sumF64(f64s(out), f64ins(ins), avg)
	case dt == numerics.F32:
		sumF32(f32s(out), f32ins(ins), avg)
	case dt.IsFloat():
		sumNarrow(dt, ins, out, avg)
	case dt.IsInt():
		sumInt(dt, ins, out, avg)
	default:
		return errs.New(errs.DType, "reduce: cannot %s %s", op, dt)
	}
	return nil
}

// Views of little-endian buffers as typed slices: the engine only runs on little-endian hosts
// (tensor bytes are defined little-endian), and Go's allocator aligns byte slices for these.
func f32s(b []byte) []float32 {
	if len(b) == 0 {
		return nil
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(&b[0])), len(b)/4)
}

func f64s(b []byte) []float64 {
	if len(b) == 0 {
		return nil
	}
	return unsafe.Slice((*float64)(unsafe.Pointer(&b[0])), len(b)/8)
}

func f32ins(ins [][]byte) [][]float32 {
	v := make([][]float32, len(ins))
	for i, b := range ins {
		v[i] = f32s(b)
	}
	return v
}

func f64ins(ins [][]byte) [][]float64 {
	v := make([][]float64, len(ins))
	for i, b := range ins {
		v[i] = f64s(b)
	}
	return v
}

// sumF32 adds each element's contributions in rank order. It works a block of sumBlock
// elements at a time: the block's accumulators stay in L1 while the contributions before the
// last are added to them in order, and the last pass adds the last contribution, finishes
// (avg, canonical NaN) and writes out, so out is written once and each input read once (with
// two contributions, one loop out = a + b). Every element sees the same additions in the same
// order as the element-by-element loop, so the bits are that loop's. Reading a block of every
// input before writing that block of out keeps an in-place call right (out is one of the
// contributions), and any output that starts at or before an overlapping input (the element
// loop's own condition: it too reads input i before it writes out[i]).
func sumF32(out []float32, ins [][]float32, avg bool) {
	nan := math.Float32frombits(uint32(numerics.Encode(numerics.F32, math.NaN())))
	keepNaN := failpoint.Enabled(failpoint.DistNaNPayloadKept)
	var buf [sumBlock]float32
	sumBlocks(out, ins, avg, buf[:], nan, keepNaN)
}

// sumF64 is sumF32 in f64.
func sumF64(out []float64, ins [][]float64, avg bool) {
	var buf [sumBlock]float64
	sumBlocks(out, ins, avg, buf[:], math.NaN(), false)
}

// sumBlock elements of accumulators (4 or 8 KiB) fit in L1 beside a block of two inputs.
const sumBlock = 1024

func sumBlocks[T float32 | float64](out []T, ins [][]T, avg bool, buf []T, nan T, keepNaN bool) {
	k := len(ins)
	for lo := 0; lo < len(out); lo += sumBlock {
		hi := min(lo+sumBlock, len(out))
		dst := out[lo:hi]
		if k == 1 {
			finishInto(dst, ins[0][lo:hi], nil, avg, T(k), nan, keepNaN)
			continue
		}
		acc := ins[0][lo:hi]
		if k > 2 {
			acc = buf[:hi-lo]
			addInto(acc, ins[0][lo:hi], ins[1][lo:hi])
			for _, in := range ins[2 : k-1] {
				addInto(acc, acc, in[lo:hi])
			}
		}
		finishInto(dst, acc, ins[k-1][lo:hi], avg, T(k), nan, keepNaN)
	}
}

// addInto sets acc[i] = a[i] + b[i] (acc may be a).
func addInto[T float32 | float64](acc, a, b []T) {
	a, b = a[:len(acc)], b[:len(acc)]
	v, _ := vecAdd(acc, a, b)
	for i := v; i < len(acc); i++ {
		acc[i] = a[i] + b[i]
	}
}

// finishInto sets dst[i] = acc[i] + last[i] (acc[i] alone when last is nil), divided by n for
// avg, a NaN replaced by the canonical nan unless keepNaN (the planted fault). The sum goes
// through the vector loop (vecAdd: the same IEEE adds, so the same bits), which also says
// whether a NaN came out, so the NaN rule costs a pass only over a block that has one; then
// four elements a step, with one test for a NaN among them: the loop's overhead, not the adds,
// bounded the element-at-a-time form on this machine.
func finishInto[T float32 | float64](dst, acc, last []T, avg bool, n, nan T, keepNaN bool) {
	acc = acc[:len(dst)]
	if last == nil || avg {
		for i := range dst {
			v := acc[i]
			if last != nil {
				v += last[i]
			}
			if avg {
				v /= n
			}
			if v != v && !keepNaN {
				v = nan
			}
			dst[i] = v
		}
		return
	}
	last = last[:len(dst)]
	i, nanSeen := vecAdd(dst, acc, last)
	if nanSeen && !keepNaN {
		for j := range dst[:i] {
			dst[j] = canon(dst[j], nan)
		}
	}
	for ; i+4 <= len(dst); i += 4 {
		v0, v1, v2, v3 := acc[i]+last[i], acc[i+1]+last[i+1], acc[i+2]+last[i+2], acc[i+3]+last[i+3]
		if (v0 != v0 || v1 != v1 || v2 != v2 || v3 != v3) && !keepNaN {
			v0, v1, v2, v3 = canon(v0, nan), canon(v1, nan), canon(v2, nan), canon(v3, nan)
		}
		dst[i], dst[i+1], dst[i+2], dst[i+3] = v0, v1, v2, v3
	}
	for ; i < len(dst); i++ {
		v := acc[i] + last[i]
		if v != v && !keepNaN {
			v = nan
		}
		dst[i] = v
	}
}

func canon[T float32 | float64](v, nan T) T {
	if v != v {
		return nan
	}
	return v
}

// sumNarrow adds 16- and 8-bit floats in f32, in order, and rounds once.
func sumNarrow(dt numerics.DType, ins [][]byte, out []byte, avg bool) {
	sz := dt.Size()
	n := float32(len(ins))
	count := len(out) / sz
	for i := 0; i < count; i++ {
		acc := float32(numerics.Decode(dt, load(ins[0], i, sz)))
		for _, in := range ins[1:] {
			acc += float32(numerics.Decode(dt, load(in, i, sz)))
			acc = failpoint.Apply(failpoint.DistNarrowAccumInDType, acc, func(a float32) float32 { return float32(numerics.Round(dt, float64(a))) })
		}
		if avg {
			acc /= n
		}
		store(out, i, sz, numerics.Encode(dt, float64(acc)))
	}
}

func sumInt(dt numerics.DType, ins [][]byte, out []byte, avg bool) {
	sz := dt.Size()
	n := int64(len(ins))
	count := len(out) / sz
	for i := 0; i < count; i++ {
		var acc int64
		for _, in := range ins {
			acc += int64(numerics.Decode(dt, load(in, i, sz)))
		}
		if avg {
			acc /= n // truncates toward zero, like integer division on the device
		}
		store(out, i, sz, uint64(numerics.WrapInt(dt, acc)))
	}
}

func load(b []byte, i, sz int) uint64 {
	switch sz {
	case 1:
		return uint64(b[i])
	case 2:
		return uint64(b[2*i]) | uint64(b[2*i+1])<<8
	case 4:
		p := b[4*i : 4*i+4]
		return uint64(p[0]) | uint64(p[1])<<8 | uint64(p[2])<<16 | uint64(p[3])<<24
	}
	p := b[8*i : 8*i+8]
	return uint64(p[0]) | uint64(p[1])<<8 | uint64(p[2])<<16 | uint64(p[3])<<24 |
		uint64(p[4])<<32 | uint64(p[5])<<40 | uint64(p[6])<<48 | uint64(p[7])<<56
}

func store(b []byte, i, sz int, v uint64) {
	for k := 0; k < sz; k++ {
		b[sz*i+k] = byte(v >> (8 * k))
	}
}

// minMax keeps, per element, the largest (or smallest) contribution in the total order where
// -0 < +0; any NaN makes the result the canonical NaN.
func minMax(dt numerics.DType, isMax bool, ins [][]byte, out []byte) {
	sz := dt.Size()
	count := len(out) / sz
	nan := numerics.Encode(dt, math.NaN())
	for i := 0; i < count; i++ {
		best := load(ins[0], i, sz)
		isNaN := dt.IsFloat() && numerics.IsNaNBits(dt, best)
		bk := numerics.Ordered(dt, best)
		for _, in := range ins[1:] {
			v := load(in, i, sz)
			if dt.IsFloat() && numerics.IsNaNBits(dt, v) {
				isNaN = true
				continue
			}
			k := numerics.Ordered(dt, v)
			if k == bk && dt.IsFloat() && !failpoint.Enabled(failpoint.DistMaxZeroSignIgnored) && math.Signbit(numerics.Decode(dt, best)) != math.Signbit(numerics.Decode(dt, v)) {
				// -0 and +0 share one step in Ordered; break the tie by sign.
				if math.Signbit(numerics.Decode(dt, v)) != isMax {
					best = v
				}
				continue
			}
			if (isMax && k > bk) || (!isMax && k < bk) {
				best, bk = v, k
			}
		}
		if isNaN {
			best = nan
		}
		store(out, i, sz, best)
	}
}
