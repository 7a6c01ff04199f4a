package rounding

import (
	"math"
	"math/big"
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/backend"
	_ "github.com/tessera-qa/tessera-qa/engine/backend/cpu"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

// EncodeExact is Encode on every value Encode takes, and rounds what lies between two
// float64 values (a tie of the target broken by a bit past f64's 53) the exact way.
func TestEncodeExactAgreesWithEncode(t *testing.T) {
	for _, d := range Floats {
		f, _ := FormatOf(d)
		for i, x := range Inputs(numerics.F64, d) {
			if x != x || i%11 != 0 { // a spread: all of them take seconds, and the rules are per binade
				continue
			}
			if got, want := EncodeExact(d, new(big.Float).SetFloat64(x)), f.Encode(x); got != want {
				t.Errorf("%s: EncodeExact(%v) = %#x, Encode %#x", d, x, got, want)
			}
		}
	}
	// 1 + 2^-8 is a bf16 tie (to 1); one part in 2^80 above it rounds up.
	x := new(big.Float).SetPrec(200).SetFloat64(1 + math.Ldexp(1, -8))
	x.Add(x, new(big.Float).SetPrec(200).SetMantExp(big.NewFloat(1), -80))
	if got, want := EncodeExact(numerics.BF16, x), BF16.Encode(1+math.Ldexp(1, -7)); got != want {
		t.Errorf("bf16 just above a tie: %#x, want %#x", got, want)
	}
}

// A bf16 accumulator stagnates: 256 + 1 rounds back to 256 at every step.
func TestAccumRoundsEveryStep(t *testing.T) {
	a := Accum{DType: numerics.BF16}
	xs, ys := make([]float64, 300), make([]float64, 300)
	for i := range xs {
		xs[i], ys[i] = 1, 1
	}
	if got := a.Dot(xs, ys); got != 256 {
		t.Errorf("bf16 dot of 300 ones = %v, want 256 (stagnation)", got)
	}
	if got := (Accum{DType: numerics.F32}).Dot(xs, ys); got != 300 {
		t.Errorf("f32 dot = %v", got)
	}
	// Two reduce tiles of 256: each stagnates at 256 in bf16, then 256 + 44 = 300 rounds to 300.
	if got := a.ReduceRow("reduce_sum", xs, 256, 0); got != 300 {
		t.Errorf("bf16 tiled sum = %v, want 300", got)
	}
}

func TestAccumCasesMatchTheCPU(t *testing.T) {
	cs, err := AccumCases()
	if err != nil {
		t.Fatal(err)
	}
	cpu, err := backend.Get("cpu")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cs {
		got, err := c.Run(cpu)
		if err != nil {
			t.Errorf("%s: %v", c.Name, err)
			continue
		}
		if err := c.Compare(got); err != nil {
			t.Error(err)
		}
	}
	t.Logf("%d combinations", len(cs))
}
