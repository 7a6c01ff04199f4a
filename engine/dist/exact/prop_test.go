package exact

import (
	"math"
	"math/big"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"pgregory.net/rapid"
)

func widthMask(dt numerics.DType) uint64 {
	if dt.Size() == 8 {
		return math.MaxUint64
	}
	return 1<<(8*dt.Size()) - 1
}

func signBit(dt numerics.DType) uint64 { return 1 << (8*dt.Size() - 1) }

// specials lists the patterns at the edges of dt: zeros, infinities (raw patterns, where the
// format has them), NaN, the largest and smallest finite values.
func specials(dt numerics.DType) []uint64 {
	f := formats[dt]
	s := signBit(dt)
	maxBits := numerics.Encode(dt, numerics.MaxFinite(dt))
	minNormal := uint64(1) << (f.p - 1)
	v := []uint64{0, s, numerics.Encode(dt, math.NaN()), maxBits, maxBits | s, 1, 1 | s,
		minNormal, minNormal | s, minNormal - 1, numerics.Encode(dt, 1), numerics.Encode(dt, -1)}
	if dt != E4M3 {
		inf := maxBits + 1 // IEEE layout: the pattern after the largest finite one
		v = append(v, inf, inf|s)
	}
	return v
}

// drawBits draws one contribution: raw patterns (every exponent, subnormals and specials),
// edge values, "data" near 1, subnormals, or the negation of an earlier contribution of the
// same element nudged by a few ulps (cancellation).
func drawBits(t *rapid.T, dt numerics.DType, prev []uint64) uint64 {
	mask := widthMask(dt)
	kind := rapid.IntRange(0, 9).Draw(t, "kind")
	if dt.IsInt() && kind >= 3 && kind <= 7 {
		// Edges and small numbers; raw patterns and negations as for floats.
		edges := []uint64{0, 1, mask, signBit(dt), signBit(dt) - 1, signBit(dt) + 1}
		if kind == 3 {
			return rapid.SampledFrom(edges).Draw(t, "edge")
		}
		return uint64(rapid.IntRange(-100, 100).Draw(t, "small")) & mask
	}
	switch {
	case kind <= 2:
		return rapid.Uint64().Draw(t, "raw") & mask
	case kind == 3:
		return rapid.SampledFrom(specials(dt)).Draw(t, "special")
	case kind <= 6:
		v := math.Ldexp(1+rapid.Float64Range(0, 1).Draw(t, "frac"), rapid.IntRange(-12, 12).Draw(t, "exp"))
		if rapid.Bool().Draw(t, "neg") {
			v = -v
		}
		return numerics.Encode(dt, v)
	case kind == 7:
		sub := rapid.Uint64Range(0, 1<<(formats[dt].p-1)+3).Draw(t, "sub")
		if rapid.Bool().Draw(t, "neg") {
			sub |= signBit(dt)
		}
		return sub
	}
	if len(prev) == 0 {
		return rapid.Uint64().Draw(t, "raw") & mask
	}
	b := rapid.SampledFrom(prev).Draw(t, "of") ^ signBit(dt)
	if dt.IsInt() {
		b = -rapid.SampledFrom(prev).Draw(t, "of")
	}
	return (b + uint64(rapid.IntRange(-2, 2).Draw(t, "nudge"))) & mask
}

// drawCase draws vals[element][part] for 1..6 elements and 1..16 parts.
func drawCase(t *rapid.T, dt numerics.DType) (nparts int, vals [][]uint64) {
	nparts = rapid.IntRange(1, 16).Draw(t, "parts")
	vals = make([][]uint64, rapid.IntRange(1, 6).Draw(t, "elems"))
	for e := range vals {
		for range nparts {
			vals[e] = append(vals[e], drawBits(t, dt, vals[e]))
		}
	}
	return nparts, vals
}

func run(t *rapid.T, dt numerics.DType, nparts int, vals [][]uint64, avg int) []uint64 {
	out := make([]byte, len(vals)*dt.Size())
	var err error
	if avg > 0 {
		err = Avg(dt, pack(dt, nparts, vals), out, avg)
	} else {
		err = Sum(dt, pack(dt, nparts, vals), out)
	}
	if err != nil {
		t.Fatal(err)
	}
	got := make([]uint64, len(vals))
	for e := range got {
		got[e] = load(dt, out, e)
	}
	return got
}

