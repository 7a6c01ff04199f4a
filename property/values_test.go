package property

import (
	"math"
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
)

// count returns how many elements of t satisfy f.
func count(t *tensor.Tensor, f func(v float64) bool) int {
	n := 0
	for i := range t.Len() {
		if f(t.Float64(i)) {
			n++
		}
	}
	return n
}

func TestSpecialClassHoldsTheAwkwardValues(t *testing.T) {
	dts := []numerics.DType{numerics.F32, numerics.F64, numerics.F16, numerics.BF16, numerics.F8E5M2}
	for _, dt := range dts {
		sub := minNormal(dt)
		var nan, inf, zero, negZero, subnormal int
		for seed := range uint64(8) {
			x := Fill(dt, []int{64, 16}, ClassSpecial, seed)
			nan += count(x, math.IsNaN)
			inf += count(x, func(v float64) bool { return math.IsInf(v, 0) })
			zero += count(x, func(v float64) bool { return v == 0 && !math.Signbit(v) })
			negZero += count(x, func(v float64) bool { return v == 0 && math.Signbit(v) })
			subnormal += count(x, func(v float64) bool { return v != 0 && math.Abs(v) < sub })
		}
		for what, n := range map[string]int{"NaN": nan, "Inf": inf, "+0": zero, "-0": negZero, "subnormal": subnormal} {
			if n == 0 {
				t.Errorf("%s: no %s in 8 special tensors", dt, what)
			}
		}
	}
}

func TestMagnitudeClasses(t *testing.T) {
	for _, dt := range []numerics.DType{numerics.F32, numerics.F64, numerics.F16, numerics.BF16} {
		unit := finiteRMS(Fill(dt, []int{4096}, ClassNormal, 1))
		huge := finiteRMS(Fill(dt, []int{4096}, ClassHuge, 1))
		tiny := finiteRMS(Fill(dt, []int{4096}, ClassTiny, 1))
		if huge < 32*unit || tiny > unit/32 {
			t.Errorf("%s: RMS huge %g, unit %g, tiny %g: want huge >> unit >> tiny", dt, huge, unit, tiny)
		}
		if tiny < minNormal(dt) {
			t.Errorf("%s: tiny RMS %g is in the subnormals", dt, tiny)
		}
	}
}

func TestLogitsClassHasExtremeRows(t *testing.T) {
	x := Fill(numerics.F32, []int{64, 33}, ClassLogits, 3)
	if count(x, func(v float64) bool { return math.IsInf(v, -1) }) == 0 {
		t.Error("no masked (-Inf) logits")
	}
	if count(x, func(v float64) bool { return math.Abs(v) >= 1000 && !math.IsInf(v, 0) }) == 0 {
		t.Error("no logits of magnitude 1000 or more")
	}
	if f := Fill(numerics.F16, []int{64, 33}, ClassLogits, 3); count(f, func(v float64) bool { return math.IsInf(v, 1) }) > 0 {
		t.Error("f16 logits overflowed to +Inf")
	}
}

func TestFillIsAPureFunction(t *testing.T) {
	for c := range numClasses {
		for _, dt := range numerics.All {
			a, b := Fill(dt, []int{5, 7}, c, 42), Fill(dt, []int{5, 7}, c, 42)
			if a.Digest() != b.Digest() {
				t.Errorf("%s %s: two fills with one seed differ", dt, c)
			}
		}
	}
}

func TestNearCopyIsAFewULPsAway(t *testing.T) {
	for _, dt := range []numerics.DType{numerics.F32, numerics.F16, numerics.BF16, numerics.F64} {
		x := Fill(dt, []int{256}, ClassNormal, 9)
		y := NearCopy(x, false, 9)
		neg := NearCopy(x, true, 9)
		moved := 0
		for i := range x.Len() {
			u := numerics.ULPDistance(dt, x.Bits(i), y.Bits(i))
			if x.Float64(i) != 0 && (u < 1 || u > 4) {
				t.Fatalf("%s: element %d moved %d ulps, want 1..4", dt, i, u)
			}
			if u > 0 {
				moved++
			}
			if neg.Float64(i) != -y.Float64(i) {
				t.Fatalf("%s: negated copy %g is not -%g", dt, neg.Float64(i), y.Float64(i))
			}
		}
		if moved == 0 {
			t.Fatalf("%s: nothing moved", dt)
		}
	}
}
