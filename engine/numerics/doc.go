// Package numerics defines Tessera's element types, their bit-exact conversions and the
// numerics policy (storage, accumulate and output dtype, rounding) that every kernel obeys.
//
// Both backends and the golden model convert through this package, so its rules are the
// definition of a cast; docs/numerics.md explains them with examples. In short:
//
// Float targets (F64 F32 F16 BF16 F8E4M3 F8E5M2) are rounded directly from the float64
// input, never through f32 first, because double rounding changes results at midpoints.
// RoundNearestEven is IEEE round-to-nearest, ties-to-even; RoundTowardZero truncates the
// magnitude. Subnormals are produced and decoded (no flush to zero); -0 stays -0.
//
// NaN becomes the target's canonical quiet NaN with the sign dropped: f32 0x7FC00000,
// f16 0x7E00, bf16 0x7FC0, e4m3 0x7F, e5m2 0x7E. F64 is the one exception: Encode(F64, x)
// is the identity on bits, payload included.
//
// Overflow: F32, F16 and BF16 follow IEEE (±Inf under RoundNearestEven, ±MaxFinite under
// RoundTowardZero; an infinite input stays infinite). Both fp8 formats saturate like PTX
// cvt.rn.satfinite, so that CPU and GPU agree: any finite value whose rounded magnitude is
// above MaxFinite, and ±Inf, become ±MaxFinite (448 for e4m3, 57344 for e5m2). e4m3 is the
// OCP "FN" variant: no infinities, 0x7F/0xFF are NaN, 0x7E is 448. Decoding e5m2 still gives
// ±Inf for 0x7C/0xFC, since such patterns can arrive from outside (files, oracles).
//
// Int targets (I8 I32) truncate toward zero under either rounding, saturate to the int range
// and map NaN to 0. Bool is 1 for any x != 0 (NaN included) and 0 for ±0.
//
// Bit patterns travel in the low Size()*8 bits of a uint64; Encode leaves the high bits zero
// and Decode ignores them. Integers decode sign-extended, bool decodes any non-zero byte as 1.
// An invalid dtype decodes to NaN and encodes to 0 rather than panicking.
//
// Ordered and ULPDistance measure distance in representable steps; -0 and +0 are the same
// step. Policy bundles storage, accumulator and output dtypes with the rounding mode; see
// Policy.Validate for which combinations a kernel may be asked for.
package numerics