var allDTypes = append(append([]numerics.DType{}, numerics.Floats...), numerics.Ints...)

// (a) Sum equals the oracle bit for bit.
func TestSumMatchesOracle(t *testing.T) {
	for _, dt := range allDTypes {
		t.Run(dt.String(), func(t *testing.T) { rapid.Check(t, sumMatchesOracle(dt)) })
	}
}

// TestPortablePath runs f32 and f64 through the path that big-endian hosts take (no typed
// views, f32 through the generic checked phase).
func TestPortablePath(t *testing.T) {
	defer func(v bool) { nativeLE = v }(nativeLE)
	nativeLE = false
	for _, dt := range []numerics.DType{F32, F64} {
		t.Run(dt.String(), func(t *testing.T) { rapid.Check(t, sumMatchesOracle(dt)) })
	}
}

func sumMatchesOracle(dt numerics.DType) func(*rapid.T) {
	return func(rt *rapid.T) {
		nparts, vals := drawCase(rt, dt)
		got := run(rt, dt, nparts, vals, 0)
		for e, v := range vals {
			if want := oracleSum(rt, dt, v); got[e] != want {
				rt.Fatalf("element %d %#x: Sum = %#x (%v), oracle %#x (%v)", e, v, got[e],
					numerics.Decode(dt, got[e]), want, numerics.Decode(dt, want))
			}
		}
	}
}

// Avg equals round_dt(round_f64(S)/n) computed in math/big, for n = len(parts) and others.
func TestAvgMatchesOracle(t *testing.T) {
	for _, dt := range allDTypes {
		t.Run(dt.String(), func(t *testing.T) {
			rapid.Check(t, func(rt *rapid.T) {
				nparts, vals := drawCase(rt, dt)
				n := nparts
				if rapid.Bool().Draw(rt, "other-n") {
					n = rapid.IntRange(1, 1000).Draw(rt, "n")
				}
				got := run(rt, dt, nparts, vals, n)
				for e, v := range vals {
					if want := oracleAvg(rt, dt, v, n); got[e] != want {
						rt.Fatalf("element %d %#x n=%d: Avg = %#x, oracle %#x", e, v, n, got[e], want)
					}
				}
			})
		})
	}
}

// (b) and (c): the result depends on the multiset of an element's contributions only. Each
// element's contributions are shuffled independently (which covers a permutation of the
// parts, and any re-split of the contributions over ranks: the communicator's gather hands
// the owner the same multiset whatever the world size). Sums of rounded group sums are not
// compared: they are not composable (TestNotComposable).
func TestOrderAndSplitIndependent(t *testing.T) {
	for _, dt := range allDTypes {
		t.Run(dt.String(), func(t *testing.T) {
			rapid.Check(t, func(rt *rapid.T) {
				nparts, vals := drawCase(rt, dt)
				want := run(rt, dt, nparts, vals, 0)
				wantAvg := run(rt, dt, nparts, vals, nparts)
				// Whole parts permuted.
				perm := rapid.Permutation(iota(nparts)).Draw(rt, "perm")
				pv := make([][]uint64, len(vals))
				for e, v := range vals {
					for _, k := range perm {
						pv[e] = append(pv[e], v[k])
					}
				}
				// Each element shuffled on its own.
				sv := make([][]uint64, len(vals))
				for e, v := range vals {
					sv[e] = rapid.Permutation(v).Draw(rt, "shuffle")
				}
				for name, x := range map[string][][]uint64{"permuted": pv, "shuffled": sv} {
					got := run(rt, dt, nparts, x, 0)
					gotAvg := run(rt, dt, nparts, x, nparts)
					for e := range got {
						if got[e] != want[e] || gotAvg[e] != wantAvg[e] {
							rt.Fatalf("%s element %d: Sum %#x vs %#x, Avg %#x vs %#x", name, e, got[e], want[e], gotAvg[e], wantAvg[e])
						}
					}
				}
			})
		})
	}
}

func iota(n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = i
	}
	return s
}

