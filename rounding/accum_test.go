package rounding

import (
	"math"
	"math/big"
	"math/rand/v2"
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

// The float64 shortcut of Accum's steps gives what the big numbers give, on operands of every
// magnitude (subnormal to huge, both signs), into every narrow accumulator.
func TestAccumShortcutMatchesBigNumbers(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	draw := func() float64 {
		v := math.Ldexp(r.Float64()+0.5, r.IntN(200)-100)
		if r.IntN(8) == 0 {
			v = math.Ldexp(r.Float64(), -1074+r.IntN(60)) // f64 subnormals and just above
		}
		if r.IntN(2) == 0 {
			v = -v
		}
		if r.IntN(3) == 0 {
			v = float64(float32(v)) // an f32 operand, exact sums and products are common
		}
		return v
	}
	for _, d := range []numerics.DType{numerics.F32, numerics.F16, numerics.BF16, numerics.F8E4M3, numerics.F8E5M2} {
		a := Accum{DType: d}
		for range 20000 {
			x, y := draw(), draw()
			for _, op := range []arith{opAdd, opMul, opDiv} {
				r := [...]float64{x + y, x * y, x / y}[op]
				if math.IsInf(r, 0) || r != r || y == 0 {
					continue
				}
				if got, want := a.step(x, y, op), a.bigStep(x, y, r, op); got != want && !(got != got && want != want) {
					t.Fatalf("%s op %d of %v, %v: %v, big numbers %v", d, op, x, y, got, want)
				}
			}
		}
	}
}
