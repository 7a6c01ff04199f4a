package graph

import "github.com/tessera-qa/tessera-qa/engine/numerics"

// The spectral ops' text round-trip cases (TestRoundTripEveryOp), every attribute form.
func init() {
	f64 := numerics.F64
	opCases["fft"] = []opCase{{in: []Type{ty(f32, 4, 8, 2)}}, {in: []Type{ty(f64, 3, 5, 2)}, attrs: Attrs{"n": Int(7), "dim": Int(0), "norm": String("ortho")}}}
	opCases["ifft"] = []opCase{{in: []Type{ty(f32, 9, 2)}, attrs: Attrs{"norm": String("forward")}}}
	opCases["rfft"] = []opCase{{in: []Type{ty(f32, 4, 16)}, attrs: Attrs{"n": Int(10)}}}
	opCases["irfft"] = []opCase{{in: []Type{ty(f32, 4, 9, 2)}}, {in: []Type{ty(f64, 1, 2)}, attrs: Attrs{"n": Int(1)}}}
	opCases["fft2"] = []opCase{{in: []Type{ty(f32, 2, 6, 5, 2)}}}
	opCases["ifft2"] = []opCase{{in: []Type{ty(f32, 6, 5, 2)}, attrs: Attrs{"s": Ints(4, 4)}}}
	opCases["rfft2"] = []opCase{{in: []Type{ty(f64, 6, 7)}, attrs: Attrs{"norm": String("ortho")}}}
	opCases["irfft2"] = []opCase{{in: []Type{ty(f32, 6, 4, 2)}, attrs: Attrs{"s": Ints(6, 7)}}}
	opCases["complex_mul"] = []opCase{{in: []Type{ty(f32, 3, 1, 4, 2), ty(f32, 5, 1, 2)}}}
	opCases["conj"] = []opCase{{in: []Type{ty(bf16, 7, 2)}}}
}
