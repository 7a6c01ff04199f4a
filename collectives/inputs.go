package collectives

import (
	"crypto/sha256"
	"encoding/binary"
	"math"

	"github.com/tessera-qa/tessera-qa/collectives/bitref"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

// gen draws the inputs of one case. Element i of stream s (a rank's contribution, or one of
// the exact-mode split contributions) is a pure function of (seed, case, s, i), so any rank
// can recompute any other rank's inputs to build the global answer, and the same rank of
// another world size, transport or mode gets the same bits.
//
// Values are never zero and never all alike: floats are ±(1+m)·2^e with e in [-2, 1] and m a
// random fraction the dtype holds exactly (so every value is representable and |v| >= 1/4);
// for f32 and f64 one element in 16 (from the 16th on) is scaled by up to 2^±20, a spread that makes the order
// of additions matter and exercises exact mode. Ints are uniform in ±[1, 100] (int8: sums
// over 8 ranks wrap, which the reference reproduces) or ±[1, 2^20] (int32).
type gen struct {
	dt     numerics.DType
	base   uint64
	mb     uint // stored significand bits of a float dtype
	spread bool // f32, f64: one element in 16 spread over 2^±20
}

// splitStream is the stream of split contribution k (rank streams are 0..n-1).
func splitStream(k int) uint64 { return 1<<32 + uint64(k) }

func newGen(seed uint64, c Case) gen {
	h := sha256.Sum256([]byte("tessera.collectives.inputs.v1|" + c.Name()))
	return gen{dt: c.DType, base: seed ^ binary.LittleEndian.Uint64(h[:8]), mb: mantBits[c.DType],
		spread: c.DType == numerics.F32 || c.DType == numerics.F64}
}

// mix is splitmix64's finalizer.
func mix(z uint64) uint64 {
	z += 0x9e3779b97f4a7c15
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

// pow2[pow2Zero+k] is 2^k for k in [-64, 63].
const pow2Zero = 64

var pow2 = func() (t [128]float64) {
	for k := range t {
		t[k] = math.Ldexp(1, k-pow2Zero)
	}
	return t
}()

// mantBits is the stored significand width of each float dtype.
var mantBits = map[numerics.DType]uint{numerics.F64: 52, numerics.F32: 23, numerics.F16: 10, numerics.BF16: 7,
	numerics.F8E4M3: 3, numerics.F8E5M2: 2}

// bits is element i of stream s, as the dtype's bit pattern.
func (g gen) bits(s uint64, i int) uint64 {
	h := mix(g.base ^ mix(s*0x9e3779b97f4a7c15^uint64(i)))
	switch g.dt {
	case numerics.I8:
		v := int64(h%200) - 100
		if v >= 0 {
			v++
		}
		return uint64(uint8(int8(v)))
	case numerics.I32:
		v := int64(h%(2<<20)) - 1<<20
		if v >= 0 {
			v++
		}
		return uint64(uint32(int32(v)))
	}
	// 1+m with m < 1 on mb bits, times 2^e: exact in every float dtype that stores mb bits.
	frac := 1 + float64(h>>12&(1<<g.mb-1))*pow2[pow2Zero-int(g.mb)]
	e := int(h>>4&3) - 2
	if g.spread && i%16 == 15 {
		e += int((s*13+uint64(i))%40) - 20
	}
	v := frac * pow2[pow2Zero+e]
	if h&1 != 0 {
		v = -v
	}
	switch g.dt {
	case numerics.F64:
		return math.Float64bits(v)
	case numerics.F32:
		return uint64(math.Float32bits(float32(v)))
	}
	return numerics.Encode(g.dt, v)
}

func (g gen) value(s uint64, i int) float64 { return numerics.Decode(g.dt, g.bits(s, i)) }

// fill writes elements [off, off+len(b)/size) of stream s into b.
func (g gen) fill(s uint64, off int, b []byte) {
	sz := g.dt.Size()
	for i := 0; i < len(b)/sz; i++ {
		bitref.SetBits(b, i, sz, g.bits(s, off+i))
	}
}

// poison fills a receive buffer with 0xff bytes (NaN for every float dtype, -1 for ints)
// so an element the collective never wrote shows up as wrong.
func poison(b []byte) {
	for i := range b {
		b[i] = 0xff
	}
}
