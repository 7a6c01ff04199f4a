package numerics_test

import (
	"math/rand/v2"
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

var benchDTypes = []numerics.DType{numerics.F32, numerics.F16, numerics.BF16, numerics.F8E4M3}

var sink float64
var sinkBits uint64

func BenchmarkEncode(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 1))
	xs := make([]float64, 1024)
	for i := range xs {
		xs[i] = rng.NormFloat64() * 10
	}
	for _, d := range benchDTypes {
		b.Run(d.String(), func(b *testing.B) {
			var acc uint64
			for i := 0; b.Loop(); i++ {
				acc += numerics.Encode(d, xs[i&1023])
			}
			sinkBits = acc
		})
	}
}

func BenchmarkDecode(b *testing.B) {
	rng := rand.New(rand.NewPCG(2, 2))
	for _, d := range benchDTypes {
		bits := make([]uint64, 1024)
		for i := range bits {
			bits[i] = numerics.Encode(d, rng.NormFloat64()*10)
		}
		b.Run(d.String(), func(b *testing.B) {
			var acc float64
			for i := 0; b.Loop(); i++ {
				acc += numerics.Decode(d, bits[i&1023])
			}
			sink = acc
		})
	}
}

func BenchmarkRound(b *testing.B) {
	rng := rand.New(rand.NewPCG(3, 3))
	xs := make([]float64, 1024)
	for i := range xs {
		xs[i] = rng.NormFloat64() * 10
	}
	for _, d := range benchDTypes {
		b.Run(d.String(), func(b *testing.B) {
			var acc float64
			for i := 0; b.Loop(); i++ {
				acc += numerics.Round(d, xs[i&1023])
			}
			sink = acc
		})
	}
}
