package exact

import (
	"math"
	"math/bits"

	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

// format is what the final rounding needs to know about a float dtype: the significand
// width p (hidden bit included) and the exponent of its smallest subnormal, 2^uMin, which is
// also the ulp of every subnormal and of the smallest binade of normals. Overflow is left to
// numerics.Encode (see round), so the largest exponent is not needed here.
type format struct{ p, uMin int }

// formats is indexed by dtype; the zero entries are the non-float dtypes. The test
// TestFormatsMatchNumerics checks every entry against numerics.Decode.
var formats = [...]format{
	numerics.F64:    {53, -1074},
	numerics.F32:    {24, -149},
	numerics.F16:    {11, -24},
	numerics.BF16:   {8, -133},
	numerics.F8E4M3: {4, -9},
	numerics.F8E5M2: {3, -16},
	numerics.Bool:   {},
}

var f64Format = formats[numerics.F64]

// ceilLog2 is ceil(log2(n)) for n >= 1, and 0 for n <= 1: the number of bits a sum of n
// terms can grow beyond its largest term.
func ceilLog2(n int) int {
	if n <= 1 {
		return 0
	}
	return bits.Len(uint(n - 1))
}

// fastParts is the largest number of contributions of a narrow dtype (f16, fp8) whose sum,
// and every partial sum in any order, float64 holds exactly, so that those dtypes need no
// per-element check. Every value is an integer multiple of 2^uMin no larger than MaxFinite in
// magnitude, so a sum of n of them is K * 2^uMin with |K| <= n * MaxFinite / 2^uMin, and
// float64 holds every such K * 2^uMin exactly while |K| <= 2^53. That gives 8196 parts for
// f16, 2396745 for e5m2 and about 3.9e10 for e4m3 (TestFastPartsBound checks the numbers and
// the edge). ±Inf and NaN contributions need no room: float64 arithmetic propagates them by
// the same rules as Sum (see finishSpecial).
func fastParts(dt numerics.DType) int {
	f := formats[dt]
	unitsPerMax := numerics.MaxFinite(dt) / math.Ldexp(1, f.uMin) // exact: a power-of-two scaling
	return int(math.Floor(math.Ldexp(1, 53) / unitsPerMax))
}
