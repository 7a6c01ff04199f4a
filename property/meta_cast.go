package property

import (
	"math"
	"math/rand/v2"
	"sync"

	"pgregory.net/rapid"

	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
)

var castRoundTrip = Property{
	Name:   "meta/cast-round-trip",
	Ops:    []string{"cast"},
	Judged: "bitwise",
	Checks: 300,
	Doc: "cast(cast(x, wide), narrow) is x bit for bit whenever wide holds every narrow value " +
		"(f16 -> f32 -> f16, int8 -> int32 -> int8, fp8 -> bf16 -> fp8, ...), over random bit patterns; " +
		"a NaN comes back as narrow's canonical NaN (docs/numerics.md)",
	Body: func(e Env) func(*rapid.T) {
		return func(t *rapid.T) {
			pr := rapid.SampledFrom(RoundTrips()).Draw(t, "pair")
			s := drawDims(t, "dim", rapid.IntRange(1, 3).Draw(t, "rank"), e.Config.MaxElems)
			seed := rapid.Uint64().Draw(t, "seed")
			in := map[string]*tensor.Tensor{}
			b := graph.NewBuilder("cast_round_trip")
			x := input(b, in, "x", randomBits(pr[0], s, seed))
			back := b.Op("cast", graph.Attrs{"to": graph.DTypeAttr(pr[0])}, b.Op("cast", graph.Attrs{"to": graph.DTypeAttr(pr[1])}, x))
			b.Output(back)
			e.relation(t, "meta/cast-round-trip", build(t, b), in, side{got: 0, tol: bitwise,
				wantFn: func([]*tensor.Tensor) *tensor.Tensor { return canonical(in["x"]) },
				what:   pr[0].String() + " -> " + pr[1].String() + " -> " + pr[0].String()})
		}
	},
}

var (
	tripsOnce sync.Once
	trips     [][2]numerics.DType
)

// RoundTrips lists the (narrow, wide) dtype pairs where wide holds every value of narrow
// exactly, found by converting every value (every pattern of the 8- and 16-bit types; for f32
// and int32 only f64 qualifies, by their definitions).
func RoundTrips() [][2]numerics.DType {
	tripsOnce.Do(func() {
		for _, n := range numerics.All {
			for _, w := range numerics.All {
				if n != w && holds(w, n) {
					trips = append(trips, [2]numerics.DType{n, w})
				}
			}
		}
	})
	return trips
}

func holds(wide, narrow numerics.DType) bool {
	if narrow.Size() >= 4 {
		return wide == numerics.F64 && narrow != numerics.F64
	}
	patterns := uint64(1) << (8 * narrow.Size())
	if narrow == numerics.Bool {
		patterns = 2
	}
	for b := range patterns {
		v := numerics.Decode(narrow, b)
		if math.IsNaN(v) {
			if !wide.IsFloat() {
				return false
			}
			continue
		}
		if numerics.Round(wide, v) != v || math.Signbit(numerics.Round(wide, v)) != math.Signbit(v) {
			return false
		}
	}
	return true
}

// randomBits fills a tensor with uniformly random bit patterns (0 or 1 for bool).
func randomBits(dt numerics.DType, shape []int, seed uint64) *tensor.Tensor {
	t := tensor.New(dt, shape)
	r := rand.New(rand.NewPCG(seed, 0xb175))
	mask := uint64(1)<<(8*dt.Size()) - 1
	if dt.Size() == 8 {
		mask = math.MaxUint64
	}
	if dt == numerics.Bool {
		mask = 1
	}
	for i := range t.Len() {
		t.SetBits(i, r.Uint64()&mask)
	}
	return t
}

// canonical is x as the contract says a cast round trip returns it: every value unchanged, a
// NaN as the dtype's canonical NaN (Encode of the decoded value).
func canonical(x *tensor.Tensor) *tensor.Tensor {
	y := x.Clone()
	for i := range y.Len() {
		y.SetBits(i, numerics.Encode(y.DType, numerics.Decode(y.DType, y.Bits(i))))
	}
	return y
}
