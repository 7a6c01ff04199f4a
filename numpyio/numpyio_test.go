package numpyio

import (
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

// TestTensorsCoverEveryDTypeAndRank: the engine side holds every dtype at ranks 0, 1 and
// above, with varied bits (the NumPy round trip itself is suites/numpyio).
func TestTensorsCoverEveryDTypeAndRank(t *testing.T) {
	names, ts := Tensors()
	ranks := map[numerics.DType]map[int]bool{}
	for i, x := range ts {
		if ranks[x.DType] == nil {
			ranks[x.DType] = map[int]bool{}
		}
		ranks[x.DType][len(x.Shape)] = true
		if x.Len() > 2 && x.Bits(0) == x.Bits(1) && x.Bits(1) == x.Bits(2) {
			t.Errorf("%s: constant bits %#x", names[i], x.Bits(0))
		}
	}
	for _, dt := range numerics.All {
		for _, r := range []int{0, 1, 2, 4} {
			if !ranks[dt][r] {
				t.Errorf("%s has no rank-%d tensor", dt, r)
			}
		}
	}
}

func TestEntryStatesTheEnginesBits(t *testing.T) {
	_, ts := Tensors()
	for _, x := range ts {
		e := entryOf(x)
		if len(e.Bits) != x.Len() || (x.Len() > 0 && e.Bits[0] != x.Bits(0)) {
			t.Fatalf("%s: entry bits %v", x.TypeString(), e.Bits)
		}
	}
}
