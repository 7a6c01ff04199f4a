package exact

import (
	"math"
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

const (
	F64, F32, F16, BF16 = numerics.F64, numerics.F32, numerics.F16, numerics.BF16
	E4M3, E5M2, I8, I32 = numerics.F8E4M3, numerics.F8E5M2, numerics.I8, numerics.I32
)

var negZero = math.Copysign(0, -1)

type handCase struct {
	name string
	dt   numerics.DType
	in   []uint64 // one contribution per part, bit patterns
	want uint64
}

func f32b(v float32) uint64 { return uint64(math.Float32bits(v)) }
func f64b(v float64) uint64 { return math.Float64bits(v) }

func handCases() []handCase {
	p := math.Ldexp
	maxF32 := float64(math.MaxFloat32)
	return []handCase{
		// Ties to even, both ways, on the fast path and on the slow path.
		{"f32/tie-down", F32, enc(F32, 1, p(1, -24)), f32b(1)},
		{"f32/tie-up", F32, enc(F32, 1+p(1, -23), p(1, -24)), enc(F32, 1+p(1, -22))[0]},
		{"f32/tie-down-slow", F32, enc(F32, p(1, 100), p(1, 76), p(1, 40), -p(1, 40)), enc(F32, p(1, 100))[0]},
		{"f32/tie-up-slow", F32, enc(F32, p(1, 100)+p(1, 77), p(1, 76), p(1, 20), -p(1, 20)), enc(F32, p(1, 100)+p(1, 78))[0]},
		{"f32/above-tie-sticky", F32, enc(F32, p(1, 100), p(1, 76), p(1, 20)), enc(F32, p(1, 100)+p(1, 77))[0]},
		{"f32/below-tie-sticky", F32, enc(F32, p(1, 100), p(1, 76), -p(1, 20)), enc(F32, p(1, 100))[0]},
		{"f64/tie-down", F64, enc(F64, 1, p(1, -53)), f64b(1)},
		{"f64/tie-up", F64, enc(F64, 1+p(1, -52), p(1, -53)), f64b(1 + p(1, -51))},
		{"f64/tie-broken-far-below", F64, enc(F64, 1, p(1, -53), p(1, -1074)), f64b(1 + p(1, -52))},
		{"f64/tie-kept-far-below", F64, enc(F64, 1, p(1, -53), -p(1, -1074)), f64b(1)},
		{"f16/tie", F16, enc(F16, 1, p(1, -11)), enc(F16, 1)[0]},
		{"bf16/tie-up", BF16, enc(BF16, 1+p(1, -7), p(1, -8)), enc(BF16, 1+p(1, -6))[0]},
		{"bf16/tie-broken-far-below", BF16, enc(BF16, 1, p(1, -8), p(1, -133)), enc(BF16, 1+p(1, -7))[0]},
		// The classic: a plain float32 sum gives 0.
		{"f32/1e30+1e-30-1e30", F32, []uint64{f32b(1e30), f32b(1e-30), f32b(-1e30)}, f32b(1e-30)},
		{"f64/1e308+1-1e308", F64, enc(F64, 1e308, 1, -1e308), f64b(1)},
		{"bf16/huge+tiny-huge", BF16, enc(BF16, p(1, 120), p(1, -130), -p(1, 120)), enc(BF16, p(1, -130))[0]},
		{"f32/cancellation", F32, enc(F32, 1+p(1, -23), -1, p(1, -30)), enc(F32, p(1, -23)+p(1, -30))[0]},
		{"f64/cancellation", F64, enc(F64, 0x1.fffffffffffffp0, -0x1.ffffffffffffep0, p(1, -60)), f64b(p(1, -52) + p(1, -60))},
		// Subnormal results.
		{"f32/subnormal", F32, enc(F32, 1.5*p(1, -126), -p(1, -126)), f32b(float32(p(1, -127)))},
		{"f32/smallest", F32, enc(F32, p(1, -126)+p(1, -149), -p(1, -126)), 1},
		{"f64/smallest", F64, []uint64{0x0010000000000001, f64b(-p(1, -1022))}, 1},
		{"f64/subnormals-add", F64, []uint64{1, 1, 0x000FFFFFFFFFFFFE}, 0x0010000000000000},
		{"bf16/subnormal", BF16, enc(BF16, p(1, -126)+p(1, -133), -p(1, -126)), 1},
		{"f16/subnormal", F16, enc(F16, p(1, -14)+p(1, -24), -p(1, -14)), 1},
		// Overflow and the largest finite values.
		{"f32/overflow", F32, enc(F32, maxF32, maxF32), f32b(float32(math.Inf(1)))},
		{"f32/max+half-ulp-ties-to-inf", F32, enc(F32, maxF32, p(1, 103)), f32b(float32(math.Inf(1)))},
		{"f32/max+below-half-ulp", F32, enc(F32, maxF32, p(1, 102), p(1, 80)), f32b(math.MaxFloat32)},
		{"f32/max-finite-sum", F32, enc(F32, p(1, 127), p(1, 127)-p(1, 104)), f32b(math.MaxFloat32)},
		{"f64/overflow", F64, enc(F64, math.MaxFloat64, math.MaxFloat64), f64b(math.Inf(1))},
		{"f64/no-intermediate-overflow", F64, enc(F64, math.MaxFloat64, math.MaxFloat64, -math.MaxFloat64), f64b(math.MaxFloat64)},
		{"f64/max+half-ulp-ties-to-inf", F64, enc(F64, math.MaxFloat64, p(1, 970)), f64b(math.Inf(1))},
		{"f64/max+below-half-ulp", F64, enc(F64, math.MaxFloat64, p(1, 970), -p(1, -1074)), f64b(math.MaxFloat64)},
		{"f16/overflow-tie", F16, enc(F16, 65504, 16), enc(F16, math.Inf(1))[0]},
		{"f16/max", F16, enc(F16, 65504, 15), enc(F16, 65504)[0]},
		{"bf16/overflow", BF16, enc(BF16, 0x1.FEp127, 0x1.FEp127), 0x7F80},
		{"e4m3/saturates", E4M3, enc(E4M3, 448, 448), 0x7E},
		{"e4m3/tie-to-448", E4M3, enc(E4M3, 448, 16), 0x7E},
		{"e4m3/-saturates", E4M3, enc(E4M3, -448, -32), 0xFE},
		{"e5m2/saturates", E5M2, enc(E5M2, 57344, 57344), 0x7B},
		// Signed zeros.
		{"f32/-0-0", F32, enc(F32, negZero, negZero), f32b(float32(negZero))},
		{"f32/-0", F32, enc(F32, negZero), f32b(float32(negZero))},
		{"f32/-0+0", F32, enc(F32, negZero, 0), 0},
		{"f32/-1+1", F32, enc(F32, -1, 1), 0},
		{"f32/-0-1+1", F32, enc(F32, negZero, -1, 1), 0},
		{"f32/-0-0-slow", F32, []uint64{f32b(float32(negZero)), f32b(1e30), f32b(-1e30), f32b(1e-30), f32b(-1e-30)}, 0},
		{"f64/-0-0", F64, enc(F64, negZero, negZero, negZero), f64b(negZero)},
		{"f64/-0+x-x-slow", F64, enc(F64, negZero, 1e300, -1e300, 1e-300, -1e-300), 0},
		{"e4m3/-0-0", E4M3, []uint64{0x80, 0x80}, 0x80},
		{"bf16/-0-0", BF16, []uint64{0x8000, 0x8000}, 0x8000},
		// NaN and infinities.
		{"f32/nan", F32, []uint64{f32b(1), 0xFFC00001}, 0x7FC00000},
		{"f32/inf-inf", F32, enc(F32, math.Inf(1), math.Inf(-1)), 0x7FC00000},
		{"f32/inf+1", F32, enc(F32, math.Inf(1), 1), 0x7F800000},
		{"f32/inf+tiny-slow-check", F32, enc(F32, math.Inf(-1), 0x1p-140), 0xFF800000},
		{"f32/inf+inf", F32, enc(F32, math.Inf(1), math.Inf(1)), 0x7F800000},
		{"f32/nan+inf", F32, []uint64{0x7F800000, 0x7F800001}, 0x7FC00000},
		{"f64/nan-payload", F64, []uint64{0xFFF0000000000123, f64b(1)}, f64b(math.NaN())},
		{"f64/inf-inf", F64, enc(F64, math.Inf(1), math.Inf(-1), 1), f64b(math.NaN())},
		{"f64/inf-max-max", F64, enc(F64, math.Inf(1), -math.MaxFloat64, -math.MaxFloat64), f64b(math.Inf(1))},
		{"f16/inf-inf", F16, enc(F16, math.Inf(1), math.Inf(-1)), 0x7E00},
		{"bf16/nan", BF16, []uint64{0xFFC1, 0x3F80}, 0x7FC0},
		{"e5m2/inf-saturates", E5M2, []uint64{0x7C, 0x3C}, 0x7B},
		{"e5m2/-inf-saturates", E5M2, []uint64{0xFC, 0x3C}, 0xFB},
		{"e5m2/inf-inf", E5M2, []uint64{0x7C, 0xFC}, 0x7E},
		{"e4m3/nan", E4M3, []uint64{0xFF, 0x38}, 0x7F},
		// Integers wrap like the engine's integer arithmetic.
		{"int8/wrap", I8, []uint64{127, 1}, 0x80},
		{"int8/wrap-down", I8, []uint64{0x80, 0xFF}, 127},
		{"int8/exact-inside", I8, []uint64{127, 127, 0x81, 0x81}, 0},
		{"int32/wrap", I32, []uint64{math.MaxInt32, 1}, 0x80000000},
		{"int32/neg", I32, []uint64{uint64(uint32(0xFFFFFFFF)), uint64(uint32(0xFFFFFFFE))}, 0xFFFFFFFD},
	}
}

func TestHandPicked(t *testing.T) {
	for _, c := range handCases() {
		t.Run(c.name, func(t *testing.T) {
			got := sumBits(t, c.dt, c.in...)
			if got != c.want {
				t.Errorf("Sum = %#x (%v), want %#x (%v)", got, numerics.Decode(c.dt, got), c.want, numerics.Decode(c.dt, c.want))
			}
			if o := oracleSum(t, c.dt, c.in); o != c.want {
				t.Errorf("oracle = %#x, want %#x: the case or the oracle is wrong", o, c.want)
			}
			// Reversed order gives the same bits.
			rev := make([]uint64, len(c.in))
			for i, v := range c.in {
				rev[len(rev)-1-i] = v
			}
			if r := sumBits(t, c.dt, rev...); r != got {
				t.Errorf("reversed Sum = %#x, forward %#x", r, got)
			}
		})
	}
}

func TestPlainFloat32SumLosesIt(t *testing.T) {
	// The reason the mode exists: a plain sum of 1e30 + 1e-30 - 1e30 is 0 in f32 and f64.
	a, b := float32(1e30), float32(1e-30)
	if s := a + b - a; s != 0 {
		t.Fatalf("plain f32 sum = %v; the example no longer shows anything", s)
	}
}

func TestEmptyAndZeroCount(t *testing.T) {
	for _, dt := range append(append([]numerics.DType{}, numerics.Floats...), numerics.Ints...) {
		out := []byte{}
		if err := Sum(dt, [][]byte{{}, {}}, out); err != nil {
			t.Errorf("%v: zero elements: %v", dt, err)
		}
		if err := Sum(dt, nil, out); err != nil {
			t.Errorf("%v: zero elements, no parts: %v", dt, err)
		}
		out = make([]byte, 3*dt.Size())
		for i := range out {
			out[i] = 0xAB
		}
		if err := Sum(dt, nil, out); err != nil {
			t.Fatal(err)
		}
		for i, b := range out {
			if b != 0 {
				t.Errorf("%v: no parts: out[%d] = %#x, want +0", dt, i, b)
			}
		}
		for i := range out {
			out[i] = 0xAB
		}
		if err := Avg(dt, nil, out, 4); err != nil {
			t.Fatal(err)
		}
		for i, b := range out {
			if b != 0 {
				t.Errorf("%v: Avg of no parts: out[%d] = %#x, want +0", dt, i, b)
			}
		}
	}
}

func TestErrors(t *testing.T) {
	cases := []struct {
		name string
		err  error
		code errs.Code
	}{
		{"bool", Sum(numerics.Bool, [][]byte{{1}}, []byte{0}), errs.DType},
		{"invalid", Sum(numerics.Invalid, nil, nil), errs.DType},
		{"out-of-range", Sum(numerics.DType(200), nil, nil), errs.DType},
		{"avg-bool", Avg(numerics.Bool, nil, nil, 1), errs.DType},
		{"part-length", Sum(F32, [][]byte{make([]byte, 8), make([]byte, 4)}, make([]byte, 8)), errs.Input},
		{"out-partial-element", Sum(F32, nil, make([]byte, 6)), errs.Input},
		{"avg-count-0", Avg(F32, [][]byte{make([]byte, 4)}, make([]byte, 4), 0), errs.Input},
		{"avg-count-neg", Avg(I32, [][]byte{make([]byte, 4)}, make([]byte, 4), -2), errs.Input},
	}
	for _, c := range cases {
		if got := errs.CodeOf(c.err); got != c.code {
			t.Errorf("%s: code %q (%v), want %q", c.name, got, c.err, c.code)
		}
	}
}

func TestAvgHandPicked(t *testing.T) {
	cases := []struct {
		name string
		dt   numerics.DType
		n    int
		in   []uint64
		want uint64
	}{
		{"f32/1,2", F32, 2, enc(F32, 1, 2), f32b(1.5)},
		{"f32/cancel", F32, 3, []uint64{f32b(1e30), f32b(3e-30), f32b(-1e30)}, f32b(float32(float64(float32(3e-30)) / 3))},
		{"f64/no-overflow-inside", F64, 3, enc(F64, math.MaxFloat64, math.MaxFloat64, -math.MaxFloat64), f64b(math.MaxFloat64 / 3)},
		{"f64/beyond-f64-is-inf", F64, 2, enc(F64, math.MaxFloat64, math.MaxFloat64), f64b(math.Inf(1))},
		{"f32/count-other-than-parts", F32, 4, enc(F32, 1, 2), f32b(0.75)},
		{"f32/-0", F32, 2, enc(F32, negZero, negZero), f32b(float32(negZero))},
		{"f32/nan", F32, 2, []uint64{0xFFC00001, 0}, 0x7FC00000},
		{"f16/inf", F16, 2, enc(F16, math.Inf(-1), 1), 0xFC00},
		{"int8/no-intermediate-wrap", I8, 3, []uint64{100, 100, 100}, 100},
		{"int8/trunc", I8, 2, []uint64{7, 8}, 7},
		{"int8/trunc-toward-zero", I8, 2, []uint64{0xF9, 0xF8}, 0xF9}, // (-7 + -8)/2 = -7
		{"int32/wrap-after-divide", I32, 1, []uint64{math.MaxInt32, 1}, 0x80000000},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := avgBits(t, c.dt, c.n, c.in...); got != c.want {
				t.Errorf("Avg = %#x (%v), want %#x (%v)", got, numerics.Decode(c.dt, got), c.want, numerics.Decode(c.dt, c.want))
			}
			if o := oracleAvg(t, c.dt, c.in, c.n); o != c.want {
				t.Errorf("oracle = %#x, want %#x", o, c.want)
			}
		})
	}
}

