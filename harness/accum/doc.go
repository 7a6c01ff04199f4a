// Package accum gives the per-element error bound of a K-reduction computed on an accumulator
// that keeps fewer bits than f32 inside a chunk of K and adds each chunk into f32
// ("promotion"), as Hopper's fp8 tensor cores do. Elementwise relative tolerances are the wrong
// model for such a dot product: a small result that is the difference of large terms carries
// an absolute error of the order of 2^-p * sum_k |a_ik*b_kj|, which no rtol*|want| covers and
// no fixed atol covers without also passing wrong kernels. docs/numerics.md derives the model
// and checks it against the H100's measured errors.
//
// Index:
//   - Model, HopperFP8: the accumulator (bits kept, chunk, block FMA length) and Coef(k), the
//     factor of sum_k |a_k*b_k| that bounds one dot product's error (model.go).
//   - ScaledMatmul, ForGraph: the bound of every output element of a scaled_matmul, from its
//     inputs, for harness.CheckBound (scaled.go).
package accum
