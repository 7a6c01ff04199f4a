package numerics

import (
	"fmt"

	"github.com/tessera-qa/tessera-qa/engine/errs"
)

// DType is an element type. The zero value is invalid so that a forgotten dtype is caught.
type DType uint8

const (
	Invalid DType = iota
	F64
	F32
	F16
	BF16
	F8E4M3 // OCP FP8 E4M3 "FN": no infinities, max 448, NaN = S.1111.111
	F8E5M2 // OCP FP8 E5M2: IEEE-like, has ±Inf
	I8
	I32
	Bool
)

// All lists every valid dtype in a fixed order.
var All = []DType{F64, F32, F16, BF16, F8E4M3, F8E5M2, I8, I32, Bool}

// Floats lists the floating-point dtypes, widest first.
var Floats = []DType{F64, F32, F16, BF16, F8E4M3, F8E5M2}

// Ints lists the integer dtypes.
var Ints = []DType{I8, I32}

var names = [...]string{Invalid: "invalid", F64: "f64", F32: "f32", F16: "f16", BF16: "bf16",
	F8E4M3: "fp8e4m3", F8E5M2: "fp8e5m2", I8: "int8", I32: "int32", Bool: "bool"}

func (d DType) String() string {
	if int(d) < len(names) {
		return names[d]
	}
	return fmt.Sprintf("dtype(%d)", uint8(d))
}

// Parse returns the dtype named s (as printed by String).
func Parse(s string) (DType, error) {
	for i, n := range names {
		if n == s && DType(i) != Invalid {
			return DType(i), nil
		}
	}
	return Invalid, errs.New(errs.DType, "unknown dtype %q (want one of f64 f32 f16 bf16 fp8e4m3 fp8e5m2 int8 int32 bool)", s)
}

// Valid reports whether d is one of the defined dtypes.
func (d DType) Valid() bool { return d > Invalid && d <= Bool }

// Size is the storage size of one element in bytes.
func (d DType) Size() int {
	switch d {
	case F64:
		return 8
	case F32, I32:
		return 4
	case F16, BF16:
		return 2
	case F8E4M3, F8E5M2, I8, Bool:
		return 1
	}
	return 0
}

// IsFloat reports whether d is a floating-point dtype.
func (d DType) IsFloat() bool { return d >= F64 && d <= F8E5M2 }

// IsInt reports whether d is a (signed) integer dtype.
func (d DType) IsInt() bool { return d == I8 || d == I32 }
