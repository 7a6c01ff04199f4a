package exact

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"
	"time"
	"unsafe"

	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

// The benchmarks time Sum and plain loops over the same data in the same iteration and
// report ratios (design.md §8: ratios side by side, not absolute times across runs); ns/op
// covers all of them.
//
//   - x-plain: against the deterministic mode's loop, written as engine/dist's reduce writes
//     it: element by element, accumulating in order in the dtype's accumulator (f32 for f32
//     and narrower floats, f64 for f64) through typed views of the buffers, an inner loop over
//     the parts. This is the ratio the communicator's "exact <= 2x deterministic" goal means.
//   - x-unrolled (f32): against the fastest plain loop there is for exactly four parts, the
//     four-way unrolled one: a floor no general reduction reaches, shown for honesty.

const benchParts, benchElems = 4, 1 << 20

func benchData(dt numerics.DType, gen func(r *rand.Rand) float64) [][]byte {
	r := rand.New(rand.NewPCG(7, 8))
	parts := make([][]byte, benchParts)
	for p := range parts {
		parts[p] = make([]byte, benchElems*dt.Size())
		for i := range benchElems {
			put(dt, parts[p], i, numerics.Encode(dt, gen(r)))
		}
	}
	return parts
}

func normal(r *rand.Rand) float64 { return r.NormFloat64() }

// wide mixes magnitudes from 2^-60 to 2^60, so that most f32 elements fail the check.
func wide(r *rand.Rand) float64 { return r.NormFloat64() * math.Ldexp(1, r.IntN(121)-60) }

func f32Views(parts [][]byte) [][]float32 {
	v := make([][]float32, len(parts))
	for i, p := range parts {
		v[i] = f32View(p, len(p)/4)
	}
	return v
}

func f64View(b []byte) []float64 {
	return unsafe.Slice((*float64)(unsafe.Pointer(&b[0])), len(b)/8)
}

// plainF32 is the deterministic mode's f32 sum.
func plainF32(parts [][]byte, out []byte) {
	ins, o := f32Views(parts), f32View(out, len(out)/4)
	for i := range o {
		acc := ins[0][i]
		for _, in := range ins[1:] {
			acc += in[i]
		}
		if acc != acc {
			acc = math.Float32frombits(0x7FC00000)
		}
		o[i] = acc
	}
}

// unrolledF32 is the fastest plain f32 sum of exactly four parts.
func unrolledF32(parts [][]byte, out []byte) {
	o := f32View(out, len(out)/4)
	p, q, r, s := f32View(parts[0], len(o)), f32View(parts[1], len(o)), f32View(parts[2], len(o)), f32View(parts[3], len(o))
	for i := range o {
		o[i] = p[i] + q[i] + r[i] + s[i]
	}
}

// plainF64 is the deterministic mode's f64 sum.
func plainF64(parts [][]byte, out []byte) {
	ins := make([][]float64, len(parts))
	for i, p := range parts {
		ins[i] = f64View(p)
	}
	o := f64View(out)
	for i := range o {
		acc := ins[0][i]
		for _, in := range ins[1:] {
			acc += in[i]
		}
		if acc != acc {
			acc = math.NaN()
		}
		o[i] = acc
	}
}

// plainBF16 is the deterministic mode's bf16 sum: decode, add in f32 in order, round once.
func plainBF16(parts [][]byte, out []byte) {
	for i := 0; i < len(out)/2; i++ {
		acc := float32(numerics.Decode(BF16, uint64(binary.LittleEndian.Uint16(parts[0][2*i:]))))
		for _, p := range parts[1:] {
			acc += float32(numerics.Decode(BF16, uint64(binary.LittleEndian.Uint16(p[2*i:]))))
		}
		binary.LittleEndian.PutUint16(out[2*i:], uint16(numerics.Encode(BF16, float64(acc))))
	}
}

// benchSum reports Sum against each named plain loop, timed in the same iterations.
func benchSum(b *testing.B, dt numerics.DType, parts [][]byte, plains map[string]func([][]byte, []byte)) {
	out := make([]byte, benchElems*dt.Size())
	b.SetBytes(int64(benchParts * len(out)))
	tPlain := map[string]time.Duration{}
	var tExact time.Duration
	iters := 0
	for b.Loop() {
		for name, plain := range plains {
			t0 := time.Now()
			plain(parts, out)
			tPlain[name] += time.Since(t0)
		}
		t0 := time.Now()
		if err := Sum(dt, parts, out); err != nil {
			b.Fatal(err)
		}
		tExact += time.Since(t0)
		iters++
	}
	b.ReportMetric(float64(tExact.Nanoseconds())/float64(iters*benchElems), "ns/elem")
	for name, t := range tPlain {
		b.ReportMetric(float64(tExact)/float64(t), "x-"+name)
	}
}

var (
	f32Plains = map[string]func([][]byte, []byte){"plain": plainF32, "unrolled": unrolledF32}
	f64Plains = map[string]func([][]byte, []byte){"plain": plainF64}
	bf16Plain = map[string]func([][]byte, []byte){"plain": plainBF16}
)

func BenchmarkSumF32(b *testing.B) { benchSum(b, F32, benchData(F32, normal), f32Plains) }

// BenchmarkSumF32Wide: the slow path's cost on data that mostly needs it.
func BenchmarkSumF32Wide(b *testing.B) { benchSum(b, F32, benchData(F32, wide), f32Plains) }

// BenchmarkSumF64: random normal f64 data has no spare bits, so nearly every element takes
// the slow path.
func BenchmarkSumF64(b *testing.B) { benchSum(b, F64, benchData(F64, normal), f64Plains) }

// BenchmarkSumF64Narrow: f64 data that came from f32 (24-bit significands) passes the check.
func BenchmarkSumF64Narrow(b *testing.B) {
	benchSum(b, F64, benchData(F64, func(r *rand.Rand) float64 { return float64(float32(r.NormFloat64())) }), f64Plains)
}

func BenchmarkSumBF16(b *testing.B) { benchSum(b, BF16, benchData(BF16, normal), bf16Plain) }
