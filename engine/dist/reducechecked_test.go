package dist

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

// reduceChecked, which adds a lent contribution piece by piece while it checksums it, gives
// the bits of one reduce over the whole segment, for every mode, reduction and dtype, on a
// ragged length (three whole pieces and a few elements more) with NaN, infinities, signed zeros
// and extremes at the pieces' edges; and a lent payload whose bytes differ from its header's
// CRC is the crc E_DESYNC, whichever contribution it is.
func TestPiecewiseReductionHasTheWholeReductionsBits(t *testing.T) {
	tr := NewInproc(1)[0]
	defer tr.Close()
	specials := []float64{math.NaN(), math.Inf(1), math.Inf(-1), math.Copysign(0, -1), 0, math.MaxFloat32, -math.SmallestNonzeroFloat32, 1e300}
	for _, mode := range []Mode{Deterministic, Exact, Fast} {
		for _, dt := range []numerics.DType{numerics.F32, numerics.BF16, numerics.F64, numerics.I32} {
			for _, red := range []RedOp{Sum, Max, Avg} {
				size := dt.Size()
				n := 3*reducePiece/size + 5
				rng := rand.New(rand.NewPCG(uint64(mode)*131+uint64(red), uint64(size)))
				ins := make([][]byte, 3)
				for j := range ins {
					ins[j] = make([]byte, n*size)
					for i := range n {
						v := rng.NormFloat64() * 1e3
						if i%(reducePiece/size) == 0 || i%(reducePiece/size) == reducePiece/size-1 || i == n-1 {
							v = specials[(i+j)%len(specials)]
						}
						put(dt, ins[j][i*size:], v)
					}
				}
				want := make([]byte, n*size)
				werr := reduce(mode, dt, red, ins, want)
				c := NewComm(tr, Options{Mode: mode})
				cl := &call{c: c, op: OpAllReduce, dt: dt, red: red}
				for lent := range ins {
					f := &Frame{Header: Header{Src: uint16(lent), CRC: Checksum(ins[lent])}, Payload: ins[lent]}
					f.DeferSum()
					got := make([]byte, n*size)
					err := cl.reduceChecked(ins, got, []*Frame{f})
					if (err == nil) != (werr == nil) {
						t.Fatalf("%s %s %s: piecewise error %v, whole %v", mode, dt, red, err, werr)
					}
					if werr == nil && !bytes.Equal(got, want) {
						t.Fatalf("%s %s %s, contribution %d lent: piecewise bits differ from the whole reduction's", mode, dt, red, lent)
					}
					f.CRC ^= 1
					if err := cl.reduceChecked(ins, got, []*Frame{f}); werr == nil && DesyncField(err) != "crc" {
						t.Fatalf("%s %s %s: a lent payload that is not its header's gave %v, want the crc E_DESYNC", mode, dt, red, err)
					}
				}
			}
		}
	}
}

// put writes v as dt, little-endian.
func put(dt numerics.DType, b []byte, v float64) {
	switch dt {
	case numerics.F32:
		binary.LittleEndian.PutUint32(b, math.Float32bits(float32(v)))
	case numerics.BF16:
		binary.LittleEndian.PutUint16(b, uint16(math.Float32bits(float32(v))>>16))
	case numerics.F64:
		binary.LittleEndian.PutUint64(b, math.Float64bits(v))
	case numerics.I32:
		if math.IsNaN(v) || math.IsInf(v, 0) || math.Abs(v) > 1e6 {
			v = float64(int32(math.Float64bits(v) >> 33))
		}
		binary.LittleEndian.PutUint32(b, uint32(int32(v)))
	}
}
