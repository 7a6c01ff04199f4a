// Package tensor holds Tensor (dtype, shape, little-endian row-major bytes), conversions to and
// from float64, the bitwise digest, and .npy/.npz I/O.
package tensor

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"

	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

// Tensor is a dense row-major array. Data holds exactly NumElems(Shape)*DType.Size() bytes,
// little-endian; 16- and 8-bit floats are stored as their bit patterns.
type Tensor struct {
	DType numerics.DType
	Shape []int
	Data  []byte
}

// NumElems is the product of the dims (1 for a scalar of shape []).
func NumElems(shape []int) int {
	n := 1
	for _, d := range shape {
		n *= d
	}
	return n
}

// Strides returns row-major element strides for shape.
func Strides(shape []int) []int {
	s := make([]int, len(shape))
	acc := 1
	for i := len(shape) - 1; i >= 0; i-- {
		s[i] = acc
		acc *= shape[i]
	}
	return s
}

// New returns a zero-filled tensor.
func New(dt numerics.DType, shape []int) *Tensor {
	return &Tensor{DType: dt, Shape: append([]int{}, shape...), Data: make([]byte, NumElems(shape)*dt.Size())}
}

// FromFloat64 rounds each value to dt (numerics.Encode) and packs it.
func FromFloat64(dt numerics.DType, shape []int, vals []float64) *Tensor {
	t := New(dt, shape)
	if len(vals) != t.Len() {
		panic(fmt.Sprintf("tensor.FromFloat64: %d values for shape %v", len(vals), shape))
	}
	for i, v := range vals {
		t.SetFloat64(i, v)
	}
	return t
}

// Len is the number of elements.
func (t *Tensor) Len() int { return NumElems(t.Shape) }

// Bits returns element i's raw bit pattern, zero-extended.
func (t *Tensor) Bits(i int) uint64 {
	sz := t.DType.Size()
	b := t.Data[i*sz : (i+1)*sz]
	switch sz {
	case 1:
		return uint64(b[0])
	case 2:
		return uint64(binary.LittleEndian.Uint16(b))
	case 4:
		return uint64(binary.LittleEndian.Uint32(b))
	default:
		return binary.LittleEndian.Uint64(b)
	}
}

// SetBits stores a raw bit pattern into element i.
func (t *Tensor) SetBits(i int, bits uint64) {
	sz := t.DType.Size()
	b := t.Data[i*sz : (i+1)*sz]
	switch sz {
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

// Float64 decodes element i exactly.
func (t *Tensor) Float64(i int) float64 { return numerics.Decode(t.DType, t.Bits(i)) }

// SetFloat64 rounds v to the tensor's dtype and stores it.
func (t *Tensor) SetFloat64(i int, v float64) { t.SetBits(i, numerics.Encode(t.DType, v)) }

// Float64s decodes every element.
func (t *Tensor) Float64s() []float64 {
	out := make([]float64, t.Len())
	for i := range out {
		out[i] = t.Float64(i)
	}
	return out
}

// Clone returns a deep copy.
func (t *Tensor) Clone() *Tensor {
	return &Tensor{DType: t.DType, Shape: append([]int{}, t.Shape...), Data: append([]byte{}, t.Data...)}
}

// Digest is the hex SHA-256 over dtype, shape and bytes: equal digests mean bitwise-equal
// tensors (so -0 != +0 and NaN payloads count).
func (t *Tensor) Digest() string {
	h := sha256.New()
	fmt.Fprintf(h, "tessera.tensor.v1|%s|%v|", t.DType, t.Shape)
	h.Write(t.Data)
	return hex.EncodeToString(h.Sum(nil))
}

// TypeString renders "f32[4,8]" (scalar: "f32[]").
func (t *Tensor) TypeString() string { return TypeString(t.DType, t.Shape) }

// TypeString renders a dtype and shape the way the graph text format writes them.
func TypeString(dt numerics.DType, shape []int) string {
	s := dt.String() + "["
	for i, d := range shape {
		if i > 0 {
			s += ","
		}
		s += fmt.Sprint(d)
	}
	return s + "]"
}
