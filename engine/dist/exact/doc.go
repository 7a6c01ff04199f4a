// Package exact is the arithmetic of the distributed runtime's exact mode (design.md §10):
// per element, the sum of all contributions computed exactly and rounded once to the dtype,
// round to nearest even. The result is then a function of the multiset of contributions alone,
// so no order, grouping, world size or split of the data over ranks can change its bits.
//
//	Sum(dt, parts, out)     the correctly rounded sum
//	Avg(dt, parts, out, n)  round_dt(round_f64(sum) / n): deterministic, not correctly rounded
//
// # What the caller must send
//
// Exact sums do not compose through the dtype: summing a group exactly and rounding it to the
// dtype throws away what the other groups needed (TestNotComposable: in f32,
// 1 + 2^-24 + 2^-24 is 1 + 2^-23, but the group {1, 2^-24} rounds to 1 and the rest then
// rounds to 1 again). So the communicator ships raw contributions to each element's owner
// (all-to-all or all-gather, not a reduce-scatter of partial sums) and the owner calls Sum
// on all of them. Their order does not matter.
//
// # Method
//
// Fast path (fast.go, f32.go). Every value of every float dtype is exact in float64. If for an
// element the span from the highest bit a partial sum can reach (largest exponent +
// ceil(log2(parts)) + 1) down to the lowest bit any contribution may have set is at most 53
// bits, then every partial sum, in any order, is a float64 and the float64 sum is the exact
// sum; one conversion to the dtype is the single correct rounding. The check reads exponent
// fields from the bit patterns: for f32 the largest magnitude and the smallest
// magnitude-minus-one (zeros excluded for free), maxE - minKey <= 29 - ceil(log2(parts));
// for bf16 45 - ceil(log2(parts)); for f64 (and the rare f16/fp8 calls with very many parts)
// the actual lowest set bit, because full-precision f64 leaves no spare bits. f16 and fp8
// need no check at all up to fastParts(dt) contributions (8196 for f16, 2.4 million for
// e5m2, 3.9e10 for e4m3): their whole range is a 53-bit window (TestFastPartsBound). The
// checks are tight: TestCheckIsTight builds, one exponent beyond each limit, an element whose
// float64 sum is inexact.
//
// Slow path (accum.go), for the elements that fail their check: an exact fixed-point
// accumulator. Values are integers in units of 2^-1074 (the smallest float64 subnormal),
// positive and negative contributions summed apart in 34 64-bit limbs each (2176 bits: the
// 2098 bits of float64's range plus headroom for 2^78 contributions), touching two limbs
// and a rare carry per value, and only the limbs in use. At the end the smaller magnitude is
// taken from the larger once, and the difference is rounded to the target's significand with
// guard and sticky bits, ties to even, on the subnormal grid below the normal range; a result
// beyond the range is handed to numerics.Encode, which applies the dtype's overflow rule.
//
// Special values follow rules that do not depend on order: any NaN gives the dtype's
// canonical NaN (numerics.Encode(dt, NaN)); +Inf with -Inf gives NaN; one kind of infinity
// gives numerics.Encode(dt, ±Inf), which for fp8 e5m2 saturates to ±57344 like every engine
// cast; an exact zero is -0 only if every contribution is -0. Integers (int8, int32) sum in
// int64 and wrap like the engine's integer arithmetic.
//
// # Error bound
//
// Sum: none beyond the one rounding: every result is the correctly rounded exact sum (at most
// half an ulp of the dtype away, ties to even), checked bit for bit against math/big
// (oracle_test.go). Avg: the exact sum is rounded to float64 (correctly), divided by n in
// float64 and rounded to the dtype, so before the last rounding it is within one float64 ulp
// of the true mean; after it, it is the correctly rounded mean except when the mean lies
// within that ulp of a dtype midpoint, where it can be one dtype ulp off. For f64, an exact
// sum beyond float64's range gives ±Inf even where the mean would fit.
//
// # Cost
//
// Measured with go test -bench . (4 parts x 1Mi elements, 2-core AMD EPYC VM shared with
// other work, 2026-11-25), as ratios to the deterministic mode's plain loop timed in the same
// iterations (x-plain: element by element, in order, in the dtype's accumulator, as
// engine/dist's reduce does it):
//
//	f32, normal data                   ~2.4 ns/element   1.05-1.17x plain (4.4-5.1x a hand-unrolled four-part loop)
//	f32, magnitudes 2^-60..2^60        ~52 ns/element    ~20x (nearly every element takes the slow path)
//	bf16, normal data                  ~10 ns/element    ~0.92x
//	f64, normal data                   ~54 ns/element    ~27x  (slow path: no spare bits)
//	f64, data that came from f32       ~11 ns/element    ~5.5x
//
// The slow path costs about 50 ns per element of four contributions.
//
// Files: sum.go (API, validation, integers, the slow path per element), fast.go (blocks,
// checks and finishing for every float dtype but f32), f32.go (the f32 kernel), accum.go
// (the fixed-point accumulator and its rounding), format.go (significand widths, smallest
// subnormals, fastParts).
package exact