// TestNotComposable documents why the caller must ship raw contributions: summing a group
// exactly and rounding it to the dtype loses what the other groups would have needed, so the
// sum of rounded group sums depends on the grouping. Here 1 + 2^-24 + 2^-24 = 1 + 2^-23 is an
// f32, but the group {1, 2^-24} rounds to 1 (a tie, to even) and the second 2^-24 then ties
// to 1 again.
func TestNotComposable(t *testing.T) {
	x := enc(F32, 1, math.Ldexp(1, -24), math.Ldexp(1, -24))
	whole := sumBits(t, F32, x...)
	group := sumBits(t, F32, sumBits(t, F32, x[0], x[1]), x[2])
	if whole != f32b(1+0x1p-23) {
		t.Fatalf("whole = %#x", whole)
	}
	if group == whole {
		t.Fatalf("grouped sum = whole sum: the example no longer shows non-composability")
	}
}

func TestAliasing(t *testing.T) {
	// Six parts: two groups for the f32 kernel; elements 0 and 3 take the slow path.
	f32vals := [][]uint64{
		enc(F32, 0x1p100, 0x1p-100, -0x1p100, 1, 2, 3),
		enc(F32, 1, 2, 3, 4, 5, 6),
		enc(F32, 0.5, 0.25, 0.125, 1, 1, 1),
		enc(F32, 1, 1, 1, 1, 1, 0x1p-60),
	}
	i32vals := [][]uint64{{1, 2, 3, 4, 5, 6}, {4, 5, 6, 0xFFFFFFFF, 0, 0}}
	for _, dt := range []numerics.DType{F32, F64, I32} {
		vals := f32vals
		switch dt {
		case I32:
			vals = i32vals
		case F64:
			vals = [][]uint64{enc(F64, 1e300, 1, -1e300, 0, 0, 3), enc(F64, 1, 2, 3, 4, 5, 6)}
		}
		for _, avg := range []int{0, 6} {
			do := func(parts [][]byte, out []byte) {
				var err error
				if avg > 0 {
					err = Avg(dt, parts, out, avg)
				} else {
					err = Sum(dt, parts, out)
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			want := make([]byte, len(vals)*dt.Size())
			do(pack(dt, 6, vals), want)
			for k := range 6 {
				parts := pack(dt, 6, vals)
				do(parts, parts[k])
				if string(parts[k]) != string(want) {
					t.Errorf("%v avg=%d: out aliasing part %d: %x, want %x", dt, avg, k, parts[k], want)
				}
			}
		}
	}
}

// TestFormatsMatchNumerics checks the package's table of significand widths and smallest
// subnormals against numerics.
func TestFormatsMatchNumerics(t *testing.T) {
	for _, dt := range numerics.Floats {
		f := formats[dt]
		if got := numerics.Decode(dt, 1); got != math.Ldexp(1, f.uMin) {
			t.Errorf("%v: smallest subnormal %v, table says 2^%d", dt, got, f.uMin)
		}
		// p-1 stored mantissa bits: the pattern 1<<(p-1) is exponent field 1, the smallest
		// normal 2^(uMin+p-1), and the pattern below it the largest subnormal.
		if got := numerics.Decode(dt, 1<<(f.p-1)); got != math.Ldexp(1, f.uMin+f.p-1) {
			t.Errorf("%v: pattern %#x is %v, table says 2^%d", dt, 1<<(f.p-1), got, f.uMin+f.p-1)
		}
		if got := numerics.Decode(dt, 1<<(f.p-1)-1); got != math.Ldexp(1, f.uMin+f.p-1)-math.Ldexp(1, f.uMin) {
			t.Errorf("%v: largest subnormal %v", dt, got)
		}
	}
	if numerics.MaxFinite(BF16) != 0x1.FEp127 {
		t.Errorf("bf16 max %v: the oracle's overflow threshold is wrong", numerics.MaxFinite(BF16))
	}
}

// TestUnaligned: parts and out at odd offsets in their allocations (tensor views can start
// anywhere) give the same bytes as aligned ones. Run with -gcflags=all=-d=checkptr too.
func TestUnaligned(t *testing.T) {
	vals := [][]uint64{
		enc(F32, 1, 2, 3, 4, 5), enc(F32, 0x1p100, 1, -0x1p100, 0, 0), enc(F32, 0.5, 0.25, 1, 2, 3),
	}
	for _, dt := range []numerics.DType{F32, F64} {
		if dt == F64 {
			vals = [][]uint64{enc(F64, 1, 2, 3, 4, 5), enc(F64, 1e300, 1, -1e300, 0, 0)}
		}
		want := make([]byte, len(vals)*dt.Size())
		if err := Sum(dt, pack(dt, 5, vals), want); err != nil {
			t.Fatal(err)
		}
		for off := 1; off < 8; off++ {
			parts := pack(dt, 5, vals)
			for k, p := range parts {
				parts[k] = append(make([]byte, off), p...)[off:]
			}
			out := make([]byte, off+len(want))[off:]
			if err := Sum(dt, parts, out); err != nil {
				t.Fatal(err)
			}
			if string(out) != string(want) {
				t.Errorf("%v offset %d: %x, want %x", dt, off, out, want)
			}
		}
	}
}
