package accum

import "math"

// Model is how a kernel accumulates one dot product of length K:
//
//	for each chunk of Chunk consecutive k (in increasing k):
//	    s = 0 in the narrow accumulator; for each block of BlockK products: s = s + sum(block)
//	    acc_f32 += s
//	out = round(acc_f32 * round_f32(scale_a*scale_b))
//
// Each block FMA (one tensor-core instruction's k) aligns its operands to the largest
// exponent and keeps Bits fraction bits, truncating (round toward zero) at Truncations places
// (the alignment of the smaller operands, as one wide add, and the normalisation of the
// result). A truncation at Bits fraction bits loses less than 2^-Bits times the largest
// operand, and every operand of a block is at most the chunk's sum of |products| (truncation
// toward zero never grows the running sum), so a chunk errs by less than
// (Chunk/BlockK) * Truncations * 2^-Bits * sum over the chunk of |a_k*b_k|.
type Model struct {
	Name        string
	Bits        int // fraction bits kept inside a chunk
	Chunk       int // products per promotion into f32; 0: the whole K stays narrow
	BlockK      int // products per block FMA (one instruction's k)
	Truncations int // truncations per block FMA
}

// HopperFP8 is sm_90's fp8 wgmma with the engine's promotion every 128 k (the fp8 kernel of
// engine/compiler/ptx, and cuBLAS without fast accumulation): an e8m13 accumulator that
// truncates (13 fraction bits, "about 14 bits" with the hidden one), blocks of 32 products
// (wgmma.m64nNk32 for e4m3), 4 block FMAs per 128-k chunk, 2 truncations each.
var HopperFP8 = Model{Name: "sm_90 fp8 wgmma, promoted every 128 k", Bits: 13, Chunk: 128, BlockK: 32, Truncations: 2}

// f32Unit is the unit roundoff of f32 round-to-nearest.
const f32Unit = 0x1p-24

// Coef is c such that a dot product of length k computed as m describes differs from the
// exact one by at most c * sum_k |a_k*b_k| (before the output's rounding, with the scales
// folded into a and b):
//
//	c = steps * Truncations * 2^-Bits          the narrow accumulator, steps = min(k, Chunk)/BlockK rounded up
//	  + (chunks + 2) * 2^-24                   the f32 adds of the chunks, then the two f32
//	                                           roundings of scale_a*scale_b and of acc*scale
//
// The chunk term is a worst case per chunk applied to the whole sum (sum over chunks of
// steps*u*S_chunk = steps*u*S). The f32 term is the classical gamma_n bound of recursive
// summation with n = chunks.
func (m Model) Coef(k int) float64 {
	if k <= 0 {
		return 0
	}
	chunk := m.Chunk
	if chunk <= 0 || chunk > k {
		chunk = k
	}
	steps := (chunk + m.BlockK - 1) / m.BlockK
	chunks := (k + chunk - 1) / chunk
	return float64(steps*m.Truncations)*math.Ldexp(1, -m.Bits) + float64(chunks+2)*f32Unit
}

// ForBackend is the accumulator model of the tensor-core kernels of an engine backend, by
// its name: "cuda" (sm_90, the only GPU the engine targets) has HopperFP8; the CPU backend and
// engine/ref accumulate exactly enough for the plain tolerances, so ok is false there and
// their checks stay as strict as before.
func ForBackend(name string) (m Model, ok bool) {
	if name == "cuda" {
		return HopperFP8, true
	}
	return Model{}, false
}
