package ptx

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

// TestNarrowMatchesNumerics runs the twin of the emitted encoder and decoder against
// engine/numerics: every bit pattern decodes to the same value, and random doubles, every
// representable value, and every midpoint and its neighbours encode to the same bits.
func TestNarrowMatchesNumerics(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	for dt, f := range narrowOf {
		n := 1 << (dt.Size() * 8)
		var xs []float64
		for b := range n {
			got := decodeNarrow(g, f, uint64(b))
			want := numerics.Decode(dt, uint64(b))
			if math.Float64bits(got) != math.Float64bits(want) && !(got != got && want != want) {
				t.Fatalf("%s decode %#x: got %v want %v", dt, b, got, want)
			}
			if want == want && !math.IsInf(want, 0) {
				next := numerics.Decode(dt, uint64(b+1))
				xs = append(xs, want, math.Nextafter(want, math.Inf(1)), math.Nextafter(want, math.Inf(-1)))
				if next == next && !math.IsInf(next, 0) && b+1 < n/2 {
					mid := want + (next-want)/2
					xs = append(xs, mid, math.Nextafter(mid, 0), math.Nextafter(mid, math.Inf(1)), -mid)
				}
			}
		}
		for range 200000 {
			xs = append(xs, math.Float64frombits(rng.Uint64()))
		}
		max := numerics.MaxFinite(dt)
		xs = append(xs, 0, math.Copysign(0, -1), math.Inf(1), math.Inf(-1), math.NaN(), -math.NaN(), 5e-324,
			max, -max, max*1.0001, -max*1.0001, max*2, 1e300, -1e300, 0x1p-1022)
		for _, x := range xs {
			if got, want := encodeNarrow(g, f, x), numerics.Encode(dt, x); got != want {
				t.Fatalf("%s encode %v (%#x): got %#x want %#x", dt, x, math.Float64bits(x), got, want)
			}
		}
	}
}
