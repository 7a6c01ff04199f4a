package numerics

import (
	"fmt"

	"github.com/tessera-qa/tessera-qa/engine/errs"
)

// Rounding is how a float is rounded to a narrower float. The zero value is invalid in a
// Policy; the conversion functions treat every value other than RoundTowardZero as
// RoundNearestEven so that a forgotten mode gets the default rather than garbage.
type Rounding uint8

const (
	RoundNearestEven Rounding = iota + 1 // IEEE nearest, ties to even mantissa
	RoundTowardZero                      // truncate the magnitude
)

func (r Rounding) String() string {
	switch r {
	case RoundNearestEven:
		return "rne"
	case RoundTowardZero:
		return "rtz"
	}
	return fmt.Sprintf("rounding(%d)", uint8(r))
}

// Valid reports whether r is one of the defined modes.
func (r Rounding) Valid() bool { return r == RoundNearestEven || r == RoundTowardZero }

// ParseRounding returns the mode named s ("rne" or "rtz").
func ParseRounding(s string) (Rounding, error) {
	switch s {
	case "rne":
		return RoundNearestEven, nil
	case "rtz":
		return RoundTowardZero, nil
	}
	return 0, errs.New(errs.Parse, "unknown rounding mode %q (want rne or rtz)", s)
}
