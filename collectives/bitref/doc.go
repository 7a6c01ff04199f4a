// Package bitref computes, bit for bit, what each collective of engine/dist promises to
// return, from every rank's inputs, as docs/distributed.md ("Collectives and the determinism
// contract", "Exact mode") states it. It is the independent side of the bitwise specs in
// suites/collectives (issue 22): before it, the engine's deterministic bits were compared only
// with themselves (run to run, transport to transport) and with float64 under a tolerance, so
// a bug every transport shares, or one that stays inside an f32 tolerance, passed.
//
// It shares no code with engine/dist: no pipeline, no chunks or segments, no
// contribution buffers. Each output element is computed from the whole inputs, in the
// order the contract names, one element at a time:
//
//   - deterministic sum/avg: the contributions in global order (rank 0's parts, then rank
//     1's, ...); f64 accumulates in float64, every narrower float in float32 (each value
//     exactly decoded, each add rounded to nearest even), one rounding to the dtype at the
//     end; avg divides the accumulator by the number of contributions in the accumulator's
//     type; ints sum in int64, avg truncates toward zero, the result wraps to the width.
//   - exact sum: the exact rational sum (math/big, 4096 bits, which holds any sum of f64
//     values) rounded once, nearest even, onto the dtype's grid (subnormals included), with
//     a result beyond the largest finite value handed to numerics.Encode's overflow rule;
//     an exact zero is -0 only if every contribution is -0.
//   - exact avg: round_dt(round_f64(S) / n), as documented (deterministic, not correctly
//     rounded).
//   - max/min: the largest (smallest) contribution in the total order where -0 < +0; the
//     winner's own bit pattern.
//   - every reduction: any NaN contribution, and +Inf with -Inf in a sum, gives the dtype's
//     canonical NaN (numerics.Encode(dt, NaN)).
//   - data movement (all_gather, broadcast, all_to_all): the bytes, unchanged (NaN payloads
//     included).
//
// It decodes and encodes through engine/numerics, which suites/rounding checks bit for bit
// against an independent encoder, so a fault in numerics is caught there and does not hide
// here. It is slow by design (math/big per element in exact mode); the specs size their
// tensors for it.
package bitref