// TestLongVectors crosses block boundaries with fast and slow elements interleaved, out
// aliasing parts[0], against the oracle.
func TestLongVectors(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, dt := range numerics.Floats {
		for _, nparts := range []int{1, 2, 5} {
			const n = 3*block + 17
			vals := make([][]uint64, n)
			for e := range vals {
				for range nparts {
					var b uint64
					switch r.IntN(4) {
					case 0:
						b = r.Uint64() & widthMask(dt)
					default:
						b = numerics.Encode(dt, r.NormFloat64()*math.Ldexp(1, r.IntN(5)))
					}
					vals[e] = append(vals[e], b)
				}
			}
			parts := pack(dt, nparts, vals)
			if err := Sum(dt, parts, parts[0]); err != nil {
				t.Fatal(err)
			}
			for e, v := range vals {
				if got, want := load(dt, parts[0], e), oracleSum(t, dt, v); got != want {
					t.Fatalf("%v %d parts element %d %#x: got %#x want %#x", dt, nparts, e, v, got, want)
				}
			}
		}
	}
}

// TestFastPartsBound verifies the claim that f16 and fp8 need no per-element check for any
// realistic number of parts: the bound is what the range argument says, at least 8192, and
// at the bound the worst element (all parts at the largest magnitude and one at the
// smallest subnormal) sums exactly in float64; one part beyond it would not.
func TestFastPartsBound(t *testing.T) {
	for _, dt := range []numerics.DType{F16, E4M3, E5M2} {
		n := fastParts(dt)
		if n < 8192 {
			t.Errorf("%v: fastParts = %d, want >= 8192", dt, n)
		}
		unit := new(big.Float).SetMantExp(big.NewFloat(1), formats[dt].uMin)
		units := func(k int) *big.Float { // k * MaxFinite in units of 2^uMin
			x := new(big.Float).SetPrec(200).SetFloat64(numerics.MaxFinite(dt))
			x.Mul(x, new(big.Float).SetInt64(int64(k)))
			return x.Quo(x, unit)
		}
		lim := new(big.Float).SetMantExp(big.NewFloat(1), 53)
		if units(n).Cmp(lim) > 0 || units(n+1).Cmp(lim) <= 0 {
			t.Errorf("%v: fastParts = %d is not the largest n with n*max/2^uMin <= 2^53", dt, n)
		}
		if n > 1<<24 {
			continue // e4m3's bound is 3.9e10 parts: the argument above is the test
		}
		// n-1 maxima and a smallest subnormal, the worst exactness case, summed in float64.
		s := math.Ldexp(1, formats[dt].uMin)
		for range n - 1 {
			s += numerics.MaxFinite(dt)
		}
		want := new(big.Float).SetPrec(200).SetFloat64(numerics.MaxFinite(dt))
		want.Mul(want, new(big.Float).SetInt64(int64(n-1)))
		want.Add(want, new(big.Float).SetFloat64(math.Ldexp(1, formats[dt].uMin)))
		if new(big.Float).SetFloat64(s).Cmp(want) != 0 {
			t.Errorf("%v: %d parts: float64 sum %v is not exact (%v)", dt, n, s, want)
		}
	}
}

// TestManyPartsF16 runs f16 at and just beyond fastParts, where the per-element check takes
// over, with extreme values, against the oracle.
func TestManyPartsF16(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, nparts := range []int{fastParts(F16), fastParts(F16) + 1} {
		vals := make([][]uint64, 4)
		for e := range vals {
			for k := range nparts {
				b := numerics.Encode(F16, 65504)
				switch {
				case k == 0:
					b = 1 // smallest subnormal
				case e == 1 && k%2 == 1:
					b |= 0x8000 // cancels
				case e == 2:
					b = r.Uint64() & 0x7BFF // random finite
				case e == 3:
					b = 0x8001
				}
				vals[e] = append(vals[e], b)
			}
		}
		out := make([]byte, 2*len(vals))
		if err := Sum(F16, pack(F16, nparts, vals), out); err != nil {
			t.Fatal(err)
		}
		for e, v := range vals {
			if got, want := load(F16, out, e), oracleSum(t, F16, v); got != want {
				t.Errorf("%d parts element %d: got %#x want %#x", nparts, e, got, want)
			}
		}
	}
}

