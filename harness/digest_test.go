package harness

import (
	"math"
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/tensor"
)

func TestDigests(t *testing.T) {
	a, b := f32(1, 2), f32(1, 3)
	d := Digests([]*tensor.Tensor{a, b, nil})
	if d[0] != a.Digest() || d[1] != b.Digest() || d[2] != NilDigest {
		t.Fatalf("Digests = %v", d)
	}
	ab := CombinedDigest([]*tensor.Tensor{a, b})
	if ab != CombinedDigest([]*tensor.Tensor{a.Clone(), b.Clone()}) {
		t.Error("combined digest is not a function of the bits")
	}
	if ab == CombinedDigest([]*tensor.Tensor{b, a}) {
		t.Error("combined digest ignores order")
	}
	if ab == CombinedDigest([]*tensor.Tensor{a}) || CombinedDigest(nil) == CombinedDigest([]*tensor.Tensor{nil}) {
		t.Error("combined digest ignores the count")
	}
	if CombinedDigest([]*tensor.Tensor{f32(0)}) == CombinedDigest([]*tensor.Tensor{f32(math.Copysign(0, -1))}) {
		t.Error("-0 and +0 must digest differently")
	}
	if len(ab) != 64 {
		t.Errorf("combined digest %q is not hex SHA-256", ab)
	}
}
