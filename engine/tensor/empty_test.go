package tensor

import (
	"bytes"
	"slices"
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

// Empty tensors (a dim of size 0) of every dtype go through .npz and come back with their
// shape, dtype and no bytes; the shape must survive exactly ((0,3) is not (3,0) or (0,)).
func TestEmptyTensorsRoundTripThroughNPZ(t *testing.T) {
	shapes := [][]int{{0}, {0, 3}, {3, 0}, {2, 0, 5}}
	var names []string
	var ts []*Tensor
	for _, dt := range numerics.All {
		for i, s := range shapes {
			names = append(names, dt.String()+"_"+string(rune('a'+i)))
			ts = append(ts, New(dt, s))
		}
	}
	var buf bytes.Buffer
	if err := WriteNPZ(&buf, names, ts); err != nil {
		t.Fatal(err)
	}
	arrays := readBack(t, buf.Bytes())
	if len(arrays) != len(ts) {
		t.Fatalf("%d arrays back, want %d", len(arrays), len(ts))
	}
	for i, a := range arrays {
		back, err := a.As(ts[i].DType)
		if err != nil {
			t.Fatalf("%s: %v", names[i], err)
		}
		if a.Name != names[i] || !slices.Equal(back.Shape, ts[i].Shape) || len(back.Data) != 0 || back.Len() != 0 {
			t.Errorf("%s: got %s %q with %d bytes, want %s", names[i], a.Name, back.TypeString(), len(back.Data), ts[i].TypeString())
		}
		if back.Digest() != ts[i].Digest() {
			t.Errorf("%s: digest changed", names[i])
		}
	}
	// Two empty tensors of different shapes are different values: their digests differ.
	if New(numerics.F32, []int{0, 3}).Digest() == New(numerics.F32, []int{3, 0}).Digest() {
		t.Error("digest of f32[0,3] equals f32[3,0]")
	}
}