// runPhase runs the phase function Sum would pick on one block and reports which elements
// fail the check.
func runPhase(dt numerics.DType, nparts int, vals [][]uint64) (*scratch, []bool) {
	sc := new(scratch)
	bad := make([]bool, len(vals))
	if dt == F32 {
		out := make([]byte, 4*len(vals))
		nb := sc.f32Block(pack(dt, nparts, vals), 0, len(vals), out, f32Lim(nparts), 0, 0)
		for _, i := range sc.bad[:nb] {
			bad[i] = true
		}
		// The kernel does not keep the float64 sums of the last group: recompute them for
		// TestFastPathIsExact, in the kernel's order (any order is exact where the check passes).
		for e, v := range vals {
			sc.acc[e] = math.Copysign(0, -1)
			for _, b := range v {
				sc.acc[e] += numerics.Decode(F32, b)
			}
		}
		return sc, bad
	}
	phase, ck := phaseFor(dt, nparts)
	phase(sc, dt, pack(dt, nparts, vals), 0, len(vals), int32(ceilLog2(nparts)))
	for i := range bad {
		bad[i] = ck.fails(sc, i)
	}
	return sc, bad
}

// TestPathsTaken checks that the fast path takes ordinary data and the slow path takes what
// float64 cannot hold, so that the tests above exercise both.
func TestPathsTaken(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, nparts := range []int{1, 3, 4, 7, 16} {
		vals := make([][]uint64, block)
		for e := range vals {
			for range nparts {
				vals[e] = append(vals[e], f32b(float32(r.NormFloat64())))
			}
		}
		if _, bad := runPhase(F32, nparts, vals); slices.Contains(bad, true) {
			t.Errorf("f32 %d parts: random normal data went to the slow path", nparts)
		}
	}
	cases := []struct {
		dt   numerics.DType
		vals [][]uint64
		want []bool
	}{
		{F32, [][]uint64{{f32b(1e30), f32b(1e-30), f32b(-1e30)}, {f32b(1e30), 0, f32b(float32(negZero))}, {0, 0, 0}}, []bool{true, false, false}},
		{F32, [][]uint64{enc(F32, 1, 2, 3, 4, 5), enc(F32, 1, 2, 3, 4, 0x1p-40), {0x7F800000, 0xFF800000, 0, 0, 0}}, []bool{false, true, false}},
		{BF16, [][]uint64{enc(BF16, 0x1p60, 0x1p10, -0x1p60), enc(BF16, 1, 0x1p-30, 3)}, []bool{true, false}},
		{F64, [][]uint64{enc(F64, 1, 2), enc(F64, 0.1, 0.2), enc(F64, float64(float32(0.1)), float64(float32(0.2))), enc(F64, math.Inf(1), 1)}, []bool{false, true, false, true}},
		{F16, [][]uint64{enc(F16, 65504, 0x1p-24)}, []bool{false}},
	}
	for _, c := range cases {
		if _, bad := runPhase(c.dt, len(c.vals[0]), c.vals); !slices.Equal(bad, c.want) {
			t.Errorf("%v %#x: slow path %v, want %v", c.dt, c.vals, bad, c.want)
		}
	}
}

