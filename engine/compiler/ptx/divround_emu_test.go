package ptx

import (
	"fmt"
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

// The rounding divisions in PTX (emulated) give the CPU backend's bits, specials mixed in
// (±0, ±Inf, NaN payloads, integer extremes, zero divisors), broadcasting included.
func TestDivRoundingModesEmulated(t *testing.T) {
	n := 0
	for _, dt := range []numerics.DType{numerics.F64, numerics.F32, numerics.F16, numerics.BF16, numerics.F8E4M3, numerics.I8, numerics.I32} {
		for _, mode := range []string{"trunc", "floor"} {
			for _, bshape := range [][]int{{3, 37}, {37}} {
				g, ok := build(t, func(b *graph.Builder) *graph.Value {
					return b.Op("div", graph.Attrs{"rounding_mode": graph.String(mode)}, b.Input("x", dt, 3, 37), b.Input("y", dt, bshape...))
				})
				if !ok {
					t.Fatalf("div %s on %s did not build", mode, dt)
				}
				t.Run(fmt.Sprintf("%s/%s/%v", mode, dt, bshape), func(t *testing.T) { checkStream(t, g, streamTarget, uint64(n)) })
				n++
			}
		}
	}
}

// The Go twins of the routines: floor and trunc of the quotient, and the floor division's
// answers at the points torch 1.13 was measured at.
func TestFloorDivRoutineTwin(t *testing.T) {
	m := goArith{}
	inf := 1.0 / zero()
	for _, c := range []struct{ a, b, want float64 }{
		{7, 2, 3}, {-7, 2, -4}, {7, -2, -4}, {-7, -2, 3}, {1, 0.1, 9}, {-0.5, 1, -1}, {0.5, 1, 0},
		{-3, inf, -1}, {3, -inf, -1}, {-3, -inf, 0}, {1, 0, inf}, {-1, 0, -inf},
	} {
		if got := floorDivOf[float64, uint64, bool](m, c.a, c.b, c.a/c.b); got != c.want {
			t.Errorf("floor(%g / %g) = %g, want %g", c.a, c.b, got, c.want)
		}
	}
	for _, c := range [][2]float64{{2.5, 2}, {-2.5, -3}, {0.7, 0}, {-0.3, -1}, {3.5, 3}, {-1e300, -1e300}} {
		if got := floorOf[float64, uint64, bool](m, c[0]); got != c[1] {
			t.Errorf("floor(%g) = %g, want %g", c[0], got, c[1])
		}
	}
	if got := truncOf[float64, uint64, bool](m, -0.5); got != 0 || 1/got > 0 {
		t.Errorf("trunc(-0.5) = %g, want -0", got)
	}
}

func zero() float64 { return 0 }
