package cpu

import (
	"encoding/binary"
	"math"

	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

// The codecs move one column run between a buffer and a register row. A run wholly inside the
// buffer takes a tight per-dtype loop; otherwise each element is checked: reads outside give
// NaN and writes outside are dropped, as unguarded device code would (without the crash).

func bitsAt(data []byte, off, size int) uint64 {
	b := data[off*size : (off+1)*size]
	switch size {
	case 1:
		return uint64(b[0])
	case 2:
		return uint64(binary.LittleEndian.Uint16(b))
	case 4:
		return uint64(binary.LittleEndian.Uint32(b))
	}
	return binary.LittleEndian.Uint64(b)
}

func putBits(data []byte, off, size int, bits uint64) {
	b := data[off*size : (off+1)*size]
	switch size {
	case 1:
		b[0] = byte(bits)
	case 2:
		binary.LittleEndian.PutUint16(b, uint16(bits))
	case 4:
		binary.LittleEndian.PutUint32(b, uint32(bits))
	default:
		binary.LittleEndian.PutUint64(b, bits)
	}
}

// decode32 fills dst from elements start, start+stride, ... of a buffer of n elements of dt;
// dt must be exact in f32.
func decode32(dt numerics.DType, data []byte, n, start, stride int, dst []float32) {
	if !inBounds(start, stride, len(dst), n) {
		size := dt.Size()
		for t := range dst {
			if o := start + t*stride; o >= 0 && o < n {
				dst[t] = float32(numerics.Decode(dt, bitsAt(data, o, size)))
			} else {
				dst[t] = float32(math.NaN())
			}
		}
		return
	}
	switch {
	case dt == numerics.F32 && stride == 1:
		decodeF32Run(data[4*start:4*(start+len(dst))], dst)
	case dt == numerics.F32:
		for t := range dst {
			o := 4 * (start + t*stride)
			dst[t] = math.Float32frombits(binary.LittleEndian.Uint32(data[o : o+4]))
		}
	case dt == numerics.BF16:
		for t := range dst {
			o := 2 * (start + t*stride)
			dst[t] = math.Float32frombits(uint32(binary.LittleEndian.Uint16(data[o:o+2])) << 16)
		}
	default:
		size := dt.Size()
		for t := range dst {
			dst[t] = float32(numerics.Decode(dt, bitsAt(data, start+t*stride, size)))
		}
	}
}

// decode64 is decode32 for any dtype into float64s.
func decode64(dt numerics.DType, data []byte, n, start, stride int, dst []float64) {
	size := dt.Size()
	if !inBounds(start, stride, len(dst), n) {
		for t := range dst {
			if o := start + t*stride; o >= 0 && o < n {
				dst[t] = numerics.Decode(dt, bitsAt(data, o, size))
			} else {
				dst[t] = math.NaN()
			}
		}
		return
	}
	switch dt {
	case numerics.F64:
		for t := range dst {
			o := 8 * (start + t*stride)
			dst[t] = math.Float64frombits(binary.LittleEndian.Uint64(data[o : o+8]))
		}
	case numerics.F32:
		for t := range dst {
			o := 4 * (start + t*stride)
			dst[t] = float64(math.Float32frombits(binary.LittleEndian.Uint32(data[o : o+4])))
		}
	default:
		for t := range dst {
			dst[t] = numerics.Decode(dt, bitsAt(data, start+t*stride, size))
		}
	}
}

// encode64 stores src rounded to dt exactly as numerics.Encode does.
func encode64(dt numerics.DType, data []byte, n, start, stride int, src []float64) {
	size := dt.Size()
	if !inBounds(start, stride, len(src), n) {
		for t, v := range src {
			if o := start + t*stride; o >= 0 && o < n {
				putBits(data, o, size, numerics.Encode(dt, v))
			}
		}
		return
	}
	switch dt {
	case numerics.F64:
		for t, v := range src {
			o := 8 * (start + t*stride)
			binary.LittleEndian.PutUint64(data[o:o+8], math.Float64bits(v))
		}
	case numerics.F32:
		for t, v := range src {
			o := 4 * (start + t*stride)
			bits := nanF32
			if v == v {
				bits = math.Float32bits(float32(v))
			}
			binary.LittleEndian.PutUint32(data[o:o+4], bits)
		}
	default:
		for t, v := range src {
			putBits(data, start+t*stride, size, numerics.Encode(dt, v))
		}
	}
}

// encodeF32From32 stores a register's f32 form into an f32 buffer: the values are already f32,
// so only NaN needs numerics.Encode's canonical pattern.
func encodeF32From32(data []byte, n, start, stride int, src []float32) {
	bits := func(v float32) uint32 {
		if v != v {
			return nanF32
		}
		return math.Float32bits(v)
	}
	if !inBounds(start, stride, len(src), n) {
		for t, v := range src {
			if o := start + t*stride; o >= 0 && o < n {
				binary.LittleEndian.PutUint32(data[4*o:4*o+4], bits(v))
			}
		}
		return
	}
	if stride == 1 {
		dst := data[4*start : 4*(start+len(src))]
		t := 0
		for ; t+4 <= len(src); t += 4 {
			d, v := dst[4*t:4*t+16:4*t+16], src[t:t+4:t+4]
			binary.LittleEndian.PutUint32(d[0:4], bits(v[0]))
			binary.LittleEndian.PutUint32(d[4:8], bits(v[1]))
			binary.LittleEndian.PutUint32(d[8:12], bits(v[2]))
			binary.LittleEndian.PutUint32(d[12:16], bits(v[3]))
		}
		for ; t < len(src); t++ {
			binary.LittleEndian.PutUint32(dst[4*t:4*t+4], bits(src[t]))
		}
		return
	}
	for t, v := range src {
		o := 4 * (start + t*stride)
		binary.LittleEndian.PutUint32(data[o:o+4], bits(v))
	}
}

// decodeF32Run is the hot loop of f32 tile loads: four elements per step with the bounds
// proven once per step, which the compiler turns into plain 32-bit moves.
func decodeF32Run(src []byte, dst []float32) {
	t := 0
	for ; t+4 <= len(dst) && 4*t+16 <= len(src); t += 4 {
		s, d := src[4*t:4*t+16:4*t+16], dst[t:t+4:t+4]
		d[0] = math.Float32frombits(binary.LittleEndian.Uint32(s[0:4]))
		d[1] = math.Float32frombits(binary.LittleEndian.Uint32(s[4:8]))
		d[2] = math.Float32frombits(binary.LittleEndian.Uint32(s[8:12]))
		d[3] = math.Float32frombits(binary.LittleEndian.Uint32(s[12:16]))
	}
	for ; t < len(dst); t++ {
		dst[t] = math.Float32frombits(binary.LittleEndian.Uint32(src[4*t : 4*t+4]))
	}
}
