// Package rounding_test is the rounding suite (issue 13): every encoding path of the engine
// (numerics.Encode, the cast op, the stores of mul, matmul and reduce_sum) from f64 and f32 to
// f32, f16, bf16, fp8 e4m3, fp8 e5m2, int8, int32 and bool, from every narrow float pattern,
// and between ints, compared bit for bit with an encoder written from the format definitions
// (rounding), which PyTorch checks in turn where its rules are ours. Ties, subnormals,
// overflow (saturating for fp8 and ints, to Inf for IEEE formats) and NaN are in every input.
// Every tolerance-based suite lets a one-ulp rounding error through; this one does not.
//
// CPU specs run in CI; the same specs run on the GPU (label gpu) on the GPU machine, where the
// PTX encoders run, and skip with the reason elsewhere.
package rounding_test

import (
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

func TestRounding(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Rounding Suite")
}
