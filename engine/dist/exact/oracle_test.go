package exact

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/big"
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

// The oracle: the exact sum in math/big, rounded once by a method that shares no code with
// the package (only numerics.Decode, the definition of what a pattern means, and, where the
// exact sum is provably a float64, numerics.Encode, the definition of a cast):
//
//   - f64: big.Float.Float64 (nearest even, subnormals and overflow to ±Inf included);
//   - f32: big.Float.Float32 (same; its subnormal branch rounds the p == 0 midpoint to even);
//   - f16, e4m3, e5m2: the exact sum of at most fastParts(dt) values is a float64 (see
//     fastParts: it is K * 2^uMin with |K| <= 2^53), so Float64 is exact (asserted through its
//     Accuracy) and numerics.Encode(dt, that) is the single rounding;
//   - bf16: normal results through a big.Float of precision 8 in ToNearestEven mode (unbounded
//     exponent, so a result above MaxFinite is overflow: +-Inf), subnormal results (|S| <
//     2^-126) by hand: K = |S| * 2^133 split into integer and fraction, rounded half to even.
//
// Special values and the sign of a zero sum follow the rules written in Sum's doc comment,
// applied literally here.

// fataler is what the oracle needs of a *testing.T or *rapid.T.
type fataler interface {
	Fatalf(format string, args ...any)
}

const oraclePrec = 4000 // > 2098 bits of float64's whole range plus log2 of any part count

// exactSum returns the exact sum of the finite contributions and what the special-value rules
// say: special is true when the result is NaN or an infinity (then r is that value).
func exactSum(t fataler, dt numerics.DType, bits []uint64) (s *big.Float, r float64, special bool) {
	var nan, posInf, negInf bool
	allNegZero := len(bits) > 0
	s = new(big.Float).SetPrec(oraclePrec)
	for _, b := range bits {
		v := numerics.Decode(dt, b)
		switch {
		case math.IsNaN(v):
			nan = true
		case math.IsInf(v, 1):
			posInf = true
		case math.IsInf(v, -1):
			negInf = true
		default:
			if !(v == 0 && math.Signbit(v)) {
				allNegZero = false
			}
			if acc := s.Add(s, new(big.Float).SetFloat64(v)).Acc(); acc != big.Exact {
				t.Fatalf("oracle: inexact big.Float add (%v)", acc)
			}
		}
	}
	switch {
	case nan || posInf && negInf:
		return nil, math.NaN(), true
	case posInf:
		return nil, math.Inf(1), true
	case negInf:
		return nil, math.Inf(-1), true
	}
	if s.Sign() == 0 {
		s.SetFloat64(0)
		if allNegZero {
			s.Neg(s)
		}
	}
	return s, 0, false
}

// oracleSum is the bit pattern Sum must produce for one element with these contributions.
func oracleSum(t fataler, dt numerics.DType, bits []uint64) uint64 {
	if dt.IsInt() {
		return oracleInt(dt, bits, 0)
	}
	s, r, special := exactSum(t, dt, bits)
	if special {
		return numerics.Encode(dt, r)
	}
	switch dt {
	case numerics.F64:
		f, _ := s.Float64()
		return math.Float64bits(f)
	case numerics.F32:
		f, _ := s.Float32()
		return uint64(math.Float32bits(f))
	case numerics.BF16:
		return roundBF16(s)
	}
	f, acc := s.Float64()
	if acc != big.Exact {
		t.Fatalf("oracle: the exact %v sum %v is not a float64 (%v): the fastParts argument is wrong", dt, s, acc)
	}
	return numerics.Encode(dt, f)
}

// oracleAvg is round_dt(round_f64(S) / n).
func oracleAvg(t fataler, dt numerics.DType, bits []uint64, n int) uint64 {
	if dt.IsInt() {
		return oracleInt(dt, bits, n)
	}
	s, r, special := exactSum(t, dt, bits)
	if !special {
		r, _ = s.Float64()
	}
	return numerics.Encode(dt, r/float64(n))
}