// TestFastPathIsExact tests the fast path's invariant directly: wherever the per-element
// check lets an element through, the float64 sum that phase one computed IS the exact sum
// (not merely a sum that happens to round to the right answer). The values sit at the edge
// of the check: exponents spread over the check's limit and a little beyond, mantissas
// all-ones, odd or zero, part counts on both sides of a power of two, and for f64 the top of
// the exponent range, where a partial sum can overflow.
func TestFastPathIsExact(t *testing.T) {
	type phase struct {
		dt     numerics.DType
		spread int // exponent spread to draw from
		near   int // the largest spread of exponent fields the check can let through, for L = 0
		parts  []int
		elems  int
	}
	small := []int{1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17}
	phases := []phase{
		{F32, 40, 29, small, 8},
		{BF16, 56, 45, small, 8},
		{F64, 60, 52, small, 8},
		{F16, 45, 42, []int{fastParts(F16) + 1}, 1}, // the checked path; below it there is no check
	}
	for _, ph := range phases {
		t.Run(ph.dt.String(), func(t *testing.T) {
			f := formats[ph.dt]
			manBits := f.p - 1
			rapid.Check(t, func(rt *rapid.T) {
				nparts := rapid.SampledFrom(ph.parts).Draw(rt, "parts")
				// Biased exponent fields: near the top, the bottom, or anywhere.
				maxField := int(numerics.Encode(ph.dt, numerics.MaxFinite(ph.dt)) >> manBits)
				top := rapid.OneOf(rapid.Just(maxField), rapid.Just(ph.spread), rapid.IntRange(1, maxField)).Draw(rt, "top")
				near := ph.near - ceilLog2(nparts)
				down := rapid.OneOf(rapid.SampledFrom([]int{0, 0, 0, 1, near - 1, near, near + 1}), rapid.IntRange(0, ph.spread))
				vals := make([][]uint64, rapid.IntRange(1, ph.elems).Draw(rt, "elems"))
				for e := range vals {
					for range nparts {
						field := min(max(top-down.Draw(rt, "down"), 0), maxField)
						var man uint64
						switch rapid.IntRange(0, 3).Draw(rt, "man") {
						case 0:
							man = 1<<manBits - 1
						case 1:
							man = rapid.Uint64Range(0, 1<<manBits-1).Draw(rt, "m") | 1
						case 2:
							man = rapid.Uint64Range(0, 1<<manBits-1).Draw(rt, "m")
						}
						b := uint64(field)<<manBits | man
						if rapid.Bool().Draw(rt, "neg") {
							b |= signBit(ph.dt)
						}
						vals[e] = append(vals[e], b)
					}
				}
				sc, bad := runPhase(ph.dt, nparts, vals)
				for e, v := range vals {
					if bad[e] {
						continue
					}
					s, r, special := exactSum(rt, ph.dt, v)
					if special {
						if !(math.IsNaN(r) && math.IsNaN(sc.acc[e]) || r == sc.acc[e]) {
							rt.Fatalf("element %d %#x: fast sum %v, want %v", e, v, sc.acc[e], r)
						}
						continue
					}
					if got := new(big.Float).SetFloat64(sc.acc[e]); math.IsInf(sc.acc[e], 0) || got.Cmp(s) != 0 {
						rt.Fatalf("element %d %#x passed the check but its float64 sum %v is not the exact %v",
							e, v, sc.acc[e], s)
					}
				}
			})
		})
	}
}

// TestManyPartsCancellation: beyond fastParts an f16 partial sum can outgrow float64's
// 53 bits and later cancel back into range, so the check is needed there: 8200 maxima, the
// smallest subnormal, then 8200 negated maxima sum exactly to the smallest subnormal, which
// a float64 sum in that order loses.
func TestManyPartsCancellation(t *testing.T) {
	const k = 8200
	v := make([]uint64, 0, 2*k+1)
	for range k {
		v = append(v, 0x7BFF)
	}
	v = append(v, 1)
	for range k {
		v = append(v, 0xFBFF)
	}
	if got := sumBits(t, F16, v...); got != 1 {
		t.Errorf("Sum = %#x, want 0x1 (the smallest subnormal)", got)
	}
	var s float64
	for _, b := range v {
		s += numerics.Decode(F16, b)
	}
	if s != 0 {
		t.Errorf("plain float64 sum %v: the example no longer needs the check", s)
	}
}

// TestCheckIsTight builds, for part counts where the L bits of carry room are all needed,
// the worst element at the check's limit and one exponent beyond it: n-1 values with an
// all-ones significand at exponent field E and one with an odd significand `spread` fields
// lower. At the limit the float64 sum is exact and the check passes; one beyond, the float64
// sum is inexact and the check must (and does) fail. So the limits cannot be loosened.
func TestCheckIsTight(t *testing.T) {
	for _, c := range []struct {
		dt      numerics.DType
		span    int // the check's spread for L = 0
		manBits uint
	}{{F32, f32Span, 23}, {BF16, 45, 7}} {
		for _, n := range []int{4, 7, 8, 16} {
			lim := c.span - ceilLog2(n)
			for _, spread := range []int{lim, lim + 1} {
				const field = 200
				big1 := uint64(field)<<c.manBits | (1<<c.manBits - 1)
				small := uint64(field-spread)<<c.manBits | 1
				v := []uint64{small}
				for range n - 1 {
					v = append(v, big1)
				}
				var s float64
				for _, b := range slices.Backward(v) {
					s += numerics.Decode(c.dt, b)
				}
				exact, _, _ := exactSum(t, c.dt, v)
				isExact := new(big.Float).SetFloat64(s).Cmp(exact) == 0
				_, bad := runPhase(c.dt, n, [][]uint64{v})
				if want := spread > lim; bad[0] != want || isExact == want {
					t.Errorf("%v n=%d spread %d (limit %d): check fails %v, float64 sum exact %v", c.dt, n, spread, lim, bad[0], isExact)
				}
			}
		}
	}
}