func oracleInt(dt numerics.DType, bits []uint64, n int) uint64 {
	s := new(big.Int)
	for _, b := range bits {
		s.Add(s, big.NewInt(int64(numerics.Decode(dt, b))))
	}
	if n > 0 {
		s.Quo(s, big.NewInt(int64(n))) // truncates toward zero
	}
	mask := big.NewInt(1<<(8*dt.Size()) - 1)
	return s.And(s, mask).Uint64() // two's complement low bits
}

// roundBF16 rounds an exact value to bf16 (see the comment at the top).
func roundBF16(s *big.Float) uint64 {
	if s.Sign() == 0 {
		if s.Signbit() {
			return 0x8000
		}
		return 0
	}
	a := new(big.Float).Abs(s)
	var r float64
	if a.Cmp(big.NewFloat(0x1p-126)) >= 0 {
		y := new(big.Float).SetPrec(8).SetMode(big.ToNearestEven).Set(a)
		r, _ = y.Float64() // 8 significant bits: exact unless beyond float64, then +Inf
		if r > 0x1.FEp127 {
			r = math.Inf(1)
		}
	} else {
		sc := new(big.Float).SetPrec(oraclePrec).SetMantExp(a, 133)
		k, _ := sc.Int(nil) // truncates
		frac := new(big.Float).SetPrec(oraclePrec).Sub(sc, new(big.Float).SetInt(k))
		if c := frac.Cmp(big.NewFloat(0.5)); c > 0 || c == 0 && k.Bit(0) == 1 {
			k.Add(k, big.NewInt(1))
		}
		r = math.Ldexp(float64(k.Int64()), -133)
	}
	if s.Signbit() {
		r = -r
	}
	return uint64(math.Float32bits(float32(r)) >> 16) // r is on the bf16 grid: exact
}

// --- helpers shared by the tests ---

// pack builds the parts of a Sum call from vals[element][part] bit patterns.
func pack(dt numerics.DType, nparts int, vals [][]uint64) [][]byte {
	size := dt.Size()
	parts := make([][]byte, nparts)
	for p := range parts {
		parts[p] = make([]byte, size*len(vals))
		for e, v := range vals {
			put(dt, parts[p], e, v[p])
		}
	}
	return parts
}

func put(dt numerics.DType, b []byte, i int, v uint64) {
	switch dt.Size() {
	case 8:
		binary.LittleEndian.PutUint64(b[8*i:], v)
	case 4:
		binary.LittleEndian.PutUint32(b[4*i:], uint32(v))
	case 2:
		binary.LittleEndian.PutUint16(b[2*i:], uint16(v))
	default:
		b[i] = byte(v)
	}
}

// sumBits runs Sum on one element with these contributions.
func sumBits(t testing.TB, dt numerics.DType, bits ...uint64) uint64 {
	t.Helper()
	parts := pack(dt, len(bits), [][]uint64{bits})
	out := make([]byte, dt.Size())
	if err := Sum(dt, parts, out); err != nil {
		t.Fatal(err)
	}
	return load(dt, out, 0)
}

func avgBits(t testing.TB, dt numerics.DType, n int, bits ...uint64) uint64 {
	t.Helper()
	parts := pack(dt, len(bits), [][]uint64{bits})
	out := make([]byte, dt.Size())
	if err := Avg(dt, parts, out, n); err != nil {
		t.Fatal(err)
	}
	return load(dt, out, 0)
}

func enc(dt numerics.DType, vs ...float64) []uint64 {
	b := make([]uint64, len(vs))
	for i, v := range vs {
		b[i] = numerics.Encode(dt, v)
		if numerics.Decode(dt, b[i]) != v && !math.IsNaN(v) {
			panic(fmt.Sprintf("test value %v not representable in %v", v, dt))
		}
	}
	return b
}
